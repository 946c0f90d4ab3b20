"""Drivers that run jobs through the AM on the RM simulator.

* :class:`SimulatedRuns` — virtual time: tasks are timers of their simulated
  duration; a day of cluster time passes in moments, and the same inputs give
  the same run.
* :class:`LiveRuns` — real time: tasks are real local processes started by the
  RM's process NodeManager, and they meet at barriers served by a real gRPC
  coordinator inside the AM.

Both do what YARN does for an AM: submit the application, start the AM once it
is accepted, call its heartbeat on the clock, and start a new AM when the RM
declares the running one dead (``kill_am`` in a scenario, a missed heartbeat).
The new AM recovers the job from the journal in the same work folder.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gangmaster.am.am_settings import AMSettings
from gangmaster.am.jobspec_model import JobSpec
from gangmaster.am.master import ApplicationMaster
from gangmaster.am.metrics import AMMetrics
from gangmaster.am.rm_client import InProcessRMClient
from gangmaster.am.rm_protocol import ApplicationSubmission
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.settings import SelectionSettings

from .rmsim.clock import RealTimeLoop
from .rmsim.core import ResourceManager, RMEvent
from .rmsim.nodemanager import ProcessNodeManager
from .rmsim.queues import Queue
from .rmsim.scenario import Scenario
from .rmsim.simulation import Simulation

#: A crashed AM is started again this long after the RM declares it dead (seconds).
AM_RESTART_DELAY_S = 2.0
#: The signals that end a live run early: its tasks are stopped first (see LiveRuns.run).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger(__name__)


@dataclass
class JobRun:
    """One job submitted to the RM, and every AM that has served it."""

    job: JobSpec
    app_id: str
    work_dir: Path
    queue: str
    ams: list[ApplicationMaster] = field(default_factory=list)
    metrics: AMMetrics = field(default_factory=AMMetrics)

    @property
    def am(self) -> ApplicationMaster:
        return self.ams[-1]

    @property
    def done(self) -> bool:
        return bool(self.ams) and self.am.done and self.am.outcome is not None

    @property
    def outcome(self) -> str | None:
        return self.am.outcome if self.ams else None


class _Runs:
    """What both drivers share: submitting jobs and (re)starting their AMs."""

    def __init__(self, core: ResourceManager, client: InProcessRMClient, clock, settings: AMSettings,
                 selection: SelectionSettings, echo: Callable[[str], None] | None):
        self.core, self.client, self.clock = core, client, clock
        self.settings, self.selection, self.echo = settings, selection, echo
        self.runs: list[JobRun] = []
        self.prefix_lines = False          # start each progress line with the job's name (several jobs)
        self._timers: dict[str, object] = {}
        core.subscribe(self._on_event)

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        app_id = self.client.submit(ApplicationSubmission(
            job.name, queue, max_attempts=self.settings.max_am_attempts, keep_containers_across_attempts=True))
        run = JobRun(job, app_id, Path(work_dir), queue)
        self.runs.append(run)
        if self.settings.metrics_port is not None and len(self.runs) == 1:
            run.metrics.serve(self.settings.metrics_port)
        self._start_am(run)
        return run

    def _start_am(self, run: JobRun) -> None:
        echo = None
        if self.echo is not None:
            prefix = f"{run.job.name} ({run.app_id}): " if self.prefix_lines else ""
            echo = (lambda line, p=prefix: self.echo(p + line))
        am = ApplicationMaster(run.job, self.client, run.app_id, self.clock.now, run.work_dir,
                               settings=self.settings, selection=self.selection, metrics=run.metrics,
                               echo=echo, **self._am_extras(run))
        run.ams.append(am)
        self._timers[run.app_id] = self.clock.every(self.settings.heartbeat_s, am.heartbeat)

    def _am_extras(self, run: JobRun) -> dict:
        return {}

    def _on_event(self, event: RMEvent) -> None:
        if event.kind != "attempt_failed":
            return
        for run in self.runs:
            if run.app_id == event.app_id:
                timer = self._timers.pop(run.app_id, None)
                if timer is not None:
                    timer.cancel()
                # the RM calls us inside its own call: act after it returns
                self.clock.call_later(AM_RESTART_DELAY_S, self._start_am, run)

    @property
    def all_done(self) -> bool:
        return all(r.done for r in self.runs)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for run in self.runs:
            run.metrics.stop()


class SimulatedRuns(_Runs):
    """Jobs on the simulator in virtual time."""

    def __init__(self, specs: list[NodeSpec], settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, queues: list[Queue] | None = None,
                 scenario: Scenario | None = None, echo: Callable[[str], None] | None = None,
                 scheduling_interval_s: float | None = None):
        self.sim = Simulation(specs, queues, scenario, scheduling_interval_s=scheduling_interval_s)
        super().__init__(self.sim.core, self.sim.client, self.sim.loop, settings or AMSettings(),
                         selection or SelectionSettings(), echo)

    def run(self) -> bool:
        """Run until every job is done or ``max_virtual_time_s`` passes; True when all are done."""
        loop, limit = self.sim.loop, self.settings.max_virtual_time_s
        while not self.all_done:
            next_time = loop.next_time()
            if next_time is None or next_time > limit:
                break
            loop.step()
        self.close()
        return self.all_done


class LiveRuns(_Runs):
    """Jobs on the simulator in real time, with real task processes and a real
    barrier coordinator. The AM's heartbeats run on the RM clock's thread, under
    the RM's lock, exactly as the simulated ones do on the virtual loop.

    Nothing a run starts outlives it: :meth:`run` returns early on SIGTERM or
    SIGINT (:attr:`interrupted` says which) and :meth:`shutdown` then stops every
    task's processes; if this process dies without a chance to (``kill -9``),
    every task's supervisor sees it and stops its task (see
    :class:`~gangmaster.tools.rmsim.nodemanager.ProcessNodeManager`)."""

    def __init__(self, specs: list[NodeSpec], work_dir: str | Path, settings: AMSettings | None = None,
                 selection: SelectionSettings | None = None, queues: list[Queue] | None = None,
                 barrier_config=None, kill_grace_s: float = 2.0, poll_s: float = 0.05,
                 echo: Callable[[str], None] | None = None, scheduling_interval_s: float | None = None):
        from gangmaster.am.barrier_config import BarrierConfig
        from gangmaster.am.barrier_server import BarrierServer

        lock = threading.RLock()
        clock = RealTimeLoop(lock)
        self.node_manager = ProcessNodeManager(clock, Path(work_dir) / "tasks", poll_s=poll_s,
                                               kill_grace_s=kill_grace_s)
        core = ResourceManager(specs, queues, clock=clock, node_manager=self.node_manager, lock=lock,
                               scheduling_interval_s=scheduling_interval_s)
        self.barrier = BarrierServer(barrier_config or BarrierConfig.load())
        self.barrier.start()
        self._finished = threading.Event()
        self.interrupted: signal.Signals | None = None   # the signal that ended run() early
        self.timed_out = False
        self.stopped_tasks = 0     # containers whose processes shutdown() had to stop
        self._previous_handlers: dict = {}
        super().__init__(core, InProcessRMClient(core), clock, settings or AMSettings(),
                         selection or SelectionSettings(), echo)

    def _am_extras(self, run: JobRun) -> dict:
        # Tasks run with this Python first on PATH, so a job's `python -m ...` finds gangmaster.
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        return {"barrier": self.barrier,
                "task_env": {"PATH": path, "GANGMASTER_OUTPUT_DIR": str(run.work_dir / "output")}}

    def submit(self, job: JobSpec, work_dir: str | Path, queue: str = "default") -> JobRun:
        with self.core.lock:
            return super().submit(job, work_dir, queue)

    def run(self, timeout_s: float | None = None) -> bool:
        """Wait until every job is done, ``timeout_s`` passes, or SIGTERM or SIGINT
        arrives; True when all are done. Call :meth:`shutdown` afterwards: the
        signals stay caught until it has stopped every task."""
        self._catch_stop_signals()
        watcher = self.clock.every(0.05, self._check_done)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._finished.wait(0.1):
            if self.interrupted is not None:
                break
            if deadline is not None and time.monotonic() >= deadline:
                self.timed_out = True
                break
        watcher.cancel()
        with self.core.lock:
            self.close()
        return self._finished.is_set()

    def _check_done(self) -> None:
        if self.all_done:
            self._finished.set()

    def _catch_stop_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._previous_handlers:
            return                          # signal handlers belong to the main thread
        for sig in STOP_SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, self._on_stop_signal)

    def _on_stop_signal(self, signum, _frame) -> None:
        self.interrupted = self.interrupted or signal.Signals(signum)

    def shutdown(self) -> None:
        """End the run: every job not done is killed at the RM (saying why), every
        task's processes are stopped (SIGTERM, then SIGKILL after the kill grace) and
        gone when this returns (:attr:`stopped_tasks` counts them); then the clock
        and the coordinator stop. The AMs are not told: to their journal the run was
        interrupted, and it can be resumed."""
        why = (f"the run was interrupted by {self.interrupted.name}" if self.interrupted is not None
               else "the run timed out" if self.timed_out else "the run was stopped")
        with self.core.lock:
            for run in self.runs:
                if not run.done:
                    try:
                        self.client.kill(run.app_id, why)
                    except Exception:  # noqa: BLE001 - best effort on the way out; the tasks are stopped below
                        log.exception("killing %s", run.app_id)
        self.clock.stop()
        self.stopped_tasks = self.node_manager.shutdown()
        self.barrier.stop()
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}
