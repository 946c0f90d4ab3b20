"""The AM–RM protocol: the messages an ApplicationMaster exchanges with a
ResourceManager, mirroring YARN's ``ApplicationMasterProtocol``,
``ContainerManagementProtocol`` and ``ApplicationClientProtocol``.

These dataclasses are the one vocabulary shared by the in-process RM (virtual
time), the gRPC server (live) and the AM, so the AM never learns which RM it
talks to. They are values (:data:`~gangmaster.selectors.values.value`): slotted, compared and hashed by their
fields, and never changed once built — by convention, not by ``frozen``, whose
``__init__`` sets every field through ``object.__setattr__`` at about four times
the cost (a replay builds tens of messages per job). What comes from the wire is
checked in full before the RM reads it (:mod:`~gangmaster.protocol.rm_validation`).
Resources are :class:`ResourceDescriptor` values from the selection
layer; a container's GPUs are always named by a mask (a share of one GPU,
``gpu_milli``, by the mask of that one GPU; an ask for a share may leave the GPU to
the RM, which gives the one with the least milli free that still takes it).

Semantics worth knowing (they differ from YARN in small, deliberate ways):

* An ask (:class:`ResourceRequest`) is identified by the AM's ``request_id``.
  Asks are *added* by an ``allocate`` call and stay pending until satisfied,
  cancelled (``cancel``) or rejected; they are not a table that each heartbeat
  overwrites. Every allocated container carries the ``request_id`` it serves.
* Locality: ``host`` (and optionally ``rack``) name where the container must go.
  With ``relax_locality`` the RM falls back from the host to its rack, then to
  any node; without it the ask waits for that host. An ask that can never fit
  (bigger than the host or than any node, beyond the queue's limit, a GPU mask
  naming GPUs the node lacks) is *rejected* with a reason in the response.
* Two AMs asking for the same host: the RM grants it to one; the other's ask
  stays pending and its next response lists it in ``pending`` with the reason.
"""
from __future__ import annotations

import enum
from dataclasses import field

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.values import WrittenValue, value
from .reasons import NO_REASON, Reason

ANY_HOST = "*"



class ContainerState(str, enum.Enum):
    """allocated → running → completed | failed | killed."""

    ALLOCATED = "ALLOCATED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    #: completed, failed or killed: held by each member, so reading it calls nothing (the RM
    #: asks it of every container several times)
    finished: bool

    def __init__(self, value: str) -> None:
        self.finished = value in ("COMPLETED", "FAILED", "KILLED")


class ExitStatus(enum.IntEnum):
    """Container exit statuses. Non-negative values are the process's own exit code
    (0 = success); the negative ones are YARN's ``ContainerExitStatus`` codes plus
    two of ours (``NODE_LOST``, ``LOST_ON_RM_RESTART``) so the AM can tell "the node
    died" from "the task failed" without parsing diagnostics."""

    SUCCESS = 0
    INVALID = -1000
    ABORTED = -100               # released by the AM before or while it ran
    PREEMPTED = -102
    KILLED_BY_APPMASTER = -105   # stop_container
    KILLED_BY_RESOURCEMANAGER = -106  # fault injection, application killed
    KILLED_AFTER_APP_COMPLETION = -107  # app finished / AM attempt ended
    NODE_LOST = -110             # the node was lost with the container on it
    LOST_ON_RM_RESTART = -111    # the process vanished while the RM was down


class NodeState(str, enum.Enum):
    RUNNING = "RUNNING"          # healthy, takes containers
    UNHEALTHY = "UNHEALTHY"      # blacklisted by the cluster: running containers stay, no new ones
    LOST = "LOST"                # gone: its containers are lost

    #: takes containers (running): held by each member, as ContainerState.finished is
    usable: bool

    def __init__(self, value: str) -> None:
        self.usable = value == "RUNNING"


class AppState(str, enum.Enum):
    ACCEPTED = "ACCEPTED"        # submitted, waiting for (a new attempt of) its AM to register
    RUNNING = "RUNNING"          # an AM attempt is registered
    FINISHED = "FINISHED"        # the AM unregistered
    FAILED = "FAILED"            # AM attempts exhausted
    KILLED = "KILLED"            # killed by a client

    #: finished, failed or killed: held by each member, as ContainerState.finished is
    finished: bool

    def __init__(self, value: str) -> None:
        self.finished = value in ("FINISHED", "FAILED", "KILLED")


# --------------------------------------------------------------------- errors
class RMError(Exception):
    """An RM call that cannot be served. ``code`` maps to a gRPC status code and back,
    so the in-process and the gRPC client raise the same exception class."""

    code = "internal"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidRequest(RMError):
    """A malformed request: the message names the field (``asks[2].host``)."""

    code = "invalid_argument"


