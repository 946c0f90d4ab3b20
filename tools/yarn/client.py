"""The YARN :class:`~gangmaster.protocol.rm_client.RMClient`: the AM on an unmodified Apache Hadoop YARN.

The AM does not know it talks to YARN. How each call maps, and what the client bridges
where YARN differs from gangmaster's RM (``protocol/rm_protocol.py``):

* ``submit`` / ``kill`` / ``application_report`` / ``cluster_nodes``: the RM's REST API
  (:mod:`.rest`). YARN counts GPUs (``yarn.io/gpu``) and knows no ports, no labels, no GPU
  types: the client adds them from the node metadata (:mod:`.target`), hands out a node's
  ``task_ports`` and keeps the ports its own containers hold. Where the cluster declares each
  GPU as a resource of its own (``gangmaster.io/gpu-<index>``, as the local cluster does), an
  ask names its GPUs that way: YARN then never gives one GPU to two applications, and its node
  report says which GPUs are taken. Elsewhere GPUs held by other applications are counted by
  YARN but not named: the client takes them to be the node's highest-numbered GPUs it does not
  hold itself (two applications may then choose the same GPU).
* ``register`` / ``allocate`` / ``finish``: ApplicationMasterProtocol over Hadoop IPC
  (:mod:`.ipc`) with the AMRMToken of the AM's container.

  - An ask on a host becomes YARN's three ResourceRequests (the node, relaxed; its rack and
    ``*``, not relaxed) under the ask's own ``allocation_request_id``. YARN's asks are a table
    each heartbeat overwrites, gangmaster's are added: the client keeps the table, and a
    cancel sends the ask's three requests with a count of 0.
  - YARN leaves an ask that can never fit pending forever: the client refuses it itself
    (``rejected``, with the diagnosis): an unknown host, more than the node has or than the
    RM's largest container, GPUs the node lacks, ports outside its task ports, a share of a GPU.
  - YARN says nothing of why an ask waits: every ask not granted yet is ``pending`` with what
    its node has free now.
  - YARN grants piecemeal, never a gang at once: the AM holds what it got until the rest
    comes, and gives it back after ``am.hold_timeout_s`` (two gangs never hold each other).
  - Exit statuses: YARN's ABORTED (-100), PREEMPTED (-102), KILLED_BY_APPMASTER (-105),
    -106 and -107 are ours too; a container YARN aborts because its node was lost
    ("released on a *lost* node") is ``NODE_LOST`` (-110).
  - Preemption: YARN's ``preempt`` (its strict contract's containers, which it will kill, and
    its contract's, which it takes unless the AM frees as much) becomes the AM's
    ``PreemptionMessage``, each container once (YARN repeats the notice every heartbeat until
    it kills). YARN's message has no deadline: the client adds the RM's grace, its
    ``yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill`` (read once from
    its ``/conf``), to the client's clock; where that cannot be read the deadline is ``inf``
    (unknown: the containers end whenever YARN kills them). The AM forwards it
    (``notify_preemption``): the task's notice file (``GANGMASTER_PREEMPTION_NOTICE``, beside
    its log in the AM's folder, which YARN's tasks share already: they run from it) gets the
    deadline as wall-clock time, which ``BarrierTaskContext.preemption_notice()`` reads. No
    SIGUSR1: YARN's signalToContainer offers only a thread dump, SIGTERM or SIGKILL.
  - Node updates: YARN sends a node only when its state changes; the client reads the
    RM's node list at each heartbeat (at most once a second) and sends every node whose
    report changed, as the simulator does.
  - AM failover (``keep-containers-across-application-attempts``): attempt 2 registers, gets
    the running containers and the NMTokens of their nodes, and reads the GPU indices and
    ports of each from the records the previous attempt left in ``state_dir``.
* ``start_containers`` / ``stop_container`` / ``container_status``: ContainerManagementProtocol
  on each NodeManager with its NMToken (cached per node). YARN's GPU plugin is not used: the
  AM's choice of GPUs is exported as ``CUDA_VISIBLE_DEVICES``, with gangmaster's other
  placement variables, in the container's environment.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from gangmaster.am.task import ENV_PREEMPTION_NOTICE
from gangmaster.protocol.reasons import NO_REASON, Reason, reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, AppState, Container, ContainerState,
    ContainerStatus, ExitStatus, InvalidRequest, LaunchContext, NodeReport, NodeState, NotFound, PendingAsk,
    PreemptionMessage, RegisterResponse, Rejection, ResourceRequest, RMError, StartContainers, StartRefused, WrongState,
)
from gangmaster.gpu_topology.masks import full_mask, indices_of
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

from ..rmsim.process_nodemanager import notice_file
from .credentials import Token
from .ids import BadYarnId, app_id_proto, container_id_proto, container_id_text
from .ipc import AM_PROTOCOL, NM_PROTOCOL, IpcConnection, IpcError, RemoteError
from .proto import yarn_pb2 as yarn
from .local_cluster import GPU_INDEX_PREFIX
from .rest import GPU, AMSpec, RestError, YarnRest
from .target import YarnTarget

#: Ports a node offers its tasks where the node metadata names none (YARN has no port resource).
DEFAULT_TASK_PORTS = "20000-29999"
#: the RM's node list is read at most this often (seconds) for node updates
NODES_REFRESH_S = 1.0
ASK_PRIORITY = 1
#: YARN's preemption grace (ms): how long its preemption monitor waits after the notice before it kills
PREEMPTION_WAIT_KEY = "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill"
#: the file in ``state_dir`` where the client keeps its containers' GPUs and ports (for attempt 2)
CONTAINERS_FILE = "containers.json"
#: YARN exit statuses (ContainerExitStatus) that end a container the program did not end
_KILLED = {ExitStatus.ABORTED, ExitStatus.PREEMPTED, ExitStatus.KILLED_BY_APPMASTER,
           ExitStatus.KILLED_BY_RESOURCEMANAGER, ExitStatus.KILLED_AFTER_APP_COMPLETION}
#: the RM's exceptions that mean "this AM attempt is not (or no longer) the application's"
_WRONG_STATE = ("ApplicationMasterNotRegisteredException", "InvalidApplicationMasterRequestException",
                "ApplicationAttemptNotFoundException", "InvalidToken", "ApplicationNotFoundException")
_LOST_NODE = re.compile(r"\blost\W* node", re.I)   # YARN: "Container released on a *lost* node"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class YarnError(RMError):
    """YARN could not be reached or refused a call (the message says which and why)."""


def exit_status(status: yarn.ContainerStatusProto, node_lost: bool) -> tuple[ContainerState, int]:
    """A YARN container status's end as gangmaster's state and exit status."""
    code = status.exit_status
    if code == ExitStatus.ABORTED and (node_lost or _LOST_NODE.search(status.diagnostics or "")):
        return ContainerState.FAILED, ExitStatus.NODE_LOST
    if code == 0:
        return ContainerState.COMPLETED, 0
    return (ContainerState.KILLED if code in _KILLED else ContainerState.FAILED), code


def shell_value(value: str) -> str:
    """``value`` as YARN's launch script must get it: it writes ``export NAME="VALUE"``, so
    the characters special inside double quotes are escaped (else the shell expands them)."""
    return re.sub(r'([\\"$`])', r"\\\1", value)


def launch_env(env: dict[str, str]) -> list[yarn.StringStringMapProto]:
    """The variables a launch script can export (a name like ``BASH_FUNC_f%%`` cannot)."""
    return [yarn.StringStringMapProto(key=k, value=shell_value(v)) for k, v in env.items() if _NAME.fullmatch(k)]


@dataclass
class _Ask:
    ask: ResourceRequest
    node_id: str
    yarn_rack: str
    asked_at: float


@dataclass
class _Held:
    """A container of this application: YARN's proto and gangmaster's view of it."""

    proto: yarn.ContainerProto
    container: Container
    state: ContainerState = ContainerState.ALLOCATED


@dataclass
class _Node:
    """A YARN node as the client knows it: its id, its name for the AM, its metadata."""

    node_id: str
    host: str
    yarn_rack: str
    report: NodeReport
    raw: dict = field(default_factory=dict)
    gpus_by_index: bool = False   # the node declares gangmaster.io/gpu-<i>: asks name their GPUs


class YarnRMClient(RMClient):
    """The AM's RM on the YARN cluster ``target`` names.

    The client side (REST) works anywhere the RM's web address can be reached; the AM side
    needs the AMRMToken of an AM container (:meth:`in_container`). ``state_dir`` keeps the
    GPU indices and ports of the application's containers for the next AM attempt;
    ``am_spec``: how :meth:`submit` starts an application's AM (its container's command)."""

    def __init__(self, target: YarnTarget, rest: YarnRest | None = None, state_dir: str | Path | None = None,
                 am_spec: Callable[[ApplicationSubmission], AMSpec] | None = None,
                 task_ports: str = DEFAULT_TASK_PORTS, clock: Callable[[], float] = time.monotonic):
        self.target = target
        self.rest = rest or YarnRest(target.rest)
        self.state_dir = Path(state_dir) if state_dir else None
        self.am_spec = am_spec
        self.task_ports = PortRanges.parse(task_ports)
        self.clock = clock
        self._lock = threading.RLock()   # one IPC call at a time (the AM's clock thread, /why's thread)
        # the AM side, once attached to an AM container's token
        self.app_id = ""
        self.attempt = 0
        self.tracking_url = ""   # given YARN at register: the AM's web address (its status page), if it serves one
        self._amrm: Token | None = None
        self._rm: IpcConnection | None = None
        self._response_id = 0
        self._nm_tokens: dict[str, Token] = {}
        self._nms: dict[str, IpcConnection] = {}
        self._asks: dict[int, _Ask] = {}
        self._held: dict[str, _Held] = {}
        self._ended: dict[str, ContainerStatus] = {}     # completions seen (for container_status)
        self._early: list[yarn.AllocateResponseProto] = []   # responses read at register, not yet reported
        self._maximum = ResourceDescriptor()
        self._nodes: dict[str, _Node] = {}               # by YARN node id
        self._by_host: dict[str, _Node] = {}
        self._nodes_read_at = float("-inf")
        self._sent: dict[str, NodeReport] = {}
        self._preempted: dict[str, float] = {}           # containers the AM was told YARN preempts -> deadline
        self._preemption_grace_s: float | None = None    # YARN's, once read (inf: it cannot be)

    # ------------------------------------------------------------ the AM container
    @classmethod
    def in_container(cls, target: YarnTarget, state_dir: str | Path, env: dict[str, str] | None = None,
                     **kwargs) -> "YarnRMClient":
        """The client of the AM in the container YARN started for it: its application and
        attempt from ``CONTAINER_ID``, its AMRMToken from ``HADOOP_TOKEN_FILE_LOCATION``."""
        from .am_entry import amrm_token
        from .ids import attempt_of

        env = os.environ if env is None else env
        container = env.get("CONTAINER_ID")
        if not container:
            raise YarnError("CONTAINER_ID is not set: the YARN AM runs in the container YARN starts for it")
        client = cls(target, state_dir=state_dir, **kwargs)
        client.app_id, client.attempt = attempt_of(container)
        try:
            client._amrm = amrm_token(env.get("HADOOP_TOKEN_FILE_LOCATION"))
        except (IpcError, ValueError, OSError) as exc:
            raise YarnError(f"the AM's token: {exc}") from None
        return client

    def _scheduler(self) -> tuple[str, int]:
        address = self.target.scheduler
        if not address:
            try:
                address = self.rest.conf("yarn.resourcemanager.scheduler.address")
            except RestError as exc:
                raise YarnError(f"the RM's scheduler address (yarn.resourcemanager.scheduler.address): {exc}") from None
            self.target.scheduler = address
        host, _, port = address.rpartition(":")
        if host in ("0.0.0.0", ""):
            host = self.target.rest.split("//", 1)[-1].rsplit(":", 1)[0]
        return host, int(port)

    def _rm_call(self, method: str, request, response_type):
        """One ApplicationMasterProtocol call; a dropped connection is made again once (with
        the latest AMRMToken: the RM rolls it)."""
        if self._amrm is None:
            raise WrongState("this client holds no AMRMToken: the AM side runs in the AM's YARN container")
        with self._lock:
            for tries in (1, 2):
                try:
                    if self._rm is None:
                        self._rm = IpcConnection(*self._scheduler(), self._amrm, AM_PROTOCOL)
                    return self._rm.call(method, request, response_type)
                except RemoteError as exc:
                    raise self._remote(method, exc) from None
                except IpcError as exc:
                    self._drop_rm()
                    if tries == 2:
                        raise YarnError(f"the RM's scheduler ({method}): {exc}") from None

    def _drop_rm(self) -> None:
        if self._rm is not None:
            self._rm.close()
            self._rm = None

    @staticmethod
    def _remote(method: str, exc: RemoteError) -> RMError:
        text = f"YARN {method}: {exc}"
        if exc.short_class in _WRONG_STATE or "not registered" in (exc.message or ""):
            return WrongState(text)
        if exc.short_class == "InvalidResourceRequestException":
            return InvalidRequest(text)
        return YarnError(text)

    # ---------------------------------------------------------------- nodes
    def _read_nodes(self, force: bool = False) -> dict[str, _Node]:
        now = self.clock()
        if not force and now - self._nodes_read_at < NODES_REFRESH_S and self._nodes:
            return self._nodes
        try:
            raw = self.rest.nodes()
        except RestError as exc:
            raise YarnError(str(exc)) from None
        nodes = {}
        for r in raw:
            node = self._node(r)
            nodes[node.node_id] = node
        self._nodes, self._nodes_read_at = nodes, now
        self._by_host = {n.host: n for n in nodes.values()}
        return nodes

    def _node(self, r: dict) -> _Node:
        node_id, node_host = r["id"], r.get("nodeHostName") or r["id"].rsplit(":", 1)[0]
        spec = self.target.spec_of(node_id, node_host)
        total = _resource(r.get("totalResource") or {}, r.get("usedMemoryMB", 0) + r.get("availMemoryMB", 0),
                          r.get("usedVirtualCores", 0) + r.get("availableVirtualCores", 0))
        used = _resource(r.get("usedResource") or {}, r.get("usedMemoryMB", 0), r.get("usedVirtualCores", 0))
        host = spec.host if spec else node_id
        ports = spec.ports if spec is not None and spec.ports else self.task_ports
        gpus = total[2]
        own_mask, own_ports, own_gpus = 0, PortRanges(), 0
        for held in self._held.values():
            c = held.container
            if c.host == host and not held.state.finished:
                own_mask |= c.resource.gpu_mask
                own_gpus += c.resource.gpus
                own_ports = own_ports.add(c.resource.port_ranges)
        declared = _index_mask(r.get("totalResource") or {})
        if declared:   # YARN says which GPUs are taken (ours among them once granted)
            free_mask = full_mask(gpus) & ~_index_mask(r.get("usedResource") or {}) & ~own_mask
        else:
            free_mask = full_mask(gpus) & ~own_mask
            foreign = max(0, used[2] - own_gpus)
            for g in sorted(indices_of(free_mask), reverse=True)[:foreign]:   # others' GPUs: YARN names none
                free_mask &= ~(1 << g)
        state = {"RUNNING": NodeState.RUNNING, "LOST": NodeState.LOST, "SHUTDOWN": NodeState.LOST,
                 "DECOMMISSIONED": NodeState.LOST}.get(r.get("state", ""), NodeState.UNHEALTHY)
        capacity = ResourceDescriptor(total[0], float(total[1]), gpus, full_mask(gpus), port_ranges=ports)
        free = ResourceDescriptor(max(0, total[0] - used[0]), float(max(0, total[1] - used[1])),
                                  bin(free_mask).count("1"), free_mask, port_ranges=ports.subtract(own_ports))
        yarn_rack = r.get("rack") or "/default-rack"
        report = NodeReport(host, spec.rack if spec else yarn_rack, state, capacity, free,
                            spec.labels if spec else frozenset(), spec.gpu_type if spec and gpus else None,
                            spec.topology if spec else None, containers=int(r.get("numContainers", 0)),
                            health_report=r.get("healthReport") or ("" if state.usable else r.get("state", "")),
                            domains=spec.domains if spec else ())
        return _Node(node_id, host, yarn_rack, report, r, gpus_by_index=bool(declared))

    # ------------------------------------------------------------- client side
    def submit(self, submission: ApplicationSubmission) -> str:
        if self.am_spec is None:
            raise InvalidRequest("submit: this YARN client has no AM command to start (am_spec)")
        spec = self.am_spec(submission)
        try:
            return self.rest.submit(spec)
        except RestError as exc:
            raise YarnError(f"YARN refused the application: {exc}") from None

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        try:
            self.rest.kill(app_id)
        except RestError as exc:
            if exc.status == 404:
                raise NotFound(f"YARN knows no application {app_id}") from None
            raise YarnError(f"kill {app_id}: {exc}") from None

    def application_report(self, app_id: str) -> ApplicationReport:
        try:
            app = self.rest.application(app_id)
        except RestError as exc:
            if exc.status == 404:
                raise NotFound(f"YARN knows no application {app_id}") from None
            raise YarnError(f"application {app_id}: {exc}") from None
        return report_of(app)

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        reports = [n.report for n in self._read_nodes(force=True).values()]
        return [r for r in reports if r.state.usable] if usable_only else reports

    # ---------------------------------------------------------------- AM side
    def register(self, app_id: str) -> RegisterResponse:
        if self.app_id and app_id != self.app_id:
            raise WrongState(f"this AM container is {self.app_id}'s, not {app_id}'s")
        answer = self._rm_call("registerApplicationMaster", yarn.RegisterApplicationMasterRequestProto(
            host="127.0.0.1", rpc_port=-1, tracking_url=self.tracking_url),
            yarn.RegisterApplicationMasterResponseProto)
        self._remember_tokens(answer.nm_tokens_from_previous_attempts)
        m = answer.maximumCapability
        self._maximum = ResourceDescriptor(m.memory, float(m.virtual_cores), _gpus_of(m))
        self._read_nodes(force=True)
        recorded = self._load_records()
        kept = []
        for proto in answer.containers_from_previous_attempts:
            cid = container_id_text(proto.id)
            container = self._container(proto, recorded.get(cid))
            self._held[cid] = _Held(proto, container, ContainerState.RUNNING)
            kept.append(container)
        if kept:   # completions of the previous attempt's containers come with the next response
            self._early.append(self._allocate_call([], [], progress=0.0))
            for response in self._early:
                for status in response.completed_container_statuses:
                    self._ended[container_id_text(status.container_id)] = self._status(status)
        return RegisterResponse(app_id, self.attempt, answer.queue or "default", self._maximum, tuple(kept))

    def _remember_tokens(self, tokens) -> None:
        for t in tokens:
            self._nm_tokens[f"{t.nodeId.host}:{t.nodeId.port}"] = Token.from_proto(t.token)

    def _load_records(self) -> dict[str, dict]:
        if self.state_dir is None:
            return {}
        try:
            return json.loads((self.state_dir / CONTAINERS_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _save_records(self) -> None:
        if self.state_dir is None:
            return
        records = {cid: {"gpu_mask": h.container.resource.gpu_mask, "ports": _ports_text(h.container.resource.port_ranges),
                         "request_id": h.container.request_id}
                   for cid, h in self._held.items() if not h.state.finished}
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / (CONTAINERS_FILE + ".tmp")
        tmp.write_text(json.dumps(records))
        tmp.replace(self.state_dir / CONTAINERS_FILE)

    def _container(self, proto: yarn.ContainerProto, record: dict | None = None, ask: ResourceRequest | None = None
                   ) -> Container:
        node_id = f"{proto.nodeId.host}:{proto.nodeId.port}"
        node = self._nodes.get(node_id)
        host = node.host if node else node_id
        r = proto.resource
        if ask is not None:
            resource, request_id = ask.resource, ask.request_id
        else:
            mask = int((record or {}).get("gpu_mask", 0)) or _proto_index_mask(r)
            gpus = _gpus_of(r)
            if bin(mask).count("1") != gpus:
                mask = full_mask(gpus)
            resource = ResourceDescriptor(r.memory, float(r.virtual_cores), gpus, mask,
                                          port_ranges=PortRanges.parse((record or {}).get("ports") or ""))
            request_id = int((record or {}).get("request_id", proto.allocation_request_id))
        rack = node.report.rack if node else "/default-rack"
        return Container(container_id_text(proto.id), self.app_id, self.attempt, host, rack, resource, request_id,
                         time.time())

    def allocate(self, request: AllocateRequest) -> AllocateResponse:
        if request.attempt != self.attempt:
            raise WrongState(f"AM attempt {request.attempt} of {request.app_id} is not this container's "
                             f"({self.attempt})")
        nodes = self._read_nodes()
        rejected: list[Rejection] = []
        asks: list[yarn.ResourceRequestProto] = []
        for request_id in request.cancel:
            entry = self._asks.pop(request_id, None)
            if entry is not None:
                asks += self._yarn_asks(entry, count=0)
        for ask in request.asks:
            why = self._never_fits(ask)
            if why:
                rejected.append(Rejection(ask.request_id, why))
                continue
            node = self._by_host[ask.host]
            entry = self._asks[ask.request_id] = _Ask(ask, node.node_id, node.yarn_rack, self.clock())
            asks += self._yarn_asks(entry, count=ask.count)
        releases = []
        for cid in request.releases:
            held = self._held.get(cid)
            if held is not None and not held.state.finished:
                releases.append(held.proto.id)
        responses, self._early = self._early, []
        responses.append(self._allocate_call(asks, releases, request.progress))
        allocated, completed, lost_nodes, preempted = [], [], set(), []
        for response in responses:
            preempted += self._newly_preempted(response)
            self._remember_tokens(response.nm_tokens)
            if response.HasField("am_rm_token"):
                self._amrm = Token.from_proto(response.am_rm_token)
            for report in response.updated_nodes:
                if report.node_state in (yarn.NS_LOST, yarn.NS_SHUTDOWN, yarn.NS_DECOMMISSIONED):
                    lost_nodes.add(f"{report.nodeId.host}:{report.nodeId.port}")
            if response.updated_nodes:
                nodes = self._read_nodes(force=True)
            for proto in response.allocated_containers:
                allocated.extend(self._granted(proto))
            for status in response.completed_container_statuses:
                completed.append(self._completed(status, lost_nodes))
        if completed:
            self._save_records()
        pending = [PendingAsk(rid, entry.ask.count, self._pending_reason(entry, nodes))
                   for rid, entry in self._asks.items()]
        limit = responses[-1].limit
        headroom = (limit.memory, limit.virtual_cores * 1000, _gpus_of(limit)) if responses[-1].HasField("limit") else None
        return AllocateResponse(allocated=tuple(allocated), completed=tuple(completed),
                                node_updates=self._node_updates(), rejected=tuple(rejected), pending=tuple(pending),
                                headroom=headroom, response_id=self._response_id,
                                preemption=PreemptionMessage(tuple(preempted), self._preempted[preempted[0]])
                                if preempted else None)

    def _newly_preempted(self, response: yarn.AllocateResponseProto) -> list[str]:
        """The containers YARN's ``preempt`` names that the AM was not told of yet (YARN repeats
        its notice at every heartbeat until it kills them)."""
        if not response.HasField("preempt"):
            return []
        notice = response.preempt
        new = []
        for entry in (*notice.strictContract.container, *notice.contract.container):
            container_id = container_id_text(entry.id)
            if container_id not in self._preempted:
                self._preempted[container_id] = self.clock() + self._preemption_grace()
                new.append(container_id)
        return new

    def notify_preemption(self, container_id: str) -> float:
        """The task's notice file gets the deadline YARN's notice came with, as wall-clock
        time (``inf``: none known); the deadline on the client's clock."""
        deadline = self._preempted.get(container_id)
        path = self._notice_file(container_id)
        if deadline is None or path is None:
            why = "YARN did not preempt it" if deadline is None else "this client keeps no state_dir for its notice"
            raise WrongState(f"container {container_id}: {why}")
        partial = path.with_suffix(".preempt.tmp")
        partial.write_text(repr(time.time() + max(0.0, deadline - self.clock())) + "\n")
        partial.replace(path)
        return deadline

    def _notice_file(self, container_id: str) -> Path | None:
        """Where a task's preemption notice is left: beside its log (None: no state_dir, no logs)."""
        return notice_file(self.state_dir.parent / "tasks", container_id) if self.state_dir is not None else None

    def _preemption_grace(self) -> float:
        """Seconds YARN waits after its notice before it kills (its preemption monitor's
        ``max_wait_before_kill``); ``inf`` where the RM's configuration cannot be read."""
        if self._preemption_grace_s is None:
            try:
                self._preemption_grace_s = float(self.rest.conf(PREEMPTION_WAIT_KEY)) / 1000
            except (RestError, ValueError):
                self._preemption_grace_s = math.inf
        return self._preemption_grace_s

    def _allocate_call(self, asks, releases, progress: float) -> yarn.AllocateResponseProto:
        response = self._rm_call("allocate", yarn.AllocateRequestProto(
            ask=asks, release=releases, response_id=self._response_id, progress=progress), yarn.AllocateResponseProto)
        self._response_id = response.response_id
        if response.HasField("a_m_command"):
            raise WrongState(f"YARN told AM attempt {self.attempt} of {self.app_id} to "
                             f"{'resync' if response.a_m_command == yarn.AM_RESYNC else 'shut down'}")
        return response

    def _yarn_asks(self, entry: _Ask, count: int) -> list[yarn.ResourceRequestProto]:
        """YARN's three requests of "``count`` containers on exactly this node" (as Hadoop's
        AMRMClient builds them): the node (relaxed), its rack and ``*`` (not relaxed)."""
        r = entry.ask.resource
        capability = yarn.ResourceProto(memory=r.memory_mb, virtual_cores=max(1, math.ceil(r.vcores - 1e-9)))
        if r.gpus:
            capability.resource_value_map.add(key=GPU, value=r.gpus)
            node = self._nodes.get(entry.node_id)
            if node is not None and node.gpus_by_index:   # the very GPUs the AM chose
                for g in indices_of(r.gpu_mask):
                    capability.resource_value_map.add(key=f"{GPU_INDEX_PREFIX}{g}", value=1)
        return [yarn.ResourceRequestProto(priority=yarn.PriorityProto(priority=ASK_PRIORITY), resource_name=name,
                                          capability=capability, num_containers=count, relax_locality=relax,
                                          allocation_request_id=entry.ask.request_id)
                for name, relax in ((entry.node_id, True), (entry.yarn_rack, False), ("*", False))]

    def _never_fits(self, ask: ResourceRequest) -> Reason:
        """Why YARN can never grant ``ask`` (none when it may): YARN would leave it pending."""
        r = ask.resource
        if ask.host is None:
            return reason(R.YARN_NO_HOST)
        node = self._by_host.get(ask.host)
        if node is None:
            return reason(R.YARN_UNKNOWN_HOST, host=ask.host, rest=str(self.target.rest))
        if r.gpu_milli:
            return reason(R.YARN_WHOLE_GPUS, milli=r.gpu_milli)
        cap = node.report.capacity
        vcores = max(1, math.ceil(r.vcores - 1e-9))
        max_memory_mb, max_vcores = self._maximum.memory_mb or r.memory_mb, self._maximum.vcores or vcores
        if (r.memory_mb > min(cap.memory_mb, max_memory_mb) or vcores > min(cap.vcores, max_vcores)
                or r.gpus > cap.gpus):
            return reason(R.YARN_OVER_LIMITS, host=ask.host, memory_mb=r.memory_mb, vcores=vcores, gpus=r.gpus,
                          node_memory_mb=cap.memory_mb, node_vcores=cap.vcores, node_gpus=cap.gpus,
                          max_memory_mb=max_memory_mb, max_vcores=max_vcores)
        if r.gpu_mask & ~cap.gpu_mask:
            return reason(R.YARN_GPUS_ABSENT, mask=r.gpu_mask & ~cap.gpu_mask, host=ask.host, has=cap.gpus)
        if r.port_ranges and r.port_ranges.subtract(cap.port_ranges):
            return reason(R.YARN_PORTS_OUTSIDE, ports=str(r.port_ranges), host=ask.host, has=str(cap.port_ranges))
        return NO_REASON

    def _pending_reason(self, entry: _Ask, nodes: dict[str, _Node]) -> Reason:
        node = nodes.get(entry.node_id)
        waited = self.clock() - entry.asked_at
        if node is None:
            return reason(R.YARN_NODE_GONE, waited_s=waited, node=entry.node_id)
        if not node.report.state.usable:
            return reason(R.YARN_NODE_UNUSABLE, waited_s=waited, host=node.host, state=node.report.state.value)
        free = node.report.free
        return reason(R.YARN_NOT_GRANTED, waited_s=waited, host=node.host, memory_mb=free.memory_mb,
                      vcores=free.vcores, gpus=free.gpus)

    def _granted(self, proto: yarn.ContainerProto) -> list[Container]:
        node_id = f"{proto.nodeId.host}:{proto.nodeId.port}"
        entry = self._asks.get(proto.allocation_request_id)
        if entry is not None and entry.node_id != node_id:   # not where asked: given back, the ask stands
            self._rm_release_later(proto)
            return []
        if entry is not None:
            del self._asks[proto.allocation_request_id]
        container = self._container(proto, ask=entry.ask if entry else None)
        self._held[container.container_id] = _Held(proto, container)
        return [container]

    def _rm_release_later(self, proto: yarn.ContainerProto) -> None:
        self._early.append(self._allocate_call([], [proto.id], progress=0.0))

    def _status(self, status: yarn.ContainerStatusProto, lost_nodes: set[str] = frozenset()) -> ContainerStatus:
        cid = container_id_text(status.container_id)
        held = self._held.get(cid)
        host = held.container.host if held else ""
        node_lost = False
        if held is not None:
            node_id = f"{held.proto.nodeId.host}:{held.proto.nodeId.port}"
            node = self._nodes.get(node_id)
            node_lost = node_id in lost_nodes or (node is not None and node.report.state is NodeState.LOST)
        state, code = exit_status(status, node_lost)
        diagnostics = (status.diagnostics or "").strip()
        if code == ExitStatus.NODE_LOST:
            diagnostics = f"node {host or '?'} was lost: {diagnostics}"
        return ContainerStatus(cid, host, state, code, diagnostics[:2000],
                               held.container.request_id if held else 0)

    def _completed(self, status: yarn.ContainerStatusProto, lost_nodes: set[str]) -> ContainerStatus:
        ended = self._status(status, lost_nodes)
        held = self._held.get(ended.container_id)
        if held is not None:
            held.state = ended.state
        self._ended[ended.container_id] = ended
        return ended

    def _node_updates(self) -> tuple[NodeReport, ...]:
        out = []
        for node in self._read_nodes().values():
            report = self._node(node.raw).report   # with this client's containers as they are now
            if self._sent.get(node.host) != report:
                self._sent[node.host] = report
                out.append(report)
        return tuple(out)

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "") -> None:
        status = {"SUCCEEDED": yarn.APP_SUCCEEDED, "FAILED": yarn.APP_FAILED, "KILLED": yarn.APP_KILLED}.get(
            final_status, yarn.APP_UNDEFINED)
        request = yarn.FinishApplicationMasterRequestProto(final_application_status=status,
                                                           diagnostics=diagnostics[:4000])
        for _ in range(50):   # the RM says "unregistered" once it has taken the request in
            answer = self._rm_call("finishApplicationMaster", request, yarn.FinishApplicationMasterResponseProto)
            if answer.isUnregistered:
                return
            time.sleep(0.1)

    # ---------------------------------------------------------- NodeManager side
    def _nm_call(self, node_id: str, method: str, request, response_type):
        token = self._nm_tokens.get(node_id)
        if token is None:
            raise YarnError(f"no NMToken for node {node_id}: YARN gives one with the first container there")
        with self._lock:
            for tries in (1, 2):
                try:
                    nm = self._nms.get(node_id)
                    if nm is None:
                        host, _, port = node_id.rpartition(":")
                        nm = self._nms[node_id] = IpcConnection(host, int(port), token, NM_PROTOCOL)
                    return nm.call(method, request, response_type)
                except RemoteError as exc:
                    raise YarnError(f"NodeManager {node_id} ({method}): {exc}") from None
                except IpcError as exc:
                    stale = self._nms.pop(node_id, None)
                    if stale is not None:
                        stale.close()
                    if tries == 2:
                        raise YarnError(f"NodeManager {node_id} ({method}): {exc}") from None

    def start_containers(self, request: StartContainers) -> StartRefused | None:
        index = 0
        launches = list(request.containers)
        while index < len(launches):
            held = self._held.get(launches[index].container_id)
            if held is None:
                return StartRefused(index, launches[index].container_id,
                                    NotFound(f"unknown container {launches[index].container_id!r}"))
            node_id = f"{held.proto.nodeId.host}:{held.proto.nodeId.port}"
            batch = [index]   # the containers that follow on the same node go in one call
            while (batch[-1] + 1 < len(launches) and (h := self._held.get(launches[batch[-1] + 1].container_id))
                   is not None and f"{h.proto.nodeId.host}:{h.proto.nodeId.port}" == node_id):
                batch.append(batch[-1] + 1)
            refused = self._start_batch(node_id, [(i, launches[i].container_id,
                                                   launches[i].launch.over(request.shared)) for i in batch])
            if refused is not None:
                return refused
            index = batch[-1] + 1
        self._save_records()
        return None

    def _start_batch(self, node_id: str, batch: list[tuple[int, str, LaunchContext]]) -> StartRefused | None:
        requests = []
        for index, cid, launch in batch:
            held = self._held[cid]
            if held.state is not ContainerState.ALLOCATED:
                return StartRefused(index, cid, WrongState(f"container {cid} is {held.state.value}; only an "
                                                           f"ALLOCATED container can be started"))
            if not launch.command:
                return StartRefused(index, cid, InvalidRequest(f"container {cid}: no command"))
            requests.append(yarn.StartContainerRequestProto(container_launch_context=self._launch(held, launch),
                                                            container_token=held.proto.container_token))
        try:
            answer = self._nm_call(node_id, "startContainers", yarn.StartContainersRequestProto(
                start_container_request=requests), yarn.StartContainersResponseProto)
        except RMError as exc:
            return StartRefused(batch[0][0], batch[0][1], exc)
        failed = {container_id_text(f.container_id): f.exception for f in answer.failed_requests}
        for index, cid, _launch in batch:
            if cid in failed:
                e = failed[cid]
                return StartRefused(index, cid, YarnError(f"NodeManager {node_id} refused to start {cid}: "
                                                          f"{e.class_name.rsplit('.', 1)[-1]}: {e.message}"))
            self._held[cid].state = ContainerState.RUNNING
        return None

    def _launch(self, held: _Held, launch: LaunchContext) -> yarn.ContainerLaunchContextProto:
        """The container's launch: gangmaster's placement variables (what the simulator's
        NodeManager sets), the AM's, and a command run from the AM's folder, its output
        appended to ``tasks/<container>.log`` beside the AM's journal where the AM keeps one."""
        c = held.container
        gpus = ",".join(str(g) for g in indices_of(c.resource.gpu_mask))
        ports = ",".join(str(p) for p in c.resource.port_ranges)
        address = held.proto.nodeId.host
        address = "127.0.0.1" if address == "localhost" else address
        cwd = os.getcwd()
        env = {"PAI_CONTAINER_HOST_PORT_LIST": ports, "PAI_CURRENT_CONTAINER_PORT": ports.split(",")[0],
               **launch.env_dict,
               "GANGMASTER_HOST": c.host, "GANGMASTER_RACK": c.rack, "GANGMASTER_APP_ID": c.app_id,
               "GANGMASTER_CONTAINER_ID": c.container_id, "GANGMASTER_PORTS": ports, "GANGMASTER_GPU_INDICES": gpus,
               "CUDA_VISIBLE_DEVICES": gpus, "PAI_CONTAINER_ID": c.container_id, "PAI_CONTAINER_HOST_NAME": c.host,
               "PAI_CONTAINER_HOST_IP": address, "PAI_CURRENT_CONTAINER_IP": address, "PAI_WORK_DIR": cwd}
        if self.state_dir is not None:
            logs = self.state_dir.parent / "tasks"
            logs.mkdir(parents=True, exist_ok=True)
            env[ENV_PREEMPTION_NOTICE] = str(notice_file(logs, c.container_id))
            output = f"1>>{shlex.quote(str(logs / (c.container_id + '.log')))} 2>&1"
        else:
            output = "1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"
        command = f"cd {shlex.quote(cwd)} && exec {shlex.join(launch.command)} {output}"
        return yarn.ContainerLaunchContextProto(command=[command], environment=launch_env(env))

    def stop_container(self, container_id: str) -> None:
        held = self._held.get(container_id)
        if held is None:
            raise NotFound(f"unknown container {container_id!r}")
        if held.state.finished:
            return
        if held.state is ContainerState.ALLOCATED:   # never started: given back to YARN
            self._early.append(self._allocate_call([], [held.proto.id], progress=0.0))
            return
        node_id = f"{held.proto.nodeId.host}:{held.proto.nodeId.port}"
        answer = self._nm_call(node_id, "stopContainers", yarn.StopContainersRequestProto(
            container_id=[held.proto.id]), yarn.StopContainersResponseProto)
        for f in answer.failed_requests:
            raise YarnError(f"NodeManager {node_id} did not stop {container_id}: {f.exception.message}")

    def container_status(self, container_id: str) -> ContainerStatus:
        if container_id in self._ended:
            return self._ended[container_id]
        held = self._held.get(container_id)
        if held is not None and held.state is ContainerState.RUNNING:
            return ContainerStatus(container_id, held.container.host, ContainerState.RUNNING,
                                   request_id=held.container.request_id)
        try:
            proto_id = container_id_proto(container_id)
        except BadYarnId as exc:
            raise NotFound(str(exc)) from None
        for node_id in list(self._nm_tokens):   # an earlier attempt's container: ask the NodeManagers we may
            try:
                answer = self._nm_call(node_id, "getContainerStatuses", yarn.GetContainerStatusesRequestProto(
                    container_id=[proto_id]), yarn.GetContainerStatusesResponseProto)
            except RMError:
                continue
            for status in answer.status:
                if status.state != yarn.C_COMPLETE:
                    node = self._nodes.get(node_id)
                    return ContainerStatus(container_id, node.host if node else node_id, ContainerState.RUNNING)
                return self._status(status)
        raise NotFound(f"YARN no longer knows container {container_id}")

    def close(self) -> None:
        with self._lock:
            self._drop_rm()
            for nm in self._nms.values():
                nm.close()
            self._nms.clear()


