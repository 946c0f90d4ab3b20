"""The ResourceManager core: nodes, queues, applications, containers and the scheduler.

One core serves both modes. It is driven by a clock (``VirtualLoop`` for
simulation, ``RealTimeLoop`` for ``gangmaster rm serve``) and a NodeManager
(simulated timers or real local processes); it never sleeps and never asks
which clock or NodeManager it has.

The scheduler runs a *pass* at every AM heartbeat when anything changed since
the last one (new asks, freed resources, node health) and some application has
asks waiting. A pass serves queues by
lowest dominant share first, one container at a time (fair between queues), and
inside a queue the applications in submission order, each one's asks by
priority then arrival (FIFO). An ask that cannot be placed now is skipped for
the rest of the pass (resources only shrink during a pass) and reported as
pending with the reason; an ask that can never fit is rejected at once.

Every public method takes the core's lock, so the gRPC server's threads, the
real-time clock thread and process monitors can share one core. Every public
method first checks its arguments (:mod:`gangmaster.am.rm_validation`, the limits
in ``conf/limits.py``), so a refused call changes nothing, whichever client made it.
What the RM remembers of finished work is bounded too (RM_MAX_COMPLETED_APPS,
RM_MAX_FINISHED_CONTAINERS): past a limit the tenth that finished first is forgotten.
"""
from __future__ import annotations

import heapq
import threading
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from gangmaster.am import rm_validation as check
from gangmaster.am.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, AppState, Container,
    ContainerLaunch, ContainerState, ContainerStatus, ExitStatus, InvalidRequest, LaunchContext, NodeReport,
    NodeState, NotFound, PendingAsk, RegisterResponse, Rejection, ResourceRequest, RMError, StartContainers,
    StartRefused, WrongState,
)
from gangmaster.conf import limits
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.fit import GPU_MILLI, Demand
from gangmaster.selectors.identity_memo import IdentityMemo
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError
from gangmaster.selectors.values import WrittenValue

from .clock import VirtualLoop
from .ledger import Booking, NodeLedger, exact_booking
from .node_changes import NodeChanges
from .queues import UNLIMITED, Queue, default_queues


#: The most compiled ask resources :meth:`ResourceManager.compiled` keeps (then it starts over).
_COMPILED_MEMO = 4096
#: The most reports :meth:`ResourceManager._node_report` keeps per node (then that node's start over).
_REPORT_MEMO = 32
#: an application's blacklist while it has none (a blacklist is replaced when it changes, never changed)
_NO_NODES: frozenset[int] = frozenset()
#: a container's NodeManager data while its NodeManager keeps none (a simulated one): one shared,
#: read-only mapping, not a dict per container (a NodeManager that keeps some sets its own)
_NO_HANDLE = MappingProxyType({})


#: Every kind of :class:`RMEvent`.
EVENT_KINDS = ("app_submitted", "app_registered", "attempt_failed", "app_finished", "container_allocated",
               "container_started", "container_finished", "node_state")


class RMEvent(WrittenValue):
    """Something that happened in the RM, for subscribers (the simulation driver, logs): a
    value, as the protocol's messages are (compared and hashed by its fields, never changed).

    Its ``detail`` may be given as a template and its arguments (``(template, *args)``,
    :meth:`str.format`'s), formatted when first read: a replay hears of every container that
    ends and reads only which application's it was."""

    __slots__ = ("time", "kind", "app_id", "container_id", "host", "_detail")
    FIELDS = ("time", "kind", "app_id", "container_id", "host", "detail")

    def __init__(self, time: float, kind: str, app_id: str = "", container_id: str = "", host: str = "",
                 detail: str | tuple = ""):
        # kind: app_submitted | app_registered | attempt_failed | app_finished | container_allocated |
        #       container_started | container_finished | node_state
        self.time, self.kind, self.app_id, self.container_id, self.host = time, kind, app_id, container_id, host
        self._detail = detail

    @property
    def detail(self) -> str:
        detail = self._detail
        if not isinstance(detail, str):
            detail = self._detail = detail[0].format(*detail[1:])
        return detail


def _submission_order(app: "Application") -> int:
    return app.seq


def _ask_priority(ask: "AskState") -> int:
    return ask.request.priority


def _asks_in_order(app: "Application") -> list["AskState"]:
    """The application's asks as a pass serves them: by priority, then arrival."""
    asks = app.asks
    if len(asks) > 1 and any([a.request.priority for a in asks.values()]):
        return sorted(asks.values(), key=_ask_priority)
    return list(asks.values())


def _alike(ask: "AskState") -> tuple:
    """What placing ``ask`` depends on in a scheduling pass: asks alike fit or fail alike."""
    req, app = ask.request, ask.app
    return (ask.need, req.node_label, ask.host_i, ask.rack_code, req.relax_locality,
            app.app_id if app.blacklist else None)


class AskState:
    """An ask of an application being served: the request, its compiled need and exact
    booking (:meth:`ResourceManager.compiled`) and what is left of it."""

    __slots__ = ("app", "request", "need", "exact", "remaining", "host_i", "rack_code", "reason", "levels", "level",
                 "pos", "blocked")

    def __init__(self, app: "Application", request: ResourceRequest, need: Demand, exact: Booking | None,
                 host_i: int | None, rack_code: int | None):
        self.app, self.request, self.need, self.exact = app, request, need, exact
        self.remaining = request.count
        self.host_i, self.rack_code = host_i, rack_code
        self.reason = ""
        self.levels: list | None = None
        self.level = self.pos = 0
        self.blocked = False


class ContainerRecord:
    """A container the RM granted, from its grant until it is forgotten. Made at every
    grant, so its ``__init__`` sets each field once, as written here (a dataclass's fills
    defaults through per-field tests); a restored RM sets what a state file kept after."""

    __slots__ = ("container_id", "app_id", "attempt", "node", "booking", "request_id", "allocated_at", "state",
                 "exit_status", "diagnostics", "started_at", "finished_at", "launch", "handle", "stopping", "held",
                 "expiry")

    def __init__(self, container_id: str, app_id: str, attempt: int, node: int, booking: Booking,
                 request_id: int, allocated_at: float):
        self.container_id, self.app_id, self.attempt, self.node = container_id, app_id, attempt, node
        self.booking, self.request_id, self.allocated_at = booking, request_id, allocated_at
        self.state = ContainerState.ALLOCATED
        self.exit_status: int | None = None
        self.diagnostics = ""
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.launch: LaunchContext | None = None
        self.handle: Mapping = _NO_HANDLE   # NodeManager's own data (pid, exit file), set by it
        self.stopping = False           # the RM asked the NodeManager to stop it
        #: Finished for its application, but its booking is kept until the NodeManager reports
        #: its processes gone (:meth:`ResourceManager.container_released`): a dying task keeps
        #: its GPUs, so nothing new is granted them while it may still use them.
        self.held = False
        self.expiry: Any = None         # the allocation-expiry timer while it waits to be started


class Application:
    """An application the RM accepted, until it is forgotten (made at every submission:
    its ``__init__`` sets each field once, as :class:`ContainerRecord`'s does)."""

    __slots__ = ("app_id", "seq", "name", "queue", "submitted_at", "max_attempts", "keep_containers", "am_expiry_s",
                 "state", "attempt", "finished_at", "final_status", "diagnostics", "last_heartbeat", "response_id",
                 "asks", "blacklist", "containers", "container_ids", "out_allocated", "out_completed", "node_cursor",
                 "out_rejected", "expiry_timer")

    def __init__(self, app_id: str, seq: int, name: str, queue: str, submitted_at: float, max_attempts: int,
                 keep_containers: bool, am_expiry_s: float | None):
        self.app_id, self.seq, self.name, self.queue, self.submitted_at = app_id, seq, name, queue, submitted_at
        self.max_attempts, self.keep_containers, self.am_expiry_s = max_attempts, keep_containers, am_expiry_s
        self.state = AppState.ACCEPTED
        self.attempt = 1
        self.finished_at: float | None = None
        self.final_status = self.diagnostics = ""
        self.last_heartbeat = 0.0
        self.response_id = 0
        self.asks: dict[int, AskState] = {}               # request_id -> AskState (arrival order)
        self.blacklist: frozenset[int] = _NO_NODES        # node indices
        self.containers: dict[str, ContainerRecord] = {}  # container_id -> ContainerRecord (live ones)
        self.container_ids: list[str] = []                # every container it was granted (what forgetting it drops)
        self.out_allocated: list[ContainerRecord] = []
        self.out_completed: list[ContainerStatus] = []
        self.node_cursor = 0                              # the node changes its AM has heard of (NodeChanges)
        self.out_rejected: tuple[Rejection, ...] = ()     # (rare: a tuple, handed to the response as it is)
        self.expiry_timer: Any = None


