"""Converting the RM protocol dataclasses to protobuf messages and back.

Used by the gRPC client (AM side) and the gRPC server (``gangmaster rm serve``).
Decoding rebuilds :class:`ResourceDescriptor` values, so a negative or
inconsistent resource arriving over the wire fails the same way it would in
process, as an ``InvalidRequest`` that names the field. A request's repeated
fields are bounded (``conf/limits.py``) before they are decoded, so a message
of a million asks costs a length check, not a million objects; everything else
about a request is checked by the core (:mod:`gangmaster.protocol.rm_validation`),
for both clients alike.
"""
from __future__ import annotations

import math

from gangmaster.conf import limits
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.ports import PortError, PortRanges
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError

from .proto import rm_pb2 as pb
from .reasons import CAUSED, TYPES, Reason, ReasonCode, other, render
from .rm_validation import check_count, check_int, check_name, check_number, check_text
from .rm_protocol import (
    ERROR_CLASSES, RESERVATION_KNOWN, AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission,
    AppState, Container, ContainerLaunch, ContainerState, ContainerStatus, GangRole, HeldReservation, InvalidRequest,
    LaunchContext, NodeReport, NodeState, PendingAsk, PreemptionMessage, RegisterResponse, Rejection, ReservedNode,
    ResourceRequest, RMError, StartContainers, StartRefused,
)


# ------------------------------------------------------------------ resources
def resource_to_pb(r: ResourceDescriptor, msg: pb.Resource | None = None) -> pb.Resource:
    msg = msg if msg is not None else pb.Resource()
    msg.memory_mb, msg.vcores, msg.gpus, msg.gpu_mask, msg.ports = r.memory_mb, r.vcores, r.gpus, r.gpu_mask, r.ports
    msg.gpu_milli = r.gpu_milli
    for begin, end in r.port_ranges.ranges:
        msg.port_ranges.add(begin=begin, end=end)
    return msg


def resource_from_pb(msg: pb.Resource, where: str = "resource") -> ResourceDescriptor:
    check_count(msg.port_ranges, f"{where}.port_ranges", limits.RM_MAX_PORT_RANGES, "RM_MAX_PORT_RANGES")
    try:
        ranges = PortRanges.of(*[(p.begin, p.end) for p in msg.port_ranges]) if msg.port_ranges else PortRanges()
        return ResourceDescriptor(msg.memory_mb, msg.vcores, msg.gpus, msg.gpu_mask, msg.ports, ranges, msg.gpu_milli)
    except (ResourceError, PortError) as exc:
        raise InvalidRequest(f"{where}: {exc}") from None


# ------------------------------------------------------------------ requests
def ask_to_pb(a: ResourceRequest, msg: pb.ResourceRequest) -> None:
    msg.request_id, msg.count, msg.relax_locality, msg.priority = a.request_id, a.count, a.relax_locality, a.priority
    msg.host, msg.rack, msg.node_label = a.host or "", a.rack or "", a.node_label or ""
    resource_to_pb(a.resource, msg.resource)


def ask_from_pb(msg: pb.ResourceRequest, where: str) -> ResourceRequest:
    return ResourceRequest(msg.request_id, resource_from_pb(msg.resource, f"{where}.resource"), msg.count,
                           msg.host or None, msg.rack or None, msg.relax_locality, msg.node_label or None,
                           msg.priority)


def allocate_request_to_pb(r: AllocateRequest) -> pb.AllocateRequest:
    msg = pb.AllocateRequest(app_id=r.app_id, attempt=r.attempt, cancel=list(r.cancel), releases=list(r.releases),
                             blacklist_additions=list(r.blacklist_additions),
                             blacklist_removals=list(r.blacklist_removals), progress=r.progress)
    for a in r.asks:
        ask_to_pb(a, msg.asks.add())
    return msg


def allocate_request_from_pb(msg: pb.AllocateRequest) -> AllocateRequest:
    check_count(msg.asks, "asks", limits.RM_MAX_ASKS_PER_CALL, "RM_MAX_ASKS_PER_CALL")
    for key in ("cancel", "releases", "blacklist_additions", "blacklist_removals"):
        check_count(getattr(msg, key), key, limits.RM_MAX_IDS_PER_CALL, "RM_MAX_IDS_PER_CALL")
    return AllocateRequest(msg.app_id, msg.attempt, tuple(ask_from_pb(a, f"asks[{k}]") for k, a in enumerate(msg.asks)),
                           tuple(msg.cancel), tuple(msg.releases), tuple(msg.blacklist_additions),
                           tuple(msg.blacklist_removals), msg.progress)