class NotFound(RMError):
    """An unknown application, container, host or queue."""

    code = "not_found"


class WrongState(RMError):
    """A call that does not fit the object's state (a stale AM attempt, a finished app)."""

    code = "failed_precondition"


class Unauthenticated(RMError):
    """A call the server refused before serving it: no token, or not the server's."""

    code = "unauthenticated"


ERROR_CLASSES = {cls.code: cls for cls in (RMError, InvalidRequest, NotFound, WrongState, Unauthenticated)}


# ------------------------------------------------------------------- messages
@value
class ResourceRequest:
    """An ask: ``count`` containers of ``resource``, on ``host`` / ``rack`` / anywhere."""

    request_id: int
    resource: ResourceDescriptor
    count: int = 1
    host: str | None = None
    rack: str | None = None
    relax_locality: bool = True
    node_label: str | None = None
    priority: int = 0

    @property
    def location(self) -> str:
        return self.host or self.rack or ANY_HOST


@value
class AllocateRequest:
    """One AM heartbeat."""

    app_id: str
    attempt: int
    asks: tuple[ResourceRequest, ...] = ()
    cancel: tuple[int, ...] = ()              # request ids whose remaining containers are no longer wanted
    releases: tuple[str, ...] = ()            # container ids the AM gives back
    blacklist_additions: tuple[str, ...] = ()  # hosts this app must not be given
    blacklist_removals: tuple[str, ...] = ()
    progress: float = 0.0


@value
class Container:
    """A granted container: where, what exactly (GPU mask, ports), for which ask."""

    container_id: str
    app_id: str
    attempt: int
    host: str
    rack: str
    resource: ResourceDescriptor
    request_id: int
    allocated_at: float


@value
class ContainerStatus:
    container_id: str
    host: str
    state: ContainerState
    exit_status: int | None = None
    diagnostics: str = ""
    request_id: int = 0


@value
class NodeReport:
    host: str
    rack: str
    state: NodeState
    capacity: ResourceDescriptor
    free: ResourceDescriptor
    labels: frozenset[str] = frozenset()
    gpu_type: str | None = None
    topology: str | None = None
    containers: int = 0
    health_report: str = ""
    #: milli-GPU free per GPU index, for a node whose GPUs hold shares (1000: wholly free; 0:
    #: taken whole or full of shares); None: no GPU of it holds a share (``free`` says it all)
    gpu_milli_free: tuple[int, ...] | None = None
    #: the network domains above the rack, innermost first (:attr:`NodeSpec.domains`)
    domains: tuple[tuple[str, str], ...] = ()

    @property
    def spec(self) -> NodeSpec:
        """The node as a :class:`NodeSpec` (what a ClusterView is built from)."""
        c = self.capacity
        return NodeSpec(self.host, self.rack, self.labels, self.gpu_type, self.topology, c.memory_mb, c.vcores,
                        c.gpus, c.port_ranges, self.domains)

    @property
    def used(self) -> ResourceDescriptor:
        """capacity - free: what the node's containers hold (GPUs by mask, ports by range)."""
        return self.capacity.subtract(self.free)


def view_from_nodes(nodes: list[NodeReport]) -> ClusterView:
    """The AM's :class:`ClusterView` from ``RMClient.cluster_nodes()``: capacity, current usage
    (GPU shares per GPU included) and health as the RM reports them (a LOST or UNHEALTHY node
    is not healthy)."""
    view = ClusterView([n.spec for n in nodes])
    for n in nodes:   # a new view's nodes are healthy and unused: only the others are set (and marked changed)
        if n.free is not n.capacity and n.free != n.capacity:
            view.set_free(n.host, n.free, n.gpu_milli_free)
        if not n.state.usable:
            view.set_health(n.host, False)
    return view


@value
class Rejection:
    """An ask the RM will never grant, and why (a code of :mod:`.reasons`)."""

    request_id: int
    reason: Reason


@value
class PendingAsk:
    """An ask still (partly) waiting, with why it could not be placed in the last pass."""

    request_id: int
    remaining: int
    reason: Reason = NO_REASON


@value
class PreemptionMessage:
    """YARN's ``PreemptionMessage`` with a ``StrictPreemptionContract``: the RM will take
    back these containers (every container of the application's gang: a gang is preempted
    whole) at ``deadline`` (the RM's clock), ending them with :attr:`ExitStatus.PREEMPTED`.
    Until then the AM may let its tasks checkpoint (it forwards the notice to them) or give
    the containers back itself. ``reason`` says for whom (the gang that takes the room)."""

    containers: tuple[str, ...]
    deadline: float
    reason: Reason = NO_REASON


