"""The ResourceManager: a thin front over its collaborators, as YARN's RM is.

* :mod:`.applications` — the applications and their attempts (RMAppManager, RMApp,
  the AM liveliness monitor);
* :mod:`.containers` — every container granted, where it runs, how it ends (RMContainer);
* :mod:`.scheduler` — the asks waiting and the pass that grants them; :mod:`.asks` checks
  what an allocate asks against the cluster before anything of it is applied;
* :mod:`.am_service` — what an AM calls (register, heartbeat, unregister);
* :mod:`.nodes` — node health and reports; :mod:`.queue_books` — what each queue holds;
* :mod:`.preemption` — the preemption contracts in force (YARN's strict contract: the AM
  told first, the containers ended PREEMPTED at the deadline); whom to preempt is
  :mod:`.preemptible`'s choice, made by whoever preempts (the live :mod:`.preemption_monitor`,
  a replay's :mod:`~..replay.preempting`);
* :mod:`.events` — who hears what happens; :mod:`.faults` — what a fault does.

Each owns its state and its part of the state file (:mod:`.state`); this front checks
each call's form (:mod:`gangmaster.protocol.rm_validation`, the limits in ``conf/limits.py``, so
a refused call changes nothing, whichever client made it), takes the lock (the gRPC
server's threads, the real-time clock thread and process monitors share one RM) and
hands the call to the collaborator it is about. One RM serves both modes: driven by a
clock (``VirtualLoop`` for simulation, ``RealTimeLoop`` for ``gangmaster rm serve``) and
a NodeManager (simulated timers or real local processes), it never sleeps and never asks
which clock or NodeManager it has.
"""
from __future__ import annotations

import threading
from functools import partial
from typing import Callable, Iterable

from gangmaster.protocol.reasons import NO_REASON, Reason, other
from gangmaster.protocol import rm_validation as check
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, AppState, ContainerLaunch,
    ContainerState, ContainerStatus, ExitStatus, LaunchContext, NodeReport, NodeState, PreemptionMessage,
    RegisterResponse, RMError,
    StartContainers, StartRefused, WrongState,
)
from gangmaster.conf import limits
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.fit import Demand
from gangmaster.selectors.resources import ResourceDescriptor

from .am_service import ApplicationMasterService
from .applications import Applications
from .asks import AskIntake
from .clock import VirtualLoop
from .containers import Containers
from .events import Events
from .ledger import Booking, NodeLedger
from .node_changes import NodeChanges
from .nodes import Nodes
from .preemption import Preemptions
from .queue_books import QueueBooks
from .queues import Queue
from .records import EVENT_KINDS, Application, AskState, ContainerRecord, RMEvent
from .reservations import RMReservations
from .scheduler import Scheduler

__all__ = ["ResourceManager", "RMEvent", "EVENT_KINDS", "Application", "AskState", "ContainerRecord"]