def submission_to_pb(s: ApplicationSubmission) -> pb.SubmitRequest:
    msg = pb.SubmitRequest(name=s.name, queue=s.queue, max_attempts=s.max_attempts,
                           keep_containers_across_attempts=s.keep_containers_across_attempts,
                           am_expiry_s=s.am_expiry_s or 0.0, priority=s.priority,
                           has_expected_duration=s.expected_duration_s is not None,
                           expected_duration_s=s.expected_duration_s or 0.0)
    for role in s.gang:
        msg.gang.add(name=role.name, instances=role.instances, gpus=role.gpus, gpu_milli=role.gpu_milli,
                     vcores=role.vcores, memory_mb=role.memory_mb,
                     max_instances_per_node=role.max_instances_per_node or 0)
    return msg


def submission_from_pb(msg: pb.SubmitRequest) -> ApplicationSubmission:
    # proto3 has no "unset": 0 attempts means the default (2), like an empty queue means "default".
    check_count(msg.gang, "gang", limits.MAX_INSTANCES_PER_JOB, "MAX_INSTANCES_PER_JOB")
    gang = tuple([GangRole(r.name, r.instances, r.gpus, r.gpu_milli, r.vcores, r.memory_mb,
                           r.max_instances_per_node or None) for r in msg.gang])
    return ApplicationSubmission(msg.name, msg.queue or "default", msg.max_attempts or 2,
                                 msg.keep_containers_across_attempts, msg.am_expiry_s or None, msg.priority, gang,
                                 msg.expected_duration_s if msg.has_expected_duration else None)


def launch_to_pb(c: LaunchContext) -> pb.LaunchContext:
    return pb.LaunchContext(command=list(c.command), env=[pb.EnvVar(name=k, value=v) for k, v in c.env])


def launch_from_pb(msg: pb.LaunchContext, where: str = "launch") -> LaunchContext:
    check_count(msg.command, f"{where}.command", limits.RM_MAX_COMMAND_ARGS, "RM_MAX_COMMAND_ARGS")
    check_count(msg.env, f"{where}.env", limits.RM_MAX_ENV_VARS, "RM_MAX_ENV_VARS")
    return LaunchContext(tuple(msg.command), tuple(sorted((e.name, e.value) for e in msg.env)))


def start_containers_to_pb(r: StartContainers) -> pb.StartContainersRequest:
    return pb.StartContainersRequest(
        shared=launch_to_pb(r.shared),
        containers=[pb.StartContainerRequest(container_id=c.container_id, launch=launch_to_pb(c.launch))
                    for c in r.containers])


def start_containers_from_pb(msg: pb.StartContainersRequest) -> StartContainers:
    check_count(msg.containers, "containers", limits.RM_MAX_CONTAINERS_PER_APP, "RM_MAX_CONTAINERS_PER_APP")
    return StartContainers(
        tuple(ContainerLaunch(c.container_id, launch_from_pb(c.launch, f"containers[{k}].launch"))
              for k, c in enumerate(msg.containers)),
        launch_from_pb(msg.shared, "shared"))


def start_refused_to_pb(refused: StartRefused | None) -> pb.StartContainersResponse:
    if refused is None:
        return pb.StartContainersResponse()
    return pb.StartContainersResponse(refused=True, index=refused.index, container_id=refused.container_id,
                                      error_code=refused.error.code, error_message=refused.error.message)


def start_refused_from_pb(msg: pb.StartContainersResponse) -> StartRefused | None:
    if not msg.refused:
        return None
    error = ERROR_CLASSES.get(msg.error_code, RMError)(msg.error_message)
    return StartRefused(msg.index, msg.container_id, error)


# ------------------------------------------------------------------ responses
def container_to_pb(c: Container, msg: pb.Container) -> None:
    msg.container_id, msg.app_id, msg.attempt, msg.host, msg.rack = c.container_id, c.app_id, c.attempt, c.host, c.rack
    msg.request_id, msg.allocated_at = c.request_id, c.allocated_at
    resource_to_pb(c.resource, msg.resource)