@value
class ReservedNode:
    """A node held for another application's waiting gang (a queue with ``policy: reserve``)
    that this application may not be granted on: it is not declared to end by ``start_s``
    (the RM's clock), when that gang is expected to start there. The AM places elsewhere."""

    host: str
    start_s: float


#: how a reservation's start is known: from the declared durations of the work it waits for, from
#: observed ones of similar jobs, or some ends are unknown (the planner's DECLARED, OBSERVED, UNKNOWN)
RESERVATION_KNOWN = ("declared", "observed", "unknown")


@value
class HeldReservation:
    """The reservation a queue with ``policy: reserve`` holds for this application's waiting
    gang, as of the RM's last scheduling pass, counted from the answer: the gang is expected to
    start in ``start_in_s`` seconds on ``gpus_by_host`` ((host, GPUs) pairs) and to run
    ``duration_s`` (None: unknown), once the applications ``waits_for`` end (latest first),
    whose ends are ``known`` "declared", "observed" or "unknown". What the gang's diagnosis says
    ("expected to start in ~1m 30s on 2 reserved machines when first5 ends")."""

    start_in_s: float
    duration_s: float | None
    gpus_by_host: tuple[tuple[str, int], ...]
    waits_for: tuple[str, ...] = ()
    known: str = "declared"


class AllocateResponse(WrittenValue):
    """The answer to one AM heartbeat. A value as the other messages are (compared and
    hashed by its fields, never changed), written out for its ``headroom``: what the queue
    could still be given, a :class:`ResourceDescriptor` when read, which the RM may give as
    the amounts it is made of (memory MB, milli-vcores, whole GPUs, as they were when it
    answered), made into a descriptor when first read. An AM never reads it (the codec sends
    it): a replay's tens of thousands of responses build none."""

    __slots__ = ("allocated", "completed", "node_updates", "rejected", "pending", "_headroom", "response_id",
                 "preemption", "reserved", "reservation")
    FIELDS = ("allocated", "completed", "node_updates", "rejected", "pending", "headroom", "response_id",
              "preemption", "reserved", "reservation")

    def __init__(self, allocated: tuple[Container, ...] = (), completed: tuple[ContainerStatus, ...] = (),
                 node_updates: tuple[NodeReport, ...] = (), rejected: tuple[Rejection, ...] = (),
                 pending: tuple[PendingAsk, ...] = (),
                 headroom: ResourceDescriptor | tuple[int, int, int] | None = None, response_id: int = 0,
                 preemption: PreemptionMessage | None = None, reserved: tuple[ReservedNode, ...] = (),
                 reservation: HeldReservation | None = None):
        self.allocated, self.completed, self.node_updates = allocated, completed, node_updates
        self.rejected, self.pending, self._headroom, self.response_id = rejected, pending, headroom, response_id
        #: the RM's notice that containers of this application are preempted (None: none)
        self.preemption = preemption
        #: every node reserved for another gang that this application may not be granted on, as
        #: of the RM's last scheduling pass (empty: none; each answer says them all again)
        self.reserved = reserved
        #: the reservation held for this application's own waiting gang (None: none), as of that pass
        self.reservation = reservation

    @property
    def headroom(self) -> ResourceDescriptor:
        headroom = self._headroom
        if not isinstance(headroom, ResourceDescriptor):   # amounts (or none: nothing)
            headroom = self._headroom = (ResourceDescriptor() if headroom is None else
                                         ResourceDescriptor(headroom[0], headroom[1] / 1000.0, headroom[2]))
        return headroom


@value
class RegisterResponse:
    app_id: str
    attempt: int
    queue: str
    maximum_resource: ResourceDescriptor          # the largest container any node can hold
    containers_from_previous_attempts: tuple[Container, ...] = ()
    queue_limit: ResourceDescriptor | None = None  # the most the queue may hold at once (None: the cluster)


@value
class GangRole:
    """One role of the gang an application declares when it is submitted: ``instances``
    alike, each asking ``gpus`` whole GPUs (or a ``gpu_milli`` share of one), ``vcores`` and
    ``memory_mb``, at most ``max_instances_per_node`` of them on one node (None: no cap).
    What the RM plans a reservation for and places when it looks for whom to preempt; the
    attribute names are a role's (:func:`~gangmaster.am.core.reservation_plan.gang_instances`
    reads either)."""

    name: str
    instances: int
    gpus: int = 0
    gpu_milli: int = 0
    vcores: float = 0.0
    memory_mb: int = 0
    max_instances_per_node: int | None = None


