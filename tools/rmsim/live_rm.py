"""The one live ResourceManager: the RM core on the real-time clock, with real task
processes, built the same way for ``gangmaster rm serve`` and ``gangmaster run --live``.

What "live" means, in one place: a :class:`~.clock.RealTimeLoop` and the core share one
lock (the clock's callbacks, the gRPC handlers and an in-process AM's heartbeats never
interleave); containers are processes under a
:class:`~.process_nodemanager.ProcessNodeManager`; the ``rm:`` knobs of the configuration
(:class:`~.rm_settings.RMSettings`: poll interval, kill grace, allocation expiry,
scheduling interval, state save interval) apply; a fault scenario plays on the real
clock; and, given a state file, the RM saves itself and comes back from it::

    live = LiveRM.from_settings(specs, queues, RMSettings.load(), scenario=scenario,
                                state_path="rm-state.json", work_dir="rm-tasks")
    ...                      # serve it (server.start_server) or drive an AM on it (job_runner.LiveRuns)
    live.stop()

Without a state file nothing could adopt a task after this process dies, so every task
is tied to this process and ends with it, even after ``kill -9``; with one, tasks
outlive the RM and the restarted RM adopts them.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.settings import SelectionSettings

from . import state as state_file
from .clock import RealTimeLoop
from .core import ResourceManager
from .preemption_monitor import DeclaredGangs, PreemptionMonitor
from .process_nodemanager import ProcessNodeManager
from .queues import Queue
from .rm_settings import RMSettings
from .scenario import Scenario

log = logging.getLogger(__name__)


class LiveRM:
    """Owns the real-time clock, the process NodeManager, the core and the state file."""

    def __init__(self, specs: list[NodeSpec], queues: list[Queue] | None = None, state_path: str | Path | None = None,
                 work_dir: str | Path | None = None, poll_s: float = 0.1, save_every_s: float = 0.2,
                 kill_grace_s: float = 2.0, allocation_expiry_s: float | None = None,
                 scheduling_interval_s: float | None = None, scenario: Scenario | None = None):
        self.state_path = Path(state_path) if state_path else None
        lock = threading.RLock()
        if work_dir is None:
            work_dir = (self.state_path.parent / (self.state_path.name + ".tasks")) if self.state_path else \
                Path.cwd() / "rm-tasks"
        restored = self.state_path is not None and self.state_path.exists()
        start = 0.0
        if restored:
            try:    # bounded, and a FIFO or /dev/zero refused (state_file.load below says why)
                start = float(state_file.read(self.state_path).get("time", 0.0))
            except (ValueError, TypeError):
                start = 0.0
        self.clock = RealTimeLoop(lock, start=start)
        self.node_manager = ProcessNodeManager(self.clock, work_dir, poll_s=poll_s, kill_grace_s=kill_grace_s,
                                               tasks_outlive_rm=self.state_path is not None)
        if restored:
            self.core = state_file.load(self.state_path, self.clock, self.node_manager)
            log.info("restored RM state from %s: %d node(s), %d application(s), %d live container(s)",
                     self.state_path, len(self.core.ledger), len(self.core.apps),
                     sum(1 for c in self.core.containers.values() if not c.state.finished))
        else:
            self.core = ResourceManager(specs, queues, clock=self.clock, node_manager=self.node_manager, lock=lock,
                                        allocation_expiry_s=allocation_expiry_s,
                                        scheduling_interval_s=scheduling_interval_s)
        if restored and allocation_expiry_s is not None:
            self.core.restart_allocation_expiry(allocation_expiry_s)
        self.restored = restored
        #: the preemption monitor's look at declared gangs (``rm serve`` with ``rm.preemption``; None: off)
        self.declared_gangs: DeclaredGangs | None = None
        self._saved_version = -1
        self.save()
        if self.state_path is not None:
            self.clock.every(save_every_s, self.save)
        if scenario is not None:
            self.play(scenario)

    @classmethod
    def from_settings(cls, specs: list[NodeSpec], queues: list[Queue] | None, knobs: RMSettings, *,
                      work_dir: str | Path | None = None, state_path: str | Path | None = None,
                      scenario: Scenario | None = None) -> "LiveRM":
        """The live RM as the configuration's ``rm:`` section sets it up (both commands build it here)."""
        return cls(specs, queues, state_path=state_path, work_dir=work_dir, poll_s=knobs.process_poll_s,
                   save_every_s=knobs.state_save_interval_s, kill_grace_s=knobs.kill_grace_s,
                   allocation_expiry_s=knobs.allocation_expiry_s,
                   scheduling_interval_s=knobs.scheduling_interval_s, scenario=scenario)

    def monitor_preemption(self, grace_s: float, selection: SelectionSettings) -> None:
        """Turn the RM's preemption monitor on for AMs in other processes (``gangmaster rm serve``):
        after each heartbeat of an application whose declared gang waits for room, it preempts
        lower-priority gangs if that makes the room (:class:`~.preemption_monitor.DeclaredGangs`;
        an AM in this process is looked at by its driver instead, ``job_runner``)."""
        self.declared_gangs = DeclaredGangs(PreemptionMonitor(self.core, grace_s, log.info), selection)

    def heartbeat(self, app_id: str) -> None:
        """What the RM does after ``app_id``'s AM heartbeat (an allocate call) besides answering it."""
        if self.declared_gangs is not None:
            with self.core.lock:
                self.declared_gangs.heartbeat(app_id)

    def play(self, scenario: Scenario) -> None:
        """Put the scenario's steps on the clock, their times counted from now."""
        with self.core.lock:
            scenario.schedule(self.core)

    def save(self) -> None:
        if self.state_path is None:
            return
        with self.core.lock:
            if self.core.version == self._saved_version:
                return
            state_file.save(self.core, self.state_path)
            self._saved_version = self.core.version

    def stop(self) -> int:
        """Save, stop the clock (nothing scheduled acts on what follows), then stop every
        task tied to this process (gone when this returns); returns how many had to be stopped."""
        self.save()
        self.clock.stop()
        return self.node_manager.shutdown()