def _ports_text(ports: PortRanges) -> str:
    """``ports`` as :meth:`PortRanges.parse` reads them back ("" for none)."""
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ports.ranges)


# ------------------------------------------------------------------- REST answers
def _gpus_of(resource: yarn.ResourceProto) -> int:
    return next((int(r.value) for r in resource.resource_value_map if r.key == GPU), 0)


def _index_mask(d: dict) -> int:
    """The GPUs a REST resource holds by index (``gangmaster.io/gpu-<i>`` of value 1 or more)."""
    infos = ((d.get("resourceInformations") or {}).get("resourceInformation")) or []
    return sum(1 << int(i["name"][len(GPU_INDEX_PREFIX):]) for i in infos
               if str(i.get("name", "")).startswith(GPU_INDEX_PREFIX) and i["name"][len(GPU_INDEX_PREFIX):].isdigit()
               and int(i.get("value", 0)) > 0)


def _proto_index_mask(resource: yarn.ResourceProto) -> int:
    """The GPUs a container's resource names by index (none where the cluster declares no index)."""
    return sum(1 << int(r.key[len(GPU_INDEX_PREFIX):]) for r in resource.resource_value_map
               if r.key.startswith(GPU_INDEX_PREFIX) and r.key[len(GPU_INDEX_PREFIX):].isdigit() and r.value > 0)