class ResourceManager:
    """The RM. ``clock`` defaults to a fresh :class:`VirtualLoop`; ``node_manager``
    to a simulated one with no workload and no barrier (a container lasts what its
    ``GANGMASTER_SIMULATED_*`` variables say, else until stopped: see
    :mod:`~gangmaster.tools.rmsim.workload`; :class:`~gangmaster.tools.rmsim.simulation.Simulation`
    wires a complete one). ``max_running_apps``: the applications it takes at once
    (RM_MAX_RUNNING_APPS for clients it does not know; a driver that bounds its own
    applications otherwise, as a trace replay does by its table, sizes it).
    ``node_updates`` False: the AMs share one view of the cluster that their driver keeps
    (:meth:`changed_nodes`; trace replay), and responses carry no node updates, which
    would otherwise repeat every change to each of tens of thousands of AMs. With a
    ``scheduling_interval_s`` passes run on the clock (YARN schedules on NodeManager
    heartbeats), else at every allocate."""

    def __init__(self, specs: list[NodeSpec], queues: list[Queue] | None = None, clock=None,
                 node_manager=None, lock: threading.RLock | None = None,
                 allocation_expiry_s: float | None = None, scheduling_interval_s: float | None = None,
                 node_updates: bool = True, max_running_apps: int = limits.RM_MAX_RUNNING_APPS):
        if not specs:
            raise ValueError("a cluster needs at least one node")
        if len(specs) > limits.MAX_CLUSTER_NODES:
            raise ValueError(f"a cluster of {len(specs)} nodes is over the limit of {limits.MAX_CLUSTER_NODES} "
                             f"(MAX_CLUSTER_NODES)")
        if allocation_expiry_s is not None and allocation_expiry_s <= 0:
            raise ValueError(f"allocation_expiry_s: expected a number > 0, got {allocation_expiry_s}")
        if max_running_apps < 1:
            raise ValueError(f"max_running_apps: expected an integer >= 1, got {max_running_apps}")
        if scheduling_interval_s is not None and scheduling_interval_s <= 0:
            raise ValueError(f"scheduling_interval_s: expected a number > 0, got {scheduling_interval_s}")
        self.ledger = ledger = NodeLedger(specs)
        self.clock = clock = clock if clock is not None else VirtualLoop()
        self.lock = lock = lock or getattr(clock, "lock", None) or threading.RLock()
        if node_manager is None:
            from .nodemanager import SimulatedNodeManager
            node_manager = SimulatedNodeManager(clock)
        self.node_manager = node_manager
        self.node_updates = node_updates
        self.events = Events(clock.now)
        self.books = books = QueueBooks(ledger, queues)
        self.queues = books.queues
        #: which nodes changed when (what each AM's node_updates carry; recorded from the
        #: first changed_nodes() when responses carry none)
        self.node_changes = changes = NodeChanges(len(specs), recording=node_updates)
        self.apps: dict[str, Application] = {}   # the applications' (every one until forgotten)
        self.reservations = RMReservations(ledger, books, self.apps, clock.now)
        self.scheduler = scheduler = Scheduler(ledger, books, self.reservations)
        #: the containers granted (their records are :attr:`containers`, by id)
        self.granted = Containers(ledger, books, changes, clock, lock, node_manager, self.events, self.apps,
                                      scheduler.wake, allocation_expiry_s)
        scheduler.grants_through(self.granted)
        self.containers = self.granted.records
        self.node_containers = self.granted.on_node
        self.nodes = Nodes(ledger, changes, self.node_containers, self.events, scheduler.wake)
        self.applications = Applications(self.apps, books, self.granted, changes, clock, lock, self.events,
                                         scheduler.wake, max_running_apps)
        self.finished_apps = self.applications.finished
        self.intake = AskIntake(ledger, books, self.containers)
        self.max_allocation = self.intake.max_allocation
        self.preemptions = Preemptions(self.granted, clock, lock)
        self.am_service = ApplicationMasterService(self.lock, clock, self.applications, self.granted, scheduler,
                                                   self.intake, self.nodes, books, node_updates,
                                                   scheduling_interval_s, self.preemptions)
        node_manager.bind(self)
        self.scheduling_interval_s = scheduling_interval_s
        if scheduling_interval_s is not None:   # (half a period out of step with whole-second AM heartbeats)
            clock.every(scheduling_interval_s, self.schedule, start=clock.now() + scheduling_interval_s / 2)

    @property
    def version(self) -> int:
        """Moves on every change (the state file saves when it moved): the sum of the collaborators'."""
        return (self.applications.version + self.granted.version + self.scheduler.version
                + self.nodes.version)

    @property
    def allocation_expiry_s(self) -> float | None:
        return self.granted.allocation_expiry_s

    def subscribe(self, fn: Callable[[RMEvent], None], kinds: Iterable[str] | None = None) -> None:
        """Call ``fn(event)`` for every :class:`RMEvent`, or for those of ``kinds`` only
        (synchronously, under the lock). An event nobody asked for is never built."""
        self.events.subscribe(fn, kinds)

    def now(self) -> float:
        return self.clock.now()

    # ================================================================ client side
    def submit(self, submission: ApplicationSubmission, checked: bool = False) -> str:
        if not checked:
            check.check_submission(submission)
        with self.lock:
            return self.applications.submit(submission)

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        check.check_name(app_id, "app_id")
        check.check_text(diagnostics, "diagnostics")
        with self.lock:
            app = self.applications.get(app_id)
            if not app.state.finished:
                self.applications.end(app, AppState.KILLED, "KILLED", diagnostics or "killed by a client",
                                      ExitStatus.KILLED_BY_RESOURCEMANAGER)

    def application_report(self, app_id: str) -> ApplicationReport:
        check.check_name(app_id, "app_id")
        with self.lock:
            return self.applications.report(self.applications.get(app_id))

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        with self.lock:
            return self.nodes.all(usable_only)

    def changed_nodes(self, cursor: int | None) -> tuple[list[NodeReport], int]:
        """The reports of every node whose usage, health or containers changed after change
        number ``cursor``, and the cursor to pass next time (``None``: no reports, only the
        cursor of now; the changes are recorded from then on). For a driver that keeps one
        view for all its AMs."""
        with self.lock:
            return self.nodes.changed_since(cursor)

    # ================================================================ AM side (:mod:`.am_service`)
    def register(self, app_id: str, checked: bool = False) -> RegisterResponse:
        return self.am_service.register(app_id, checked)

    def allocate(self, request: AllocateRequest, checked: bool = False) -> AllocateResponse:
        """One AM heartbeat (:meth:`.am_service.ApplicationMasterService.allocate`)."""
        return self.am_service.allocate(request, checked)

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "",
               checked: bool = False) -> None:
        """The AM unregisters; its remaining containers are killed."""
        self.am_service.finish(app_id, attempt, final_status, diagnostics, checked)

    # ================================================================ NodeManager side
    def start_containers(self, request: StartContainers, checked: bool = False) -> StartRefused | None:
        """Start a batch of containers in order (a gang's, in one call): the shared launch is
        checked once, each container's own launch in its turn (``checked``: their form was
        checked already, as :meth:`allocate` says). Stops at the first container that cannot
        be started and says which and why; None when every one started."""
        shared_size = None if checked else check.check_start(request)
        shared = request.shared
        with self.lock:
            for k, item in enumerate(request.containers):
                try:
                    self._start(item.container_id, item.launch, k, shared, shared_size)
                except RMError as exc:
                    return StartRefused(k, item.container_id, exc)
        return None

    def start_container(self, container_id: str, launch: LaunchContext) -> None:
        """Start one container (a batch of one)."""
        refused = self.start_containers(StartContainers((ContainerLaunch(container_id, launch),)))
        if refused is not None:
            raise refused.error

    def _start(self, container_id: str, own: LaunchContext, k: int, shared: LaunchContext,
               shared_size: check.LaunchSize | None) -> None:
        """Start container ``k`` of a batch; ``shared_size`` None: its form is not checked again."""
        if shared_size is not None:
            check.check_name(container_id, "container_id")
            check.check_launch(own, f"containers[{k}].launch", shared_size)
        rec = self.granted.startable(container_id)
        launch = own.over(shared)
        self.node_manager.launch(rec, launch)   # raises (and changes nothing) on a bad launch context
        self.granted.started(rec, launch)

    def stop_container(self, container_id: str) -> None:
        check.check_name(container_id, "container_id")
        with self.lock:
            rec = self.granted.get(container_id)
            if not rec.state.finished:
                self.granted.finish(rec, ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER,
                                        "stopped by the application master")

    def container_status(self, container_id: str) -> ContainerStatus:
        check.check_name(container_id, "container_id")
        with self.lock:
            return self.granted.status(self.granted.get(container_id))

    def container_released(self, container_id: str) -> None:
        """The NodeManager reports that a stopped container's processes are all gone: what
        it booked is free again."""
        with self.lock:
            self.granted.released(container_id)

    def container_lost(self, container_id: str, diagnostics: str) -> None:
        """The NodeManager reports that a container's processes are gone and how they ended
        is unknown (they ended while the RM was down, and left no exit code)."""
        with self.lock:
            rec = self.containers.get(container_id)
            if rec is not None and not rec.state.finished:
                self.granted.finish(rec, ContainerState.FAILED, ExitStatus.LOST_ON_RM_RESTART, diagnostics,
                                        stop=False)

    def container_exited(self, container_id: str, exit_code: int, diagnostics: str = "") -> None:
        """The NodeManager reports that a container's process ended by itself."""
        with self.lock:
            rec = self.containers.get(container_id)
            if rec is None or rec.state.finished or rec.stopping:
                return
            self.granted.exited(rec, exit_code, diagnostics, self.preemptions.exit_status(container_id, exit_code))

    def restart_allocation_expiry(self, expiry_s: float | None) -> None:
        """Use ``expiry_s`` from now on, and give every container still ALLOCATED a full
        expiry from now (a restored RM: its clock restarted, its timers were not saved)."""
        with self.lock:
            self.granted.restart_expiry(expiry_s)

    # ================================================================ faults (:mod:`.faults`, tests)
    def lose_node(self, host: str, report: str = "node lost") -> None:
        check.check_text(report, "text")
        with self.lock:
            self.nodes.set_state(self.intake.host_field(host, "host"), NodeState.LOST, report,
                                 partial(self.granted.end_on_node, diagnostics=f"node {host} lost: {report}"))

    def mark_unhealthy(self, host: str, report: str = "blacklisted") -> None:
        """The cluster blacklists a node: no new containers; running ones keep running."""
        check.check_text(report, "text")
        with self.lock:
            self.nodes.set_state(self.intake.host_field(host, "host"), NodeState.UNHEALTHY, report)

    def restore_node(self, host: str) -> None:
        with self.lock:
            self.nodes.set_state(self.intake.host_field(host, "host"), NodeState.RUNNING, "")

    def kill_container(self, container_id: str, diagnostics: str = "killed by the resource manager") -> None:
        check.check_name(container_id, "container_id")
        check.check_text(diagnostics, "text")
        with self.lock:
            rec = self.granted.get(container_id)
            if not rec.state.finished:
                self.granted.finish(rec, ContainerState.KILLED, ExitStatus.KILLED_BY_RESOURCEMANAGER, diagnostics)

    def fail_container(self, container_id: str, exit_code: int = 1, diagnostics: str = "") -> None:
        """Make a container fail as if its process exited with ``exit_code``."""
        check.check_name(container_id, "container_id")
        check.check_int(exit_code, "exit_code", *check.INT32)
        check.check_text(diagnostics, "text")
        with self.lock:
            rec = self.granted.get(container_id)
            if not rec.state.finished:
                self.granted.finish(rec, ContainerState.FAILED, exit_code,
                                        diagnostics or f"injected failure, exit code {exit_code}")

    def kill_am(self, app_id: str, diagnostics: str = "AM process killed") -> None:
        """The AM attempt's process dies: the attempt fails; a new attempt is accepted while
        attempts remain (its containers are kept when the app asked for that)."""
        check.check_name(app_id, "app_id")
        check.check_text(diagnostics, "text")
        with self.lock:
            app = self.applications.get(app_id)
            if app.state.finished:
                raise WrongState(f"application {app_id} is {app.state.value}")
            self.applications.fail_attempt(app, diagnostics)

    # ================================================================ preemption (:mod:`.preemption`)
    def preempt(self, app_id: str, grace_s: float, reason: Reason | str = NO_REASON) -> PreemptionMessage:
        """Preempt the application's whole gang: its AM is told at its next heartbeat, and every container still
        alive ``grace_s`` s from now ends preempted; ``reason``: a code, or an operator's text (kept as OTHER)."""
        check.check_name(app_id, "app_id")
        if isinstance(reason, str):
            reason = other(check.check_text(reason, "reason"))
        with self.lock:
            app = self.applications.get(app_id)
            if app.state.finished:
                raise WrongState(f"application {app_id} is {app.state.value}")
            return self.preemptions.preempt(app, grace_s, reason)

    def notify_preemption(self, container_id: str) -> float:
        """The AM forwards a preemption notice to the container's task (the NodeManager
        signals it and leaves the notice where it can read it); the deadline."""
        check.check_name(container_id, "container_id")
        with self.lock:
            return self.preemptions.notify(container_id)

    # ================================================================ scheduling
    def schedule(self) -> int:
        """One scheduling pass; returns the number of containers granted."""
        with self.lock:
            return self.scheduler.run()

    def compiled(self, resource: ResourceDescriptor) -> tuple[Demand, Booking | None]:
        """An ask's resource as the scheduler books it (:meth:`.asks.AskIntake.compiled`)."""
        return self.intake.compiled(resource)

    def check_invariants(self) -> None:
        """Recount every node and queue from the live containers; raise AssertionError on any
        double booking or drift (:func:`.audit.check_books`: tests and benchmarks call it)."""
        from .audit import check_books
        check_books(self)