class ResourceManager:
    """The RM. ``clock`` defaults to a fresh :class:`VirtualLoop`; ``node_manager``
    to a simulated one with no workload and no barrier (a container lasts what its
    ``GANGMASTER_SIMULATED_*`` variables say, else until stopped: see
    :mod:`~gangmaster.tools.rmsim.workload`; :class:`~gangmaster.tools.rmsim.simulation.Simulation`
    wires a complete one). ``max_running_apps``: the applications it takes at once
    (RM_MAX_RUNNING_APPS for clients it does not know; a driver that bounds its own
    applications otherwise, as a trace replay does by its table, sizes it)."""

    def __init__(self, specs: list[NodeSpec], queues: list[Queue] | None = None, clock=None,
                 node_manager=None, lock: threading.RLock | None = None,
                 allocation_expiry_s: float | None = None, scheduling_interval_s: float | None = None,
                 node_updates: bool = True, max_running_apps: int = limits.RM_MAX_RUNNING_APPS):
        if not specs:
            raise ValueError("a cluster needs at least one node")
        if len(specs) > limits.MAX_CLUSTER_NODES:
            raise ValueError(f"a cluster of {len(specs)} nodes is over the limit of {limits.MAX_CLUSTER_NODES} "
                             f"(MAX_CLUSTER_NODES)")
        self.ledger = NodeLedger(specs)
        self.queues: dict[str, Queue] = {q.name: q for q in (queues or default_queues())}
        self.clock = clock if clock is not None else VirtualLoop()
        self.lock = lock or getattr(self.clock, "lock", None) or threading.RLock()
        if allocation_expiry_s is not None and allocation_expiry_s <= 0:
            raise ValueError(f"allocation_expiry_s: expected a number > 0, got {allocation_expiry_s}")
        self.allocation_expiry_s = allocation_expiry_s   # YARN: a granted container never started is taken back
        if max_running_apps < 1:
            raise ValueError(f"max_running_apps: expected an integer >= 1, got {max_running_apps}")
        self.max_running_apps = max_running_apps
        self.apps: dict[str, Application] = {}
        #: the finished applications, in the order they finished (what is forgotten first: YARN's
        #: completed applications); every application of ``apps`` not running is here
        self.finished_apps: dict[str, Application] = {}
        #: The applications that may have asks waiting (a scheduling pass looks at these, not at
        #: every running application): added when an allocate brings asks, dropped when their
        #: last ask is granted (or, asks cancelled, rejected or ended with their attempt, by the
        #: next pass): an allocate runs a pass only while some application is here.
        self.asking: dict[str, Application] = {}
        #: False when the AMs share one view of the cluster that their driver keeps
        #: (:meth:`changed_nodes`; trace replay): responses then carry no node updates, which
        #: would otherwise repeat every change to each of tens of thousands of AMs.
        self.node_updates = node_updates
        self.containers: dict[str, ContainerRecord] = {}   # every container ever (finished ones too)
        self.node_containers: list[set] = [set() for _ in specs]
        #: what each AM's node_updates carry (recorded from the first changed_nodes() without them)
        self.node_changes = NodeChanges(len(specs), recording=node_updates)
        self._capacity: list = [None] * len(specs)     # each node's, as node reports carry it (once built)
        #: per node: what it reports in each state it was reported in (see _node_report)
        self._reports: list[dict[tuple, NodeReport]] = [{} for _ in specs]
        self.next_app = 1
        self.next_container = 1
        self._forget_containers_at = limits.RM_MAX_FINISHED_CONTAINERS   # see _forget_old_containers
        self.version = 0            # bumps on every change (the state file saves when it moved)
        self._dirty = True          # something changed since the last scheduling pass
        self._subscribers: dict[str | None, list[Callable[[RMEvent], None]]] = {}   # by kind (None: every kind)
        #: the kinds someone subscribed to (all, for a None subscriber), each with who hears it, in order
        self._heard: dict[str, tuple[Callable[[RMEvent], None], ...]] = {}
        self._pass_failed: dict = {}       # per scheduling pass: ask key -> why it could not be placed
        self._pass_candidates: dict = {}   # per scheduling pass: (size, label, rack) -> candidate nodes
        self.max_allocation = ResourceDescriptor(
            int(self.ledger.memory_capacity.max()), int(self.ledger.mvcores_capacity.max()) / 1000.0,
            int(self.ledger.gpu_capacity.max()))
        #: the cluster's total memory, milli-vcores and GPUs (a node's capacity never changes)
        self._capacity_totals = (int(self.ledger.memory_capacity.sum()), int(self.ledger.mvcores_capacity.sum()),
                                 int(self.ledger.gpu_capacity.sum()))
        #: the cluster's free memory, milli-vcores and milli-GPU: its capacity less what the
        #: queues hold (every booking is a queue's: :meth:`check_invariants` holds the books
        #: equal), kept with the queues' own counts by :meth:`_charge`, so an allocate's
        #: headroom reads it as it is, without summing the queues
        self._free_mem, self._free_mvc = self._capacity_totals[0], self._capacity_totals[1]
        self._free_gpu_milli = self._capacity_totals[2] * GPU_MILLI
        #: applications submitted and not finished (every queue's ``apps``), kept as they come and go
        self.running_apps = sum(len(q.apps) for q in self.queues.values())
        #: an ask's resource -> its compiled Demand and exact booking (:meth:`compiled`: a gang's
        #: asks share a few resources, and a trace's jobs a few thousand), by the descriptor's
        #: identity and by its value, each bounded by _COMPILED_MEMO
        self._compiled_by_id: IdentityMemo[tuple[Demand, Booking | None]] = IdentityMemo(_COMPILED_MEMO)
        self._compiled: dict[ResourceDescriptor, tuple[Demand, Booking | None]] = {}
        #: queue -> its limit as registrations tell it (a queue's limits never change)
        self._queue_limits = {name: self._queue_limit(q) for name, q in self.queues.items()}
        #: the queues whose every limit is at least the cluster's total: such a queue's room
        #: (its limit less what it holds) is never less than what the cluster has free (what
        #: the other queues hold is not free), so its headroom is what is free
        self._unlimited_queues = {name for name, limit in self._queue_limits.items() if limit is None}
        #: the queues with no limit at all (each UNLIMITED, 2**62): such a queue always has room
        #: (:meth:`_place` does not ask), as what it holds (at most the cluster: up to
        #: MAX_CLUSTER_NODES nodes, each within MAX_MEMORY_MB, MAX_VCORES and MAX_GPUS_PER_NODE)
        #: plus any ask (within the same limits, rm_validation) stays far below UNLIMITED
        self._boundless_queues = {name for name, q in self.queues.items()
                                  if q.max_mem == q.max_mvc == q.max_gpus == UNLIMITED}
        if node_manager is None:
            from .nodemanager import SimulatedNodeManager
            node_manager = SimulatedNodeManager(self.clock)
        self.node_manager = node_manager
        node_manager.bind(self)
        # YARN schedules on NodeManager heartbeats, not on AM calls. With an interval, passes
        # run on the clock (half a period out of step with whole-second AM heartbeats), an AM
        # hears of its grants at its next allocate, and the asks several AMs sent in the
        # meantime compete in one pass, as on a real cluster. None: a pass at every allocate.
        if scheduling_interval_s is not None and scheduling_interval_s <= 0:
            raise ValueError(f"scheduling_interval_s: expected a number > 0, got {scheduling_interval_s}")
        self.scheduling_interval_s = scheduling_interval_s
        if scheduling_interval_s is not None:
            self.clock.every(scheduling_interval_s, self.schedule, start=self.clock.now() + scheduling_interval_s / 2)

    # ================================================================ events
    def subscribe(self, fn: Callable[[RMEvent], None], kinds: Iterable[str] | None = None) -> None:
        """Call ``fn(event)`` for every :class:`RMEvent`, or for those of ``kinds`` only
        (synchronously, under the lock). An event nobody asked for is never built: a
        6,001-container gang would make 18,000 of them."""
        subscribers = self._subscribers
        for kind in (None,) if kinds is None else kinds:
            subscribers.setdefault(kind, []).append(fn)
        every = subscribers.get(None, [])
        self._heard = {kind: (*every, *subscribers.get(kind, ())) for kind in EVENT_KINDS
                       if every or kind in subscribers}

    def _emit(self, kind: str, app_id: str = "", container_id: str = "", host: str = "",
              detail: str | tuple = "") -> None:
        """Tell the subscribers of ``kind``; a caller whose arguments cost work to build asks
        :attr:`_heard` first, and the others are asked here."""
        listeners = self._heard.get(kind)
        if listeners:
            event = RMEvent(self.clock.now(), kind, app_id, container_id, host, detail)
            for fn in listeners:
                fn(event)

    def now(self) -> float:
        return self.clock.now()

    # ================================================================ client side
    def submit(self, submission: ApplicationSubmission, checked: bool = False) -> str:
        if not checked:
            check.check_submission(submission)
        with self.lock:
            if submission.queue not in self.queues:
                raise NotFound(f"queue: unknown queue {submission.queue!r}; queues: {', '.join(self.queues)}")
            running = self.running_apps
            if running >= self.max_running_apps:
                raise WrongState(f"{running} applications are running, the most the RM takes at once "
                                 f"(RM_MAX_RUNNING_APPS); submit again when one has finished")
            seq = self.next_app
            self.next_app += 1
            app_id = "app_%04d" % seq   # (as an f-string's format specs would, in one call)
            app = Application(app_id, seq, submission.name, submission.queue, self.clock.now(),
                              submission.max_attempts, submission.keep_containers_across_attempts,
                              submission.am_expiry_s)
            self.apps[app_id] = app
            self.queues[submission.queue].apps[app_id] = None
            self.running_apps += 1
            self.version += 1
            if "app_submitted" in self._heard:
                self._emit("app_submitted", app_id, detail=submission.queue)
            return app_id

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        check.check_name(app_id, "app_id")
        check.check_text(diagnostics, "diagnostics")
        with self.lock:
            app = self._app(app_id)
            if app.state.finished:
                return
            self._end_app(app, AppState.KILLED, "KILLED", diagnostics or "killed by a client",
                          ExitStatus.KILLED_BY_RESOURCEMANAGER)

    def application_report(self, app_id: str) -> ApplicationReport:
        check.check_name(app_id, "app_id")
        with self.lock:
            app = self._app(app_id)
            running = sum(1 for c in app.containers.values() if c.state is ContainerState.RUNNING)
            mem = mvc = gpus = gpu_milli = 0
            for c in app.containers.values():
                mem += c.booking.memory_mb
                mvc += c.booking.mvcores
                gpus += c.booking.demand.gpus
                gpu_milli += c.booking.gpu_milli
            containers = self.containers
            stopping = sum(1 for cid in app.container_ids if (rec := containers.get(cid)) is not None and rec.held)
            return ApplicationReport(
                app.app_id, app.name, app.queue, app.state, app.attempt, app.submitted_at, app.finished_at,
                app.final_status, app.diagnostics, running, sum(a.remaining for a in app.asks.values()),
                ResourceDescriptor(mem, mvc / 1000.0, gpus), gpu_milli, stopping)

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        with self.lock:
            return [self._node_report(i) for i in range(len(self.ledger))
                    if not usable_only or self.ledger.usable[i]]

    def _node_report(self, i: int) -> NodeReport:
        """Node ``i`` as it is now. A report is a value made of the node's state, health,
        container count and free resources: a node goes back and forth between a few of
        those (a job starts on it, another ends), so the report of each is made once and
        given again (a replay's nodes are reported some 1.7 times a job, four in five times
        in a state they were reported in before), at most :data:`_REPORT_MEMO` per node.
        A node whose GPUs hold shares is reported afresh (its free milli-GPU per GPU is
        part of its report). A node with no container books nothing (every booking is a
        container's, on its node until given back: check_invariants): all of it is free, and
        its report is a matter of its state and health alone."""
        ledger = self.ledger
        containers = len(self.node_containers[i])
        if not containers:
            key = (ledger.states[i], ledger.health_reports[i])
        elif ledger.gpus_shared.item(i):
            return self._new_node_report(i, ledger.gpu_milli_free_of(i))
        else:
            key = (ledger.memory_free.item(i), ledger.mvcores_free.item(i), ledger.gpu_free_mask.item(i),
                   ledger.ports_free[i].ranges, containers, ledger.states[i], ledger.health_reports[i])
        reports = self._reports[i]
        report = reports.get(key)
        if report is None:
            if len(reports) >= _REPORT_MEMO:
                reports.clear()
            report = reports[key] = self._new_node_report(i, None)
        return report

    def _new_node_report(self, i: int, gpu_milli_free: tuple[int, ...] | None) -> NodeReport:
        """Node ``i``'s report, with the milli-GPU free per GPU its report carries when some
        GPU of it holds shares (None when none does)."""
        ledger = self.ledger
        spec = ledger.specs[i]
        capacity = self._capacity[i]
        if capacity is None:
            capacity = self._capacity[i] = spec.capacity
        state, health, containers = ledger.states[i], ledger.health_reports[i], len(self.node_containers[i])
        # No container on it books nothing of it (as _node_report says): all of it is free.
        free = self._free_of_unused(i, capacity) if not containers else ledger.free(i)
        return NodeReport(spec.host, spec.rack, state, capacity, free, spec.labels, spec.gpu_type, spec.topology,
                          containers, health, gpu_milli_free)

    def _free_of_unused(self, i: int, capacity: ResourceDescriptor) -> ResourceDescriptor:
        """What an unused node has free: all of it. Its capacity itself when the ledger holds
        that exactly (vcores in whole millis), so a cluster's first report builds no copies."""
        ledger = self.ledger
        if (capacity.memory_mb == ledger.memory_capacity.item(i)
                and capacity.vcores == ledger.mvcores_capacity.item(i) / 1000.0
                and capacity.gpu_mask == ledger.gpu_capacity_mask.item(i)
                and capacity.port_ranges == ledger.port_capacity[i]):
            return capacity
        return ledger.free(i)

    # ================================================================ AM side
    def register(self, app_id: str, checked: bool = False) -> RegisterResponse:
        if not checked:
            check.check_name(app_id, "app_id")
        with self.lock:
            app = self._app(app_id)
            if app.state is not AppState.ACCEPTED:
                raise WrongState(f"application {app_id} is {app.state.value}; only an ACCEPTED application "
                                 f"(waiting for its AM attempt {app.attempt}) can register")
            app.state = AppState.RUNNING
            app.last_heartbeat = self.clock.now()
            app.node_cursor = self.node_changes.seq   # the AM reads cluster_nodes() once, then the changes
            if app.am_expiry_s is not None:
                self._arm_expiry(app)
            self.version += 1
            previous = (tuple([self._container(c) for c in app.containers.values() if c.attempt < app.attempt])
                        if app.containers else ())
            if "app_registered" in self._heard:
                self._emit("app_registered", app_id, detail=f"attempt {app.attempt}")
            return RegisterResponse(app_id, app.attempt, app.queue, self.max_allocation, previous,
                                    self._queue_limits[app.queue])

    def _queue_limit(self, queue: Queue) -> ResourceDescriptor | None:
        """The queue's limit, each unlimited dimension capped at the cluster's total; None
        when no dimension is limited below it (worked out once per queue: :attr:`_queue_limits`)."""
        limits, totals = (queue.max_mem, queue.max_mvc, queue.max_gpus), self._capacity_totals
        if all(limit >= total for limit, total in zip(limits, totals)):
            return None
        mem, mvc, gpus = (min(limit, total) for limit, total in zip(limits, totals))
        return ResourceDescriptor(mem, mvc / 1000.0, gpus)

    def allocate(self, request: AllocateRequest, checked: bool = False) -> AllocateResponse:
        """One AM heartbeat. ``checked``: the request's form (types, ranges, names, list
        lengths) was already checked or built by code that cannot get it wrong (see
        :class:`~gangmaster.am.rm_client.InProcessRMClient`); what it asks is checked
        against the RM's state either way (known hosts and racks, ids, sizes)."""
        if not checked:
            if not isinstance(request, AllocateRequest):
                raise InvalidRequest(f"request: expected an AllocateRequest, got {type(request).__name__}")
            check.check_allocate(request)
        with self.lock:
            app = self._live_attempt(request.app_id, request.attempt)
            if (request.asks or request.releases or request.cancel or request.blacklist_additions
                    or request.blacklist_removals):
                asks = self._take_request(app, request)
            else:   # a quiet heartbeat (how an AM hears that its containers ended): nothing to check
                app.last_heartbeat = self.clock.now()
                asks = ()
            if self.scheduling_interval_s is None and self._dirty and self.asking:
                self._schedule()
            if asks:
                self._reject_never_fitting(app, asks)
            return self._drain(app)

    def _take_request(self, app: Application, request: AllocateRequest) -> list[AskState] | tuple[()]:
        """Check everything an allocate carries against the RM's state, then apply it all (a
        refused call changes nothing); the new asks."""
        asks, asked = self._validate_asks(app, request) if request.asks else ((), 0)
        releases = self._validate_releases(app, request) if request.releases else ()
        if asks:
            self._check_app_size(app, request, asked, releases)
        blacklisting = request.blacklist_additions or request.blacklist_removals
        if blacklisting:
            black_add = [self._known_host(h, f"blacklist_additions[{k}]")
                         for k, h in enumerate(request.blacklist_additions)]
            black_rm = [self._known_host(h, f"blacklist_removals[{k}]")
                        for k, h in enumerate(request.blacklist_removals)]
        # Everything is valid: apply.
        app.last_heartbeat = self.clock.now()
        if blacklisting:
            app.blacklist = app.blacklist.union(black_add).difference(black_rm)
            self._dirty = True
        for rec in releases:
            self._finish_container(rec, ContainerState.KILLED, ExitStatus.ABORTED,
                                   "released by the application master")
        for request_id in request.cancel:
            if app.asks.pop(request_id, None) is not None:
                self.version += 1
        if asks:
            waiting = app.asks
            for ask in asks:
                waiting[ask.request.request_id] = ask
            self._dirty = True
            self.asking[app.app_id] = app
        if asks or releases or request.cancel:
            self.version += 1
        return asks

    def _reject_never_fitting(self, app: Application, asks: list[AskState]) -> None:
        """Reject, in the call that made them, the new asks that can never fit. An ask that
        has been granted a container has shown that it fits, so only those still wholly
        waiting are checked: one that can never fit is never granted (its queue's room and
        every node's free resources are within their limits and capacities, and a label no
        node has scopes no node), so checking after the scheduling pass, not before,
        rejects the same asks with the same reasons."""
        for ask in asks:
            if ask.remaining < ask.request.count:
                continue
            reason = self._why_never(app, ask)
            if reason:
                del app.asks[ask.request.request_id]
                app.out_rejected += (Rejection(ask.request.request_id, reason),)

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "",
               checked: bool = False) -> None:
        """The AM unregisters; its remaining containers are killed."""
        if not checked:
            check.check_finish(app_id, attempt, final_status, diagnostics)
        with self.lock:
            app = self._live_attempt(app_id, attempt)
            self._end_app(app, AppState.FINISHED, final_status, diagnostics,
                          ExitStatus.KILLED_AFTER_APP_COMPLETION)

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
        rec = self.containers.get(container_id) or self._container_rec(container_id)   # (raises NotFound)
        app = self.apps[rec.app_id]
        if rec.state is not ContainerState.ALLOCATED:
            raise WrongState(f"container {container_id} is {rec.state.value}; only an ALLOCATED "
                             f"container can be started")
        if app.state is not AppState.RUNNING:
            raise WrongState(f"application {app.app_id} is {app.state.value}")
        if self.ledger.states[rec.node] is NodeState.LOST:
            raise WrongState(f"container {container_id}: host {self.ledger.hosts[rec.node]} is LOST")
        launch = own.over(shared)
        self.node_manager.launch(rec, launch)   # raises (and changes nothing) on a bad launch context
        rec.state = ContainerState.RUNNING
        rec.started_at = self.clock.now()
        if rec.expiry is not None:
            self._disarm_expiry(rec)
        rec.launch = launch
        self.version += 1
        if "container_started" in self._heard:
            self._emit("container_started", rec.app_id, container_id, self.ledger.hosts[rec.node])

    def stop_container(self, container_id: str) -> None:
        check.check_name(container_id, "container_id")
        with self.lock:
            rec = self._container_rec(container_id)
            if rec.state.finished:
                return
            self._finish_container(rec, ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER,
                                   "stopped by the application master")

    def container_status(self, container_id: str) -> ContainerStatus:
        check.check_name(container_id, "container_id")
        with self.lock:
            return self._status(self._container_rec(container_id))

    def container_released(self, container_id: str) -> None:
        """The NodeManager reports that a stopped container's processes are all gone: what
        it booked is free again."""
        with self.lock:
            rec = self.containers.get(container_id)
            if rec is None or not rec.held:
                return
            rec.held = False
            self._give_back(rec, self.apps[rec.app_id])
            self._dirty = True
            self.version += 1

    def container_lost(self, container_id: str, diagnostics: str) -> None:
        """The NodeManager reports that a container's processes are gone and how they ended
        is unknown (they ended while the RM was down, and left no exit code)."""
        with self.lock:
            rec = self.containers.get(container_id)
            if rec is None or rec.state.finished:
                return
            self._finish_container(rec, ContainerState.FAILED, ExitStatus.LOST_ON_RM_RESTART, diagnostics,
                                   stop=False)

    def container_exited(self, container_id: str, exit_code: int, diagnostics: str = "") -> None:
        """The NodeManager reports that a container's process ended by itself."""
        with self.lock:
            rec = self.containers.get(container_id)
            if rec is None or rec.state.finished:
                return
            if rec.stopping:
                return
            state = ContainerState.COMPLETED if exit_code == 0 else ContainerState.FAILED
            self._finish_container(rec, state, exit_code, diagnostics or f"process exited with code {exit_code}",
                                   stop=False)

    # ================================================================ faults (scenario and tests)
    def lose_node(self, host: str, report: str = "node lost") -> None:
        check.check_text(report, "text")
        with self.lock:
            i = self._host_field(host, "host")
            self.ledger.set_state(i, NodeState.LOST, report)
            for cid in sorted(self.node_containers[i]):
                self._finish_container(self.containers[cid], ContainerState.KILLED, ExitStatus.NODE_LOST,
                                       f"node {host} lost: {report}")
            self._node_changed(i)

    def mark_unhealthy(self, host: str, report: str = "blacklisted") -> None:
        """The cluster blacklists a node: no new containers; running ones keep running."""
        check.check_text(report, "text")
        with self.lock:
            i = self._host_field(host, "host")
            self.ledger.set_state(i, NodeState.UNHEALTHY, report)
            self._node_changed(i)

    def restore_node(self, host: str) -> None:
        with self.lock:
            i = self._host_field(host, "host")
            self.ledger.set_state(i, NodeState.RUNNING, "")
            self._node_changed(i)

    def kill_container(self, container_id: str, diagnostics: str = "killed by the resource manager") -> None:
        check.check_name(container_id, "container_id")
        check.check_text(diagnostics, "text")
        with self.lock:
            rec = self._container_rec(container_id)
            if not rec.state.finished:
                self._finish_container(rec, ContainerState.KILLED, ExitStatus.KILLED_BY_RESOURCEMANAGER, diagnostics)

    def fail_container(self, container_id: str, exit_code: int = 1, diagnostics: str = "") -> None:
        """Make a container fail as if its process exited with ``exit_code``."""
        check.check_name(container_id, "container_id")
        check.check_int(exit_code, "exit_code", *check.INT32)
        check.check_text(diagnostics, "text")
        with self.lock:
            rec = self._container_rec(container_id)
            if not rec.state.finished:
                self._finish_container(rec, ContainerState.FAILED, exit_code,
                                       diagnostics or f"injected failure, exit code {exit_code}")

    def kill_am(self, app_id: str, diagnostics: str = "AM process killed") -> None:
        """The AM attempt's process dies: the attempt fails; a new attempt is accepted while
        attempts remain (its containers are kept when the app asked for that)."""
        check.check_name(app_id, "app_id")
        check.check_text(diagnostics, "text")
        with self.lock:
            app = self._app(app_id)
            if app.state.finished:
                raise WrongState(f"application {app_id} is {app.state.value}")
            self._fail_attempt(app, diagnostics)

    # ================================================================ scheduling
    def schedule(self) -> int:
        """One scheduling pass; returns the number of containers granted."""
        with self.lock:
            return self._schedule()

    def _schedule(self) -> int:
        """:meth:`schedule`, under the lock (an allocate calls it only when some application
        asks: with none, a pass grants nothing, and the next asks mark the RM dirty again)."""
        if not self._dirty:
            return 0
        self._dirty = False
        plans = self._plans()
        if not plans:   # nothing asked, or every ask was served: no pass to make
            return 0
        try:
            if len(plans) == 1:   # one queue asks: each ask in turn, granted until it is served or cannot be
                (queue, plan), = plans
                granted = 0
                for ask in plan:
                    while ask.remaining > 0 and self._place(queue, ask):
                        granted += 1
            else:
                granted = self._serve_by_share(plans)
        finally:   # what the pass learnt holds for this pass only
            for _, plan in plans:
                for ask in plan:
                    ask.levels = None
                    ask.blocked = False
            if self._pass_failed:
                self._pass_failed = {}
            if self._pass_candidates:
                self._pass_candidates = {}
        return granted

    def _serve_by_share(self, plans: list[tuple[Queue, list[AskState]]]) -> int:
        """A pass when several queues ask: one container at a time to the queue of lowest
        dominant share, each queue's asks in its plan's order; the containers granted."""
        granted = 0
        by_name = {queue.name: (queue, plan) for queue, plan in plans}
        cursors = dict.fromkeys(by_name, 0)   # per queue: the first of its asks not yet served in full
        heap = [(queue.share(), queue.name) for queue, _ in plans]
        heapq.heapify(heap)
        while heap:
            _, name = heapq.heappop(heap)
            (queue, plan), cursor = by_name[name], cursors[name]
            while cursor < len(plan):
                ask = plan[cursor]
                if ask.remaining > 0 and not ask.blocked and self._place(queue, ask):
                    break
                cursor += 1
            else:   # every ask of the queue is served or cannot be: it leaves the pass
                continue
            # (the next turn starts past an ask this grant served in full)
            cursors[name] = cursor if ask.remaining > 0 else cursor + 1
            granted += 1
            heapq.heappush(heap, (queue.share(), name))
        return granted

    def _plans(self) -> list[tuple[Queue, list[AskState]]]:
        """A pass's plan: each queue with asks, with its asks in the order they are served:
        its running applications in submission order, each one's asks by priority then
        arrival (queues in the order their first application asked). The applications whose
        asks were all served leave :attr:`asking`."""
        asking = self.asking
        if len(asking) == 1:   # one application asks (a pass at every allocate: the usual case)
            (app,) = asking.values()
            if not app.asks:
                asking.clear()
                return []
            return [(self.queues[app.queue], _asks_in_order(app))] if app.state is AppState.RUNNING else []
        by_queue: dict[str, list[Application]] = {}
        for app_id, app in list(asking.items()):
            if not app.asks:
                del asking[app_id]
            elif app.state is AppState.RUNNING:
                by_queue.setdefault(app.queue, []).append(app)
        plans = []
        for name, apps in by_queue.items():
            if len(apps) > 1:
                apps.sort(key=_submission_order)
            plan: list[AskState] = []
            for app in apps:
                plan += _asks_in_order(app)
            plans.append((self.queues[name], plan))
        return plans

    def _place(self, queue: Queue, ask: AskState) -> bool:
        """Grant ``ask`` (of ``queue``, still waiting for containers) one container, if its
        queue has room and a node holds it now; else say why, and block it for the pass."""
        if ask.app.asks.get(ask.request.request_id) is not ask:   # cancelled, or its attempt ended
            return False
        need = ask.need
        if queue.name not in self._boundless_queues and not queue.room_for(need.memory_mb, need.mvcores, need.gpus,
                                                                            need.gpu_milli):
            ask.reason = f"queue {queue.name} limit reached ({queue.share():.0%} used)"
            ask.blocked = True
            return False
        # Resources only shrink during a pass: an ask alike one that failed cannot fit either
        # (looked up once some ask of the pass has failed).
        failed = self._pass_failed.get(_alike(ask)) if self._pass_failed else None
        booked = None if failed is not None else self._book_first(ask)
        if booked is None:
            if failed is not None:
                ask.reason = failed
            else:
                self._pass_failed[_alike(ask)] = ask.reason
            ask.blocked = True
            return False
        self._grant(ask, *booked, queue)
        return True

    def _book_first(self, ask: AskState) -> tuple[int, Booking] | None:
        """Book ``ask`` on the first node, in locality order, that holds it now: the node
        and its booking. Each node is tried by booking it, which checks the fit once and
        names the shortfall only on a refusal. An ask of one host whose locality is not
        relaxed (the AM's, for each instance) tries that host alone, as its one locality
        level would, with no levels listed."""
        ledger = self.ledger
        need, exact = ask.need, ask.exact
        i = ask.host_i
        if i is not None and not ask.request.relax_locality:   # its one host (what _levels would list)
            label = ask.request.node_label
            if i not in ask.app.blacklist and (not label or ledger.label_scope(label)[i]):
                try:
                    return i, ledger.book(i, need, exact)
                except ResourceError as refused:
                    ask.reason = str(refused)
                    return None
            if not ask.reason:
                ask.reason = f"no usable node in {ask.request.host} has {ask.request.resource} free"
            return None
        if ask.levels is None:
            ask.levels = self._levels(ask)
            ask.level = ask.pos = 0
        levels = ask.levels
        blacklist = ask.app.blacklist
        while ask.level < len(levels):
            nodes = levels[ask.level]
            if callable(nodes):
                nodes = levels[ask.level] = nodes()
            while ask.pos < len(nodes):
                i = int(nodes[ask.pos])
                if i in blacklist:
                    ask.pos += 1
                    continue
                try:
                    return i, ledger.book(i, need, exact)
                except ResourceError as refused:
                    reason = str(refused)
                if ask.level == 0 and ask.host_i is not None:
                    ask.reason = reason
                ask.pos += 1
            ask.level += 1
            ask.pos = 0
        if not ask.reason or ask.host_i is None or ask.request.relax_locality:
            scope = ask.request.host or (f"rack {ask.request.rack}" if ask.request.rack else "the cluster")
            ask.reason = (f"no usable node in {scope} has {ask.request.resource} free"
                          + (f" ({ask.reason})" if ask.host_i is not None and ask.reason else ""))
        return None

    def _levels(self, ask: AskState) -> list:
        """Where to look, in order: the host, its rack, anywhere (as far as locality is relaxed)."""
        ledger, need, req = self.ledger, ask.need, ask.request
        label = ledger.label_scope(req.node_label)
        levels: list = []
        if ask.host_i is not None:
            if label is None or label[ask.host_i]:
                levels.append((ask.host_i,))
            if not req.relax_locality:
                return levels
        rack = ask.rack_code if ask.rack_code is not None else (
            int(ledger.rack_of[ask.host_i]) if ask.host_i is not None else None)
        if rack is not None:
            levels.append(lambda: self._candidates(need, req.node_label, rack))
            if not req.relax_locality:
                return levels
        levels.append(lambda: self._candidates(need, req.node_label, None))
        return levels

    def _candidates(self, need: Demand, label: str | None, rack: int | None) -> np.ndarray:
        """Nodes that could hold ``need`` now, computed once per pass per (need, label, rack):
        during a pass resources only shrink, so an earlier list is a superset of the truth
        and every node taken from it is checked again before booking."""
        key = (need, label, rack)
        found = self._pass_candidates.get(key)
        if found is None:
            ledger = self.ledger
            scope = ledger.label_scope(label)
            if rack is not None:
                in_rack = ledger.rack_of == rack
                scope = in_rack if scope is None else scope & in_rack
            found = self._pass_candidates[key] = ledger.candidates(need, scope)
        return found

    def _grant(self, ask: AskState, node: int, booking: Booking, queue: Queue) -> None:
        app = ask.app
        cid = "container_%04d_%02d_%06d" % (app.seq, app.attempt, self.next_container)
        self.next_container += 1
        rec = ContainerRecord(cid, app.app_id, app.attempt, node, booking, ask.request.request_id, self.clock.now())
        self.containers[cid] = rec
        app.containers[cid] = rec
        app.container_ids.append(cid)
        self.node_containers[node].add(cid)
        self.node_changes.touch(node)
        self._charge(queue, booking.held)
        ask.remaining -= 1
        if ask.remaining <= 0:
            del app.asks[ask.request.request_id]
            if not app.asks:   # every ask served: the next passes need not look at it
                self.asking.pop(app.app_id, None)
        app.out_allocated.append(rec)
        if self.allocation_expiry_s is not None:
            self._arm_allocation_expiry(rec)
        self.version += 1
        if "container_allocated" in self._heard:
            self._emit("container_allocated", app.app_id, cid, self.ledger.hosts[node])

    def restart_allocation_expiry(self, expiry_s: float | None) -> None:
        """Use ``expiry_s`` from now on, and give every container still ALLOCATED a full
        expiry from now (a restored RM: its clock restarted, its timers were not saved)."""
        with self.lock:
            self.allocation_expiry_s = expiry_s
            for rec in self.containers.values():
                if rec.state is ContainerState.ALLOCATED:
                    self._disarm_expiry(rec)
                    self._arm_allocation_expiry(rec)

    def _arm_allocation_expiry(self, rec: ContainerRecord) -> None:
        if self.allocation_expiry_s is not None:
            rec.expiry = self.clock.call_later(self.allocation_expiry_s, self._expire_allocation, rec)

    def _expire_allocation(self, rec: ContainerRecord) -> None:
        with self.lock:
            if rec.state is ContainerState.ALLOCATED:
                self._finish_container(rec, ContainerState.KILLED, ExitStatus.ABORTED,
                                       f"container expired: not started within {self.allocation_expiry_s:g}s")

    @staticmethod
    def _disarm_expiry(rec: ContainerRecord) -> None:
        """The container left ALLOCATED: its expiry timer would do nothing, and in virtual time
        a pending timer reads as an event still to come (``VirtualLoop.has_one_shot_calls``)."""
        if rec.expiry is not None:
            rec.expiry.cancel()
            rec.expiry = None

    # ================================================================ internals
    def _why_never(self, app: Application, ask: AskState) -> str | None:
        need, req, ledger = ask.need, ask.request, self.ledger
        reason = self.queues[app.queue].why_never(need.memory_mb, need.mvcores, need.gpus, need.gpu_milli)
        if reason:
            return reason
        scope = None
        if req.node_label:
            scope = ledger.label_nodes.get(req.node_label)
            if scope is None:
                return f"no node has label {req.node_label!r}"
        if ask.host_i is not None:
            host_reason = ledger.why_never(ask.host_i, need)
            if req.node_label and not scope[ask.host_i]:
                host_reason = f"host {req.host} does not have label {req.node_label!r}"
            if host_reason is None:
                return None
            if not req.relax_locality:
                return host_reason
        if ask.rack_code is not None and not req.relax_locality:
            rack_scope = ledger.rack_of == ask.rack_code
            scope = rack_scope if scope is None else scope & rack_scope
        fits = ledger.nodes_by_capacity(need, scope)
        for i in np.flatnonzero(fits):
            if ledger.why_never(int(i), need) is None:
                return None
        where = f"rack {req.rack}" if scope is not None and req.rack else "any node"
        return f"{req.resource} can never fit on {where} of the cluster (largest node: {self.max_allocation})"

    def _validate_asks(self, app: Application, request: AllocateRequest) -> tuple[list[AskState], int]:
        """The new asks, checked against the RM's state, and how many containers they ask for."""
        out = []
        seen = set()
        asked = 0
        hosts = self.ledger.host_index
        for k, req in enumerate(request.asks):
            if req.request_id in app.asks or req.request_id in seen:
                raise InvalidRequest(f"asks[{k}].request_id: {req.request_id} is already pending for {app.app_id}")
            seen.add(req.request_id)
            host_i = None
            if req.host:   # (the field's name is spelled out only for an unknown host)
                host_i = hosts.get(req.host)
                if host_i is None:
                    self._known_host(req.host, f"asks[{k}].host")   # raises, naming it
            rack_code = None
            if req.rack:
                rack_code = self.ledger.rack_index.get(req.rack)
                if rack_code is None:
                    raise InvalidRequest(f"asks[{k}].rack: unknown rack {req.rack!r}; racks: "
                                         f"{', '.join(self.ledger.rack_names)}")
                if host_i is not None and int(self.ledger.rack_of[host_i]) != rack_code:
                    raise InvalidRequest(f"asks[{k}].rack: host {req.host} is in rack "
                                         f"{self.ledger.specs[host_i].rack}, not {req.rack}")
            need, exact = self.compiled(req.resource)
            out.append(AskState(app, req, need, exact, host_i, rack_code))
            asked += req.count
        return out, asked

    def compiled(self, resource: ResourceDescriptor) -> tuple[Demand, Booking | None]:
        """An ask's resource as the scheduler books it: its :class:`Demand`, and the booking
        every container of it holds when it names exactly what it takes
        (:func:`~gangmaster.tools.rmsim.ledger.exact_booking`), else None. Worked out once
        per distinct descriptor: found by its identity (a replay's AMs ask with the same few
        descriptor objects), else by its value (a gRPC call decodes fresh ones)."""
        answer = self._compiled_by_id.get(id(resource))
        if answer is None:
            values = self._compiled
            answer = values.get(resource)
            if answer is None:
                if len(values) >= _COMPILED_MEMO:
                    values.clear()
                need = Demand.of(resource)
                answer = values[resource] = (need, exact_booking(resource, need))
            self._compiled_by_id.put(id(resource), (resource,), answer)
        return answer

    def _check_app_size(self, app: Application, request: AllocateRequest, asked: int,
                        releases: list[ContainerRecord]) -> None:
        """Refuse new asks (``asked`` containers) that would have the application hold and
        wait for more than RM_MAX_CONTAINERS_PER_APP containers (what it holds, minus what
        it releases, plus what it still waits for after its cancels, plus the new asks)."""
        total = len(app.containers) - len(releases) + asked
        if app.asks:
            cancelled = set(request.cancel)
            total += sum([a.remaining for rid, a in app.asks.items() if rid not in cancelled])
        if total > limits.RM_MAX_CONTAINERS_PER_APP:
            raise InvalidRequest(f"asks: application {app.app_id} would hold and wait for {total} containers, "
                                 f"over the limit of {limits.RM_MAX_CONTAINERS_PER_APP} (RM_MAX_CONTAINERS_PER_APP)")

    def _validate_releases(self, app: Application, request: AllocateRequest) -> list[ContainerRecord]:
        """The live containers to release, each once (a container named twice is released once)."""
        out: dict[str, ContainerRecord] = {}
        for k, cid in enumerate(request.releases):
            rec = self.containers.get(cid)
            if rec is None or rec.app_id != app.app_id:
                raise InvalidRequest(f"releases[{k}]: {cid!r} is not a container of {app.app_id}")
            if not rec.state.finished:
                out[cid] = rec
        return list(out.values())

    def _host_field(self, host: str, field_name: str) -> int:
        check.check_name(host, field_name)
        return self._known_host(host, field_name)

    def _known_host(self, host: str, field_name: str) -> int:
        """The node of ``host``, a name already checked (``check_allocate`` checks a whole call's)."""
        i = self.ledger.host_index.get(host)
        if i is None:
            raise InvalidRequest(f"{field_name}: unknown host {host!r}")
        return i

    def _app(self, app_id: str) -> Application:
        app = self.apps.get(app_id)
        if app is None:
            raise NotFound(f"app_id: unknown application {app_id!r}")
        return app

    def _live_attempt(self, app_id: str, attempt: int) -> Application:
        app = self.apps.get(app_id)
        if app is not None and app.state is AppState.RUNNING and app.attempt == attempt:
            return app
        app = self._app(app_id)   # raises NotFound for an unknown application
        raise WrongState(f"application {app_id} attempt {attempt} is not the running attempt "
                         f"(application {app.state.value}, attempt {app.attempt})")

    def _container_rec(self, container_id: str) -> ContainerRecord:
        rec = self.containers.get(container_id)
        if rec is None:
            raise NotFound(f"container_id: unknown container {container_id!r}")
        return rec

    def _container(self, rec: ContainerRecord) -> Container:
        return Container(rec.container_id, rec.app_id, rec.attempt, self.ledger.hosts[rec.node],
                         self.ledger.specs[rec.node].rack, rec.booking.resource, rec.request_id, rec.allocated_at)

    def _status(self, rec: ContainerRecord) -> ContainerStatus:
        return ContainerStatus(rec.container_id, self.ledger.hosts[rec.node], rec.state, rec.exit_status,
                               rec.diagnostics, rec.request_id)

    def _drain(self, app: Application) -> AllocateResponse:
        app.response_id += 1
        response = AllocateResponse(
            tuple(map(self._container, app.out_allocated)) if app.out_allocated else (),
            tuple(app.out_completed) if app.out_completed else (),
            self._node_updates(app) if self.node_updates else (),
            app.out_rejected,
            tuple([PendingAsk(a.request.request_id, a.remaining, a.reason) for a in app.asks.values()])
            if app.asks else (),
            self._headroom(app.queue),
            app.response_id,
        )
        if app.out_allocated:
            app.out_allocated = []
        if app.out_completed:
            app.out_completed = []
        if app.out_rejected:
            app.out_rejected = ()
        return response

    def _headroom(self, name: str) -> tuple[int, int, int]:
        """What queue ``name`` could still be given: its room, at most what the cluster has
        free, as the amounts a response's headroom is made of when read (memory MB,
        milli-vcores, whole GPUs: :class:`~gangmaster.am.rm_protocol.AllocateResponse`)."""
        if name in self._unlimited_queues:   # its room is never less than what is free
            return self._free_mem, self._free_mvc, self._free_gpu_milli // GPU_MILLI
        queue = self.queues[name]
        return (max(0, min(queue.max_mem - queue.used_mem, self._free_mem)),
                max(0, min(queue.max_mvc - queue.used_mvc, self._free_mvc)),
                max(0, min(queue.max_gpus * GPU_MILLI - queue.used_gpus * GPU_MILLI - queue.used_gpu_milli,
                           self._free_gpu_milli)) // GPU_MILLI)

    def changed_nodes(self, cursor: int | None) -> tuple[list[NodeReport], int]:
        """The reports of every node whose usage, health or containers changed after change
        number ``cursor``, and the cursor to pass next time (``None``: no reports, only the
        cursor of now; the changes are recorded from then on). For a driver that keeps one
        view for all its AMs."""
        with self.lock:
            if cursor is None:
                self.node_changes.record()
                return [], self.node_changes.seq
            nodes, cursor = self.node_changes.since(cursor, len(self.ledger))
            return [self._node_report(i) for i in nodes], cursor

    def _node_updates(self, app: Application) -> tuple[NodeReport, ...]:
        """Every node whose usage, health or containers changed since the application's
        previous response (at most RM_MAX_NODE_UPDATES; the rest come in the next ones)."""
        nodes, app.node_cursor = self.node_changes.since(app.node_cursor, limits.RM_MAX_NODE_UPDATES)
        return tuple(self._node_report(i) for i in nodes)

    def _finish_container(self, rec: ContainerRecord, state: ContainerState, exit_status: int,
                          diagnostics: str, stop: bool = True) -> None:
        was_running = rec.state is ContainerState.RUNNING
        if rec.expiry is not None:
            self._disarm_expiry(rec)
        rec.state, rec.exit_status, rec.diagnostics = state, int(exit_status), diagnostics
        rec.finished_at = self.clock.now()
        app = self.apps[rec.app_id]
        app.containers.pop(rec.container_id, None)
        rec.held = stop and was_running and not self.node_manager.frees_at_once
        if not rec.held:
            self._give_back(rec, app)
        if rec in app.out_allocated:   # granted but never delivered: the AM never hears of it
            app.out_allocated.remove(rec)
        elif not app.state.finished:
            app.out_completed.append(self._status(rec))
        self._dirty = True
        self.version += 1
        if stop and was_running:
            rec.stopping = True
            self.node_manager.stop(rec)
        if "container_finished" in self._heard:   # (its detail formatted when read: a replay hears of every one)
            self._emit("container_finished", rec.app_id, rec.container_id, self.ledger.hosts[rec.node],
                       ("{0.value} exit={1} {2}", state, exit_status, diagnostics))
        if len(self.containers) > self._forget_containers_at:
            self._forget_old_containers()

    def _give_back(self, rec: ContainerRecord, app: Application) -> None:
        """Free what a finished container (of ``app``) booked, on its node and in its queue."""
        node, booking = rec.node, rec.booking
        self.ledger.give_back(node, booking)
        self.node_containers[node].discard(rec.container_id)
        self.node_changes.touch(node)
        self._charge(self.queues[app.queue], booking.returned)

    def _charge(self, queue: Queue, amounts: tuple[int, int, int, int, int]) -> None:
        """Count a booking in its queue's usage and out of the cluster's free totals, as its
        ``held`` amounts (its ``returned`` ones count it back)."""
        mem, mvc, gpus, gpu_milli, all_gpu_milli = amounts
        queue.used_mem += mem
        queue.used_mvc += mvc
        queue.used_gpus += gpus
        queue.used_gpu_milli += gpu_milli
        self._free_mem -= mem
        self._free_mvc -= mvc
        self._free_gpu_milli -= all_gpu_milli

    def _node_changed(self, i: int) -> None:
        self._dirty = True
        self.version += 1
        self.node_changes.touch(i)
        self._emit("node_state", host=self.ledger.hosts[i],
                   detail=f"{self.ledger.states[i].value} {self.ledger.health_reports[i]}")

    def _end_app(self, app: Application, state: AppState, final_status: str, diagnostics: str,
                 exit_status: int) -> None:
        app.state = state
        app.final_status, app.diagnostics = final_status, diagnostics
        app.finished_at = self.clock.now()
        app.asks.clear()
        if app.expiry_timer is not None:
            app.expiry_timer.cancel()
        if app.containers:
            for cid in sorted(app.containers):
                self._finish_container(app.containers[cid], ContainerState.KILLED, exit_status,
                                       f"application {app.app_id} {state.value.lower()}")
        del self.queues[app.queue].apps[app.app_id]
        self.running_apps -= 1
        self._dirty = True
        self.version += 1
        self.finished_apps[app.app_id] = app
        if "app_finished" in self._heard:
            self._emit("app_finished", app.app_id, detail=f"{state.value} {final_status} {diagnostics}")
        if len(self.finished_apps) > limits.RM_MAX_COMPLETED_APPS:
            self._forget_old_apps()

    def _fail_attempt(self, app: Application, diagnostics: str) -> None:
        if app.attempt >= app.max_attempts:
            self._end_app(app, AppState.FAILED, "FAILED",
                          f"attempt {app.attempt} of {app.max_attempts} failed: {diagnostics}",
                          ExitStatus.KILLED_AFTER_APP_COMPLETION)
            return
        failed = app.attempt
        for cid in sorted(app.containers):
            rec = app.containers[cid]
            if not app.keep_containers or rec.state is ContainerState.ALLOCATED:
                self._finish_container(rec, ContainerState.KILLED, ExitStatus.KILLED_AFTER_APP_COMPLETION,
                                       f"AM attempt {failed} ended: {diagnostics}")
        app.attempt += 1
        app.state = AppState.ACCEPTED
        app.asks.clear()
        app.blacklist = _NO_NODES
        app.out_allocated, app.out_completed, app.out_rejected = [], [], ()
        app.diagnostics = f"attempt {failed} failed: {diagnostics}"
        if app.expiry_timer is not None:
            app.expiry_timer.cancel()
        self._dirty = True
        self.version += 1
        self._emit("attempt_failed", app.app_id, detail=f"attempt {failed} failed ({diagnostics}); "
                                                         f"attempt {app.attempt} may register")

    def _arm_expiry(self, app: Application) -> None:
        if app.am_expiry_s is None:
            return
        if app.expiry_timer is not None:
            app.expiry_timer.cancel()
        attempt = app.attempt

        def check() -> None:
            with self.lock:
                if app.state is not AppState.RUNNING or app.attempt != attempt:
                    return
                due = app.last_heartbeat + app.am_expiry_s
                if self.clock.now() + 1e-9 >= due:
                    self._fail_attempt(app, f"no heartbeat for {app.am_expiry_s:g}s")
                else:
                    app.expiry_timer = self.clock.call_at(due, check)

        app.expiry_timer = self.clock.call_at(app.last_heartbeat + app.am_expiry_s, check)

    # ================================================================ history
    def _forget_old_apps(self) -> None:
        """Past RM_MAX_COMPLETED_APPS finished applications, forget the tenth of them that
        finished first (with their containers), as YARN forgets its completed applications:
        memory stays bounded however many applications come and go, and the cost of a pass
        is spread over a tenth of the limit's application ends. The pass reads the finished
        applications in the order they finished (:attr:`finished_apps`), never the running
        ones nor every container the RM remembers: an application is forgotten with the
        containers it was granted (its own list); one whose booking is still held (a stopped
        container whose processes are not gone yet) is kept until it is released."""
        finished = self.finished_apps
        limit = limits.RM_MAX_COMPLETED_APPS
        if len(finished) <= limit:
            return
        drop = len(finished) - limit + limit // 10
        containers = self.containers
        gone = []
        for app in finished.values():
            if len(gone) >= drop:
                break
            for cid in app.container_ids:
                rec = containers.get(cid)
                if rec is not None and rec.held:
                    break
            else:   # none of its containers holds its booking
                gone.append(app)
        for app in gone:
            del self.apps[app.app_id]
            del finished[app.app_id]
            for cid in app.container_ids:
                containers.pop(cid, None)   # (the oldest finished ones may be forgotten already)
        self.version += 1

    def _forget_old_containers(self) -> None:
        """Past RM_MAX_FINISHED_CONTAINERS finished containers, forget the oldest tenth of
        them (their status then answers NOT_FOUND); the next check waits for a tenth of the
        limit more containers, so a pass is paid for rarely however many are live."""
        limit = limits.RM_MAX_FINISHED_CONTAINERS
        finished = [cid for cid, rec in self.containers.items() if rec.state.finished and not rec.held]
        if len(finished) > limit:
            for cid in finished[:len(finished) - limit + limit // 10]:
                del self.containers[cid]
            self.version += 1
        self._forget_containers_at = len(self.containers) + limit // 10

    # ================================================================ invariants
    def check_invariants(self) -> None:
        """Recount every node from the live containers; raise AssertionError on any
        double booking or drift (``free + used == capacity``). Used by the property tests."""
        ledger = self.ledger
        for i in range(len(ledger)):
            mem = mvc = 0
            mask = 0
            shares = np.zeros(ledger.gpu_width, dtype=np.int64)   # milli-GPU held by shares, per GPU
            ports = []
            for cid in self.node_containers[i]:
                b = self.containers[cid].booking
                c = self.containers[cid]
                assert not c.state.finished or c.held, f"finished container {cid} still on node"
                if b.gpu_milli:
                    shares[b.gpu_mask.bit_length() - 1] += b.gpu_milli
                else:
                    assert not (mask & b.gpu_mask), f"{ledger.hosts[i]}: GPU mask {b.gpu_mask:#x} double-booked"
                    mask |= b.gpu_mask
                mem += b.memory_mb
                mvc += b.mvcores
                ports.extend(b.port_ranges)
            shared_mask = self._check_gpu_shares(i, mask, shares)
            assert len(ports) == len(set(ports)), f"{ledger.hosts[i]}: a port is double-booked"
            assert mem + ledger.memory_free[i] == ledger.memory_capacity[i], f"{ledger.hosts[i]}: memory drift"
            assert mvc + ledger.mvcores_free[i] == ledger.mvcores_capacity[i], f"{ledger.hosts[i]}: vcores drift"
            free_mask, capacity_mask = int(ledger.gpu_free_mask[i]), int(ledger.gpu_capacity_mask[i])
            assert mask | free_mask | shared_mask == capacity_mask and not (mask & free_mask), \
                f"{ledger.hosts[i]}: GPU masks drift"
            assert bin(free_mask).count("1") == ledger.gpus_free[i], f"{ledger.hosts[i]}: GPU count drift"
            assert ledger.memory_free[i] >= 0 and ledger.mvcores_free[i] >= 0, f"{ledger.hosts[i]}: negative free"
            used_ports = set(ports)
            assert not used_ports & set(ledger.ports_free[i]), f"{ledger.hosts[i]}: a used port is free"
            assert used_ports | set(ledger.ports_free[i]) == set(ledger.port_capacity[i]), \
                f"{ledger.hosts[i]}: ports drift"
        for q in self.queues.values():
            live = [c for c in self.containers.values()
                    if (not c.state.finished or c.held) and self.apps[c.app_id].queue == q.name]
            assert q.used_mem == sum(c.booking.memory_mb for c in live), f"queue {q.name}: memory drift"
            assert q.used_gpus == sum(c.booking.demand.gpus for c in live), f"queue {q.name}: GPU drift"
            assert q.used_gpu_milli == sum(c.booking.gpu_milli for c in live), f"queue {q.name}: GPU share drift"
            assert q.used_mem <= q.max_mem and q.used_mvc <= q.max_mvc and q.gpu_milli_used <= q.max_gpus * GPU_MILLI, \
                f"queue {q.name}: over its limit"
        mem, mvc, gpus = self._capacity_totals
        free = [self._free_mem, self._free_mvc, self._free_gpu_milli]
        assert free == [mem - sum(q.used_mem for q in self.queues.values()),
                        mvc - sum(q.used_mvc for q in self.queues.values()),
                        gpus * GPU_MILLI - sum(q.gpu_milli_used for q in self.queues.values())], \
            "the queues' totals drift"
        assert self.running_apps == sum(len(q.apps) for q in self.queues.values()), "running applications drift"
        assert self.finished_apps.keys() == {a for a, app in self.apps.items() if app.state.finished}, \
            "finished applications drift"
        assert free == [int(ledger.memory_free.sum()), int(ledger.mvcores_free.sum()),
                        int(ledger.gpu_milli_free.sum())], "the queues' usage and the nodes' free drift"

    def _check_gpu_shares(self, i: int, whole_mask: int, shares: np.ndarray) -> int:
        """Node ``i``'s GPUs, recounted from its containers (whole GPUs by ``whole_mask``, shares
        in milli per GPU): each GPU wholly free, taken whole, or holding shares that leave
        free + used = 1000; never a share on a GPU taken whole or past 1000 on one GPU.
        Returns the mask of the GPUs holding shares."""
        ledger, host = self.ledger, self.ledger.hosts[i]
        present = np.arange(ledger.gpu_width) < ledger.gpu_capacity.item(i)
        shared = shares > 0
        assert not (shares[~present]).any(), f"{host}: a share on a GPU the node does not have"
        assert (shares <= GPU_MILLI).all(), f"{host}: a GPU shared past {GPU_MILLI} milli: {shares.tolist()}"
        shared_mask = int(sum(1 << int(g) for g in np.flatnonzero(shared)))
        assert not (shared_mask & whole_mask), f"{host}: a share on a GPU taken whole"
        assert np.array_equal(ledger.gpu_share_used[i], shares), \
            f"{host}: share ledger {ledger.gpu_share_used[i].tolist()} != containers' {shares.tolist()}"
        assert ledger.gpus_shared.item(i) == int(shared.sum()), f"{host}: count of shared GPUs drift"
        milli_free = ledger.gpu_milli_free_rows([i])[0]
        used = np.where(shared, shares, np.where([whole_mask >> g & 1 for g in range(ledger.gpu_width)],
                                                  GPU_MILLI, 0))
        assert ((milli_free + used)[present] == GPU_MILLI).all() and not milli_free[~present].any(), \
            f"{host}: per GPU free {milli_free.tolist()} + used {used.tolist()} != {GPU_MILLI}"
        free_mask = int(ledger.gpu_free_mask[i])
        assert not (shared_mask & free_mask), f"{host}: a GPU holding shares is in the free mask"
        return shared_mask