@value
class ApplicationSubmission:
    name: str
    queue: str = "default"
    max_attempts: int = 2
    keep_containers_across_attempts: bool = False
    am_expiry_s: float | None = None   # no heartbeat for this long: the AM attempt is declared dead
    #: YARN's application priority (the job's ``gangmaster: priority``): what the diagnosis of
    #: another application's gang compares with its own.
    priority: int = 0
    #: The gang the job declares (its largest: :func:`~gangmaster.am.core.reservation_plan.declared_gang`):
    #: what a reserving queue plans room for while it waits (``policy: reserve`` in the RM's queue
    #: file) and what the RM's preemption monitor places; and how long the job is declared to run
    #: (None: unknown; then the RM counts its containers' ends as never).
    gang: tuple[GangRole, ...] = ()
    expected_duration_s: float | None = None


@value
class ApplicationReport:
    app_id: str
    name: str
    queue: str
    state: AppState
    attempt: int
    submitted_at: float
    finished_at: float | None = None
    final_status: str = ""
    diagnostics: str = ""
    running_containers: int = 0
    pending_containers: int = 0
    used: ResourceDescriptor = field(default_factory=ResourceDescriptor)   # whole GPUs only
    #: milli-GPU its containers hold as shares of GPUs (``used`` counts whole GPUs only)
    gpu_milli_used: int = 0
    #: its containers that ended (stopped, killed with it) whose processes are still being
    #: stopped: 0 once nothing of it runs (a rerun waits for that before starting the job again)
    stopping_containers: int = 0


@value
class LaunchContext:
    """What a NodeManager starts in a container.

    The live NodeManager runs ``command`` as a real local process with ``env``,
    adding the placement variables (host, ports, GPUs, see
    ``gangmaster.tools.rmsim.nodemanager``). In virtual time nothing runs: what the
    task does is the simulator's workload model's to say, from ``env``
    (``gangmaster.tools.rmsim.workload``). An AM sets both and never asks which
    NodeManager it has."""

    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    _variables: dict[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, command=(), env: dict[str, str] | None = None) -> "LaunchContext":
        return cls(tuple(command), tuple(sorted((env or {}).items())))

    @classmethod
    def of_variables(cls, command: tuple[str, ...], variables: dict[str, str]) -> "LaunchContext":
        """The launch of ``command`` with ``variables``, sent as their items in their order
        and read as they are (:attr:`variables`: the caller hands them over, never to change
        them again)."""
        launch = cls(command, tuple(variables.items()))
        launch._variables = variables
        return launch

    @property
    def env_dict(self) -> dict[str, str]:
        """Its variables as a dict of one's own, to change."""
        return dict(self.env)

    @property
    def variables(self) -> dict[str, str]:
        """Its variables by name, to read and never change (:attr:`env_dict` is a copy to
        change), worked out once: a gang's shared launch is asked at every container's
        start (6,001 for a story-3 gang), and a started container's NodeManager reads them."""
        variables = self._variables
        if variables is None:
            variables = self._variables = dict(self.env)
        return variables

    def over(self, shared: "LaunchContext") -> "LaunchContext":
        """This container's whole launch in a batch whose containers share ``shared``: its
        own command (the shared one when it has none), the shared variables it does not set
        itself, then its own. Its :attr:`variables` come with it, made from the shared
        ones without reading the pairs again."""
        if not shared.env and not shared.command:
            return self
        own = self.variables
        common = shared.variables
        env = (shared.env if common.keys().isdisjoint(own)
               else tuple([pair for pair in shared.env if pair[0] not in own]))
        launch = LaunchContext(self.command or shared.command, env + self.env)
        launch._variables = common | own   # what dict(launch.env) holds (in another order where both set one)
        return launch


@value
class ContainerLaunch:
    """One container of a :class:`StartContainers` batch and what it adds to the shared launch."""

    container_id: str
    launch: LaunchContext = LaunchContext()


@value
class StartContainers:
    """Start a gang's containers in one call (YARN's ``StartContainersRequest``). What every
    task of the gang has alike (its peers' hosts, the job's variables: most of a story-3
    task's ~90 variables) is sent and checked once, in ``shared``; each container brings
    only its own command and variables (:meth:`LaunchContext.over`)."""

    containers: tuple[ContainerLaunch, ...]
    shared: LaunchContext = LaunchContext()


@value
class StartRefused:
    """The container of a batch the RM could not start, and why. The RM starts a batch's
    containers in order and stops at the first it cannot start: those before it run, those
    after it were not tried (still ALLOCATED)."""

    index: int
    container_id: str
    error: RMError
