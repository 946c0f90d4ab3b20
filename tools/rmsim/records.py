"""The RM's records and its events: an application (YARN's RMApp), an ask being served
and a container (RMContainer), each a plain record owned by one collaborator
(:mod:`.applications`, :mod:`.scheduler`, :mod:`.containers`) and read by the others;
and :class:`RMEvent`, what the RM tells its subscribers (:mod:`.events`).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from gangmaster.am.core.reservation_plan import gang_instances
from gangmaster.protocol.reasons import NO_REASON
from gangmaster.protocol.rm_protocol import (AppState, ContainerState, ContainerStatus, GangRole, LaunchContext,
                                             Rejection, ResourceRequest)
from gangmaster.selectors.fit import Demand
from gangmaster.selectors.values import WrittenValue

from .ledger import Booking

#: an application's blacklist while it has none (a blacklist is replaced when it changes, never changed)
NO_NODES: frozenset[int] = frozenset()
#: a container's NodeManager data while its NodeManager keeps none (a simulated one): one shared,
#: read-only mapping, not a dict per container (a NodeManager that keeps some sets its own)
NO_HANDLE = MappingProxyType({})

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


class AskState:
    """An ask of an application being served: the request, its compiled need and exact
    booking (:meth:`.asks.AskIntake.compiled`) and what is left of it."""

    __slots__ = ("app", "request", "need", "exact", "remaining", "host_i", "rack_code", "reason", "levels", "level",
                 "pos", "blocked")

    def __init__(self, app: "Application", request: ResourceRequest, need: Demand, exact: Booking | None,
                 host_i: int | None, rack_code: int | None):
        self.app, self.request, self.need, self.exact = app, request, need, exact
        self.remaining = request.count
        self.host_i, self.rack_code = host_i, rack_code
        self.reason = NO_REASON
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
        self.handle: Mapping = NO_HANDLE   # NodeManager's own data (pid, exit file), set by it
        self.stopping = False           # the RM asked the NodeManager to stop it
        #: Finished for its application, but its booking is kept until the NodeManager reports
        #: its processes gone (:meth:`.containers.Containers.released`): a dying task keeps
        #: its GPUs, so nothing new is granted them while it may still use them.
        self.held = False
        self.expiry: Any = None         # the allocation-expiry timer while it waits to be started


class Application:
    """An application the RM accepted, until it is forgotten (made at every submission:
    its ``__init__`` sets each field once, as :class:`ContainerRecord`'s does)."""

    __slots__ = ("app_id", "seq", "name", "queue", "submitted_at", "max_attempts", "keep_containers", "am_expiry_s",
                 "state", "attempt", "finished_at", "final_status", "diagnostics", "last_heartbeat", "response_id",
                 "asks", "blacklist", "containers", "container_ids", "out_allocated", "out_completed", "node_cursor",
                 "out_rejected", "expiry_timer", "priority", "roles", "gang", "expected_s")

    def __init__(self, app_id: str, seq: int, name: str, queue: str, submitted_at: float, max_attempts: int,
                 keep_containers: bool, am_expiry_s: float | None, priority: int = 0,
                 roles: tuple[GangRole, ...] = (), expected_s: float | None = None):
        self.app_id, self.seq, self.name, self.queue, self.submitted_at = app_id, seq, name, queue, submitted_at
        self.priority = priority   # as submitted
        #: its declared gang, role by role, and duration, as submitted (placed by the preemption
        #: monitor of ``rm serve``: .preemption_monitor; kept by the state file)
        self.roles, self.expected_s = roles, expected_s
        #: the gang's instances asking whole GPUs, as the planner takes them (read by a reserving
        #: queue: .reservations)
        self.gang = tuple(gang_instances(roles)) if roles else ()
        self.max_attempts, self.keep_containers, self.am_expiry_s = max_attempts, keep_containers, am_expiry_s
        self.state = AppState.ACCEPTED
        self.attempt = 1
        self.finished_at: float | None = None
        self.final_status = self.diagnostics = ""
        self.last_heartbeat = 0.0
        self.response_id = 0
        self.asks: dict[int, AskState] = {}               # request_id -> AskState (arrival order)
        self.blacklist: frozenset[int] = NO_NODES        # node indices
        self.containers: dict[str, ContainerRecord] = {}  # container_id -> ContainerRecord (live ones)
        self.container_ids: list[str] = []                # every container it was granted (what forgetting it drops)
        self.out_allocated: list[ContainerRecord] = []
        self.out_completed: list[ContainerStatus] = []
        self.node_cursor = 0                              # the node changes its AM has heard of (NodeChanges)
        self.out_rejected: tuple[Rejection, ...] = ()     # (rare: a tuple, handed to the response as it is)
        self.expiry_timer: Any = None