def container_from_pb(msg: pb.Container) -> Container:
    return Container(msg.container_id, msg.app_id, msg.attempt, msg.host, msg.rack, resource_from_pb(msg.resource),
                     msg.request_id, msg.allocated_at)


def status_to_pb(s: ContainerStatus, msg: pb.ContainerStatus) -> None:
    msg.container_id, msg.host, msg.state, msg.diagnostics, msg.request_id = (
        s.container_id, s.host, s.state.value, s.diagnostics, s.request_id)
    msg.has_exit_status = s.exit_status is not None
    msg.exit_status = s.exit_status or 0


def status_from_pb(msg: pb.ContainerStatus) -> ContainerStatus:
    return ContainerStatus(msg.container_id, msg.host, ContainerState(msg.state),
                           msg.exit_status if msg.has_exit_status else None, msg.diagnostics, msg.request_id)


def node_to_pb(n: NodeReport, msg: pb.NodeReport) -> None:
    msg.host, msg.rack, msg.state = n.host, n.rack, n.state.value
    msg.gpu_type, msg.topology, msg.containers, msg.health_report = (
        n.gpu_type or "", n.topology or "", n.containers, n.health_report)
    msg.labels.extend(sorted(n.labels))
    resource_to_pb(n.capacity, msg.capacity)
    resource_to_pb(n.free, msg.free)
    if n.gpu_milli_free is not None:
        msg.gpu_milli_free.extend(n.gpu_milli_free)
    if n.domains:
        msg.domains.extend(f"{level}={name}" for level, name in n.domains)


def node_from_pb(msg: pb.NodeReport) -> NodeReport:
    return NodeReport(msg.host, msg.rack, NodeState(msg.state), resource_from_pb(msg.capacity),
                      resource_from_pb(msg.free), frozenset(msg.labels), msg.gpu_type or None, msg.topology or None,
                      msg.containers, msg.health_report, _milli_free_from_pb(msg), _domains_from_pb(msg))


