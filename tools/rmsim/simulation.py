"""A virtual-time simulation: one clock, one RM core, an in-process client, the
periodic callbacks (AM heartbeats) the driver registers, the workload model that
says what a started task does (:mod:`~gangmaster.tools.rmsim.workload`; a driver
tells it of each job it submits), and the in-process barrier coordinator the AMs
open their gangs' barriers on and the simulated tasks call (it outlives any AM, as
the driver's coordinator does live).

The AM never sleeps: the driver calls it on the clock::

    sim = Simulation.from_files("conf/clusters/default.yaml", scenario="faults.yaml")
    sim.workload.add_job(job)                    # what the job's tasks do in virtual time
    am = MyAM(sim.client, now=sim.now, barrier=sim.barrier)   # an RMClient, a time source, a barrier
    sim.every(1.0, am.heartbeat)                 # AM heartbeat every virtual second
    sim.subscribe(events.append)                 # RMEvent stream (attempt_failed → start a new AM)
    sim.run_until(3600)

Same inputs, same seed → the same event sequence, byte for byte.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from gangmaster.am.barrier.in_process import InProcessBarrier
from gangmaster.protocol.rm_client import InProcessRMClient
from gangmaster.conf.limits import RM_MAX_RUNNING_APPS
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.cluster_file import load_cluster_specs

from .clock import Periodic, Timer, VirtualLoop
from .core import ResourceManager, RMEvent
from .ledger import NodeLedger
from .nodemanager import SimulatedNodeManager
from .queues import Queue, load_queues
from .scenario import Scenario
from .workload import JobWorkload


class Simulation:
    def __init__(self, specs: list[NodeSpec], queues: list[Queue] | None = None,
                 scenario: Scenario | None = None, seed: int = 0, allocation_expiry_s: float | None = None,
                 scheduling_interval_s: float | None = None, node_updates: bool = True,
                 trusted_client: bool = False, max_running_apps: int = RM_MAX_RUNNING_APPS):
        """``trusted_client``: :attr:`client` is only used by AMs of this process, whose
        requests the RM need not check for form (:class:`InProcessRMClient`'s ``trusted``);
        ``max_running_apps``: the RM's (:class:`ResourceManager`)."""
        self.loop = VirtualLoop()
        self.random = random.Random(seed)   # for drivers' own draws; the RM core itself draws nothing
        self.workload = JobWorkload()
        self.barrier = InProcessBarrier(self.loop)
        self.node_manager = SimulatedNodeManager(self.loop, self.workload, self.barrier)
        self.core = ResourceManager(specs, queues, clock=self.loop, node_manager=self.node_manager,
                                    allocation_expiry_s=allocation_expiry_s,
                                    scheduling_interval_s=scheduling_interval_s, node_updates=node_updates,
                                    max_running_apps=max_running_apps)
        self.client = InProcessRMClient(self.core, trusted=trusted_client)
        self.scenario = scenario
        if scenario is not None:
            scenario.schedule(self.core)

    @classmethod
    def from_files(cls, cluster: str | Path, queues: str | Path | None = None,
                   scenario: str | Path | None = None, seed: int = 0) -> "Simulation":
        specs = load_cluster_specs(cluster)
        queue_list = load_queues(queues, NodeLedger(specs)) if queues else None
        scen = Scenario.load(scenario, {s.host for s in specs}) if scenario else None
        return cls(specs, queue_list, scen, seed)

    def now(self) -> float:
        return self.loop.now()

    def every(self, interval: float, fn: Callable[[], object], start: float | None = None) -> Periodic:
        return self.loop.every(interval, fn, start)

    def call_later(self, delay: float, fn: Callable[..., object], *args) -> Timer:
        return self.loop.call_later(delay, fn, *args)

    def subscribe(self, fn: Callable[[RMEvent], None]) -> None:
        self.core.subscribe(fn)

    def on(self, kind: str, fn: Callable[[RMEvent], None]) -> None:
        """Call ``fn(event)`` for events of one kind, e.g. ``sim.on("attempt_failed", restart_am)``.
        The callback runs inside the RM call that caused it: to act on the RM, schedule
        the action (``sim.call_later(0, ...)``) rather than calling back in directly."""
        self.core.subscribe(lambda event: fn(event) if event.kind == kind else None)

    def run_until(self, t: float) -> None:
        self.loop.run_until(t)