def _resource(d: dict, memory: int, vcores: int) -> tuple[int, int, int]:
    """(memory MB, vcores, GPUs) of a REST resource (``totalResource``, ``usedResource``)."""
    infos = ((d.get("resourceInformations") or {}).get("resourceInformation")) or []
    gpus = next((int(i.get("value", 0)) for i in infos if i.get("name") == GPU), 0)
    return int(d.get("memory", memory)), int(d.get("vCores", vcores)), gpus


_APP_STATES = {"NEW": AppState.ACCEPTED, "NEW_SAVING": AppState.ACCEPTED, "SUBMITTED": AppState.ACCEPTED,
               "ACCEPTED": AppState.ACCEPTED, "RUNNING": AppState.RUNNING, "FINISHED": AppState.FINISHED,
               "FAILED": AppState.FAILED, "KILLED": AppState.KILLED}


def report_of(app: dict) -> ApplicationReport:
    """An application report of the RM's REST API (``/apps/{id}``) as gangmaster's."""
    state = _APP_STATES.get(app.get("state", ""), AppState.ACCEPTED)
    finished = (app.get("finishedTime") or 0) / 1000.0 or None
    used = ResourceDescriptor(max(0, int(app.get("allocatedMB", 0) or 0)),
                              float(max(0, int(app.get("allocatedVCores", 0) or 0))))
    final = app.get("finalStatus", "")
    return ApplicationReport(app.get("id", ""), app.get("name", ""), app.get("queue", ""), state,
                             _attempt_number(app),
                             (app.get("startedTime") or 0) / 1000.0, finished if state.finished else None,
                             "" if final == "UNDEFINED" else final, (app.get("diagnostics") or "").strip(),
                             max(0, int(app.get("runningContainers", 0) or 0)), 0, used)


def _attempt_number(app: dict) -> int:
    """The current attempt: its AM container's (``amContainerLogs`` names it), else 1."""
    from .ids import attempt_of

    match = re.search(r"container_[e\d_]+", app.get("amContainerLogs", "") or "")
    try:
        return attempt_of(match[0].rstrip("_"))[1] if match else 1
    except BadYarnId:
        return 1