def _milli_free_from_pb(msg: pb.NodeReport) -> tuple[int, ...] | None:
    """A node report's per-GPU milli free: None when sent empty (no shares on the node)."""
    if not msg.gpu_milli_free:
        return None
    check_count(msg.gpu_milli_free, "gpu_milli_free", limits.MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
    milli = tuple(msg.gpu_milli_free)
    if not all(0 <= m <= GPU_MILLI for m in milli):
        raise InvalidRequest(f"gpu_milli_free: expected milli-GPU within 0..{GPU_MILLI} per GPU, got {list(milli)}")
    return milli


def _domains_from_pb(msg: pb.NodeReport) -> tuple[tuple[str, str], ...]:
    """A node report's network domains, each sent as ``level=name``."""
    check_count(msg.domains, "domains", limits.MAX_DOMAIN_LEVELS, "MAX_DOMAIN_LEVELS")
    domains = []
    for entry in msg.domains:
        level, _, name = entry.partition("=")
        if not level or not name:
            raise InvalidRequest(f"domains: expected level=name entries, got {entry!r}")
        domains.append((level, name))
    return tuple(domains)


def allocate_response_to_pb(r: AllocateResponse) -> pb.AllocateResponse:
    msg = pb.AllocateResponse(response_id=r.response_id)
    for c in r.allocated:
        container_to_pb(c, msg.allocated.add())
    for s in r.completed:
        status_to_pb(s, msg.completed.add())
    for n in r.node_updates:
        node_to_pb(n, msg.node_updates.add())
    for j in r.rejected:
        reason_to_pb(j.reason, msg.rejected.add(request_id=j.request_id))
    for p in r.pending:
        reason_to_pb(p.reason, msg.pending.add(request_id=p.request_id, remaining=p.remaining))
    resource_to_pb(r.headroom, msg.headroom)
    if r.preemption is not None:
        msg.preemption.containers.extend(r.preemption.containers)
        msg.preemption.deadline = r.preemption.deadline
        reason_to_pb(r.preemption.reason, msg.preemption)
    for node in r.reserved:
        msg.reserved.add(host=node.host, start=node.start_s)
    held = r.reservation
    if held is not None:
        msg.reservation.start_in = held.start_in_s
        msg.reservation.has_duration = held.duration_s is not None
        msg.reservation.duration = held.duration_s or 0.0
        for host, gpus in held.gpus_by_host:
            msg.reservation.hosts.add(host=host, gpus=gpus)
        msg.reservation.waits_for.extend(held.waits_for)
        msg.reservation.known = held.known
    return msg


def allocate_response_from_pb(msg: pb.AllocateResponse) -> AllocateResponse:
    return AllocateResponse(
        tuple(container_from_pb(c) for c in msg.allocated), tuple(status_from_pb(s) for s in msg.completed),
        tuple(node_from_pb(n) for n in msg.node_updates),
        tuple(Rejection(j.request_id, reason_from_pb(j, f"rejected[{k}]")) for k, j in enumerate(msg.rejected)),
        tuple(PendingAsk(p.request_id, p.remaining, reason_from_pb(p, f"pending[{k}]"))
              for k, p in enumerate(msg.pending)),
        resource_from_pb(msg.headroom), msg.response_id,
        _preemption_from_pb(msg.preemption) if msg.HasField("preemption") else None,
        _reserved_from_pb(msg.reserved) if msg.reserved else (),
        _reservation_from_pb(msg.reservation) if msg.HasField("reservation") else None)


def _reserved_from_pb(nodes) -> tuple[ReservedNode, ...]:
    """The nodes reserved for other gangs, checked as a request's would be: bounded, named, each
    a start time."""
    check_count(nodes, "reserved", limits.MAX_CLUSTER_NODES, "MAX_CLUSTER_NODES")
    for k, node in enumerate(nodes):
        check_name(node.host, f"reserved[{k}].host")
        check_number(node.start, f"reserved[{k}].start", 0, math.inf)
    return tuple([ReservedNode(node.host, node.start) for node in nodes])


def _reservation_from_pb(msg: pb.HeldReservation) -> HeldReservation:
    """The reservation held for the application's gang, checked as a request would be: times
    finite, hosts and applications bounded and named, GPUs counted, how sure one of three."""
    check_number(msg.start_in, "reservation.start_in", 0, limits.MAX_DURATION_S, limit_name="MAX_DURATION_S")
    if msg.has_duration:
        check_number(msg.duration, "reservation.duration", 0, limits.MAX_DURATION_S, limit_name="MAX_DURATION_S")
    check_count(msg.hosts, "reservation.hosts", limits.MAX_CLUSTER_NODES, "MAX_CLUSTER_NODES")
    for k, held in enumerate(msg.hosts):
        check_name(held.host, f"reservation.hosts[{k}].host")
        check_int(held.gpus, f"reservation.hosts[{k}].gpus", 1, limits.MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
    check_count(msg.waits_for, "reservation.waits_for", limits.RM_MAX_RUNNING_APPS, "RM_MAX_RUNNING_APPS")
    for k, name in enumerate(msg.waits_for):
        check_name(name, f"reservation.waits_for[{k}]")
    if msg.known not in RESERVATION_KNOWN:
        raise InvalidRequest(f"reservation.known: expected one of {', '.join(RESERVATION_KNOWN)}, got {msg.known!r}")
    return HeldReservation(msg.start_in, msg.duration if msg.has_duration else None,
                           tuple([(held.host, held.gpus) for held in msg.hosts]), tuple(msg.waits_for), msg.known)


def _preemption_from_pb(msg: pb.PreemptionMessage) -> PreemptionMessage:
    """A preemption notice, checked as a request would be: the containers bounded and
    named, the deadline a time (a notice naming no container preempts nothing: refused)."""
    check_count(msg.containers, "preemption.containers", limits.RM_MAX_CONTAINERS_PER_APP,
                "RM_MAX_CONTAINERS_PER_APP")
    if not msg.containers:
        raise InvalidRequest("preemption.containers: expected at least one container, got none")
    for k, container_id in enumerate(msg.containers):
        check_name(container_id, f"preemption.containers[{k}]")
    check_number(msg.deadline, "preemption.deadline", 0, math.inf)
    return PreemptionMessage(tuple(msg.containers), msg.deadline, reason_from_pb(msg, "preemption"))


def reason_to_pb(reason: Reason, msg: pb.Rejection | pb.PendingAsk | pb.PreemptionMessage) -> None:
    """``reason`` into a message's ``why`` (its code and parameters as text) and, rendered,
    its ``reason`` (what a peer that predates the codes reads). Text alone is refused: a
    reason is worded only by the catalogue."""
    if type(reason) is not Reason:
        raise TypeError(f"a reason crosses the wire as a Reason (protocol/reasons.py), got {type(reason).__name__}")
    msg.reason = render(reason)
    if reason:
        _why_to_pb(reason, msg.why)


def _why_to_pb(reason: Reason, why: pb.Reason) -> None:
    why.code = reason.code
    why.args.extend([str(a) for a in reason.args])
    if reason.cause is not None:
        _why_to_pb(reason.cause, why.cause)


def reason_from_pb(msg: pb.Rejection | pb.PendingAsk | pb.PreemptionMessage, field_name: str) -> Reason:
    """The reason of a message: its ``why`` when given with a code this side knows, each
    parameter read as the catalogue's type; else (an old peer, or a newer one's new code)
    its text as the code OTHER."""
    check_text(msg.reason, f"{field_name}.reason")
    if not msg.HasField("why") or not _known(msg.why):
        return other(msg.reason)
    return _why_from_pb(msg.why, f"{field_name}.why")


def _known(why: pb.Reason) -> bool:
    """Whether this side knows ``why``'s code and, down the chain, each cause's."""
    return why.code in TYPES and (not why.HasField("cause") or _known(why.cause))


def _why_from_pb(why: pb.Reason, field_name: str) -> Reason:
    code = ReasonCode(why.code)
    types = TYPES[code]
    if len(why.args) != len(types):
        raise InvalidRequest(f"{field_name}.args: expected {len(types)} parameter(s) for {code.name}, "
                             f"got {len(why.args)}")
    args = []
    for k, (text, kind) in enumerate(zip(why.args, types)):
        check_text(text, f"{field_name}.args[{k}]")
        try:
            args.append(kind(text))
        except ValueError:
            raise InvalidRequest(f"{field_name}.args[{k}]: expected {kind.__name__}, got {text!r}") from None
    if why.HasField("cause") != (code in CAUSED):
        raise InvalidRequest(f"{field_name}.cause: expected {'the reason' if code in CAUSED else 'none'} within "
                             f"{code.name}, got {'one' if why.HasField('cause') else 'none'}")
    return Reason(code, tuple(args), _why_from_pb(why.cause, f"{field_name}.cause") if code in CAUSED else None)


def register_to_pb(r: RegisterResponse) -> pb.RegisterResponse:
    msg = pb.RegisterResponse(app_id=r.app_id, attempt=r.attempt, queue=r.queue)
    resource_to_pb(r.maximum_resource, msg.maximum_resource)
    for c in r.containers_from_previous_attempts:
        container_to_pb(c, msg.containers_from_previous_attempts.add())
    if r.queue_limit is not None:
        msg.has_queue_limit = True
        resource_to_pb(r.queue_limit, msg.queue_limit)
    return msg


def register_from_pb(msg: pb.RegisterResponse) -> RegisterResponse:
    return RegisterResponse(msg.app_id, msg.attempt, msg.queue, resource_from_pb(msg.maximum_resource),
                            tuple(container_from_pb(c) for c in msg.containers_from_previous_attempts),
                            resource_from_pb(msg.queue_limit) if msg.has_queue_limit else None)


def report_to_pb(r: ApplicationReport) -> pb.ApplicationReport:
    msg = pb.ApplicationReport(app_id=r.app_id, name=r.name, queue=r.queue, state=r.state.value, attempt=r.attempt,
                               submitted_at=r.submitted_at, has_finished_at=r.finished_at is not None,
                               finished_at=r.finished_at or 0.0, final_status=r.final_status,
                               diagnostics=r.diagnostics, running_containers=r.running_containers,
                               pending_containers=r.pending_containers, gpu_milli_used=r.gpu_milli_used,
                               stopping_containers=r.stopping_containers)
    resource_to_pb(r.used, msg.used)
    return msg


def report_from_pb(msg: pb.ApplicationReport) -> ApplicationReport:
    return ApplicationReport(msg.app_id, msg.name, msg.queue, AppState(msg.state), msg.attempt, msg.submitted_at,
                             msg.finished_at if msg.has_finished_at else None, msg.final_status, msg.diagnostics,
                             msg.running_containers, msg.pending_containers, resource_from_pb(msg.used),
                             msg.gpu_milli_used, msg.stopping_containers)
