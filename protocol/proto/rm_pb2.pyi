from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PortRange(_message.Message):
    __slots__ = ("begin", "end")
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    begin: int
    end: int
    def __init__(self, begin: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("memory_mb", "vcores", "gpus", "gpu_mask", "ports", "port_ranges", "gpu_milli")
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    VCORES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MASK_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    PORT_RANGES_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    memory_mb: int
    vcores: float
    gpus: int
    gpu_mask: int
    ports: int
    port_ranges: _containers.RepeatedCompositeFieldContainer[PortRange]
    gpu_milli: int
    def __init__(self, memory_mb: _Optional[int] = ..., vcores: _Optional[float] = ..., gpus: _Optional[int] = ..., gpu_mask: _Optional[int] = ..., ports: _Optional[int] = ..., port_ranges: _Optional[_Iterable[_Union[PortRange, _Mapping]]] = ..., gpu_milli: _Optional[int] = ...) -> None: ...

class ResourceRequest(_message.Message):
    __slots__ = ("request_id", "resource", "count", "host", "rack", "relax_locality", "node_label", "priority")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    RELAX_LOCALITY_FIELD_NUMBER: _ClassVar[int]
    NODE_LABEL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    resource: Resource
    count: int
    host: str
    rack: str
    relax_locality: bool
    node_label: str
    priority: int
    def __init__(self, request_id: _Optional[int] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., count: _Optional[int] = ..., host: _Optional[str] = ..., rack: _Optional[str] = ..., relax_locality: _Optional[bool] = ..., node_label: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("container_id", "app_id", "attempt", "host", "rack", "resource", "request_id", "allocated_at")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_AT_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    app_id: str
    attempt: int
    host: str
    rack: str
    resource: Resource
    request_id: int
    allocated_at: float
    def __init__(self, container_id: _Optional[str] = ..., app_id: _Optional[str] = ..., attempt: _Optional[int] = ..., host: _Optional[str] = ..., rack: _Optional[str] = ..., resource: _Optional[_Union[Resource, _Mapping]] = ..., request_id: _Optional[int] = ..., allocated_at: _Optional[float] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("container_id", "host", "state", "has_exit_status", "exit_status", "diagnostics", "request_id")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HAS_EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    host: str
    state: str
    has_exit_status: bool
    exit_status: int
    diagnostics: str
    request_id: int
    def __init__(self, container_id: _Optional[str] = ..., host: _Optional[str] = ..., state: _Optional[str] = ..., has_exit_status: _Optional[bool] = ..., exit_status: _Optional[int] = ..., diagnostics: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class NodeReport(_message.Message):
    __slots__ = ("host", "rack", "state", "capacity", "free", "labels", "gpu_type", "topology", "containers", "health_report", "gpu_milli_free", "domains")
    HOST_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REPORT_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FREE_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    host: str
    rack: str
    state: str
    capacity: Resource
    free: Resource
    labels: _containers.RepeatedScalarFieldContainer[str]
    gpu_type: str
    topology: str
    containers: int
    health_report: str
    gpu_milli_free: _containers.RepeatedScalarFieldContainer[int]
    domains: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host: _Optional[str] = ..., rack: _Optional[str] = ..., state: _Optional[str] = ..., capacity: _Optional[_Union[Resource, _Mapping]] = ..., free: _Optional[_Union[Resource, _Mapping]] = ..., labels: _Optional[_Iterable[str]] = ..., gpu_type: _Optional[str] = ..., topology: _Optional[str] = ..., containers: _Optional[int] = ..., health_report: _Optional[str] = ..., gpu_milli_free: _Optional[_Iterable[int]] = ..., domains: _Optional[_Iterable[str]] = ...) -> None: ...

class AllocateRequest(_message.Message):
    __slots__ = ("app_id", "attempt", "asks", "cancel", "releases", "blacklist_additions", "blacklist_removals", "progress")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ASKS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    BLACKLIST_ADDITIONS_FIELD_NUMBER: _ClassVar[int]
    BLACKLIST_REMOVALS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    attempt: int
    asks: _containers.RepeatedCompositeFieldContainer[ResourceRequest]
    cancel: _containers.RepeatedScalarFieldContainer[int]
    releases: _containers.RepeatedScalarFieldContainer[str]
    blacklist_additions: _containers.RepeatedScalarFieldContainer[str]
    blacklist_removals: _containers.RepeatedScalarFieldContainer[str]
    progress: float
    def __init__(self, app_id: _Optional[str] = ..., attempt: _Optional[int] = ..., asks: _Optional[_Iterable[_Union[ResourceRequest, _Mapping]]] = ..., cancel: _Optional[_Iterable[int]] = ..., releases: _Optional[_Iterable[str]] = ..., blacklist_additions: _Optional[_Iterable[str]] = ..., blacklist_removals: _Optional[_Iterable[str]] = ..., progress: _Optional[float] = ...) -> None: ...

class Reason(_message.Message):
    __slots__ = ("code", "args", "cause")
    CODE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    code: int
    args: _containers.RepeatedScalarFieldContainer[str]
    cause: Reason
    def __init__(self, code: _Optional[int] = ..., args: _Optional[_Iterable[str]] = ..., cause: _Optional[_Union[Reason, _Mapping]] = ...) -> None: ...

class Rejection(_message.Message):
    __slots__ = ("request_id", "reason", "why")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    reason: str
    why: Reason
    def __init__(self, request_id: _Optional[int] = ..., reason: _Optional[str] = ..., why: _Optional[_Union[Reason, _Mapping]] = ...) -> None: ...

class PendingAsk(_message.Message):
    __slots__ = ("request_id", "remaining", "reason", "why")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    remaining: int
    reason: str
    why: Reason
    def __init__(self, request_id: _Optional[int] = ..., remaining: _Optional[int] = ..., reason: _Optional[str] = ..., why: _Optional[_Union[Reason, _Mapping]] = ...) -> None: ...

class AllocateResponse(_message.Message):
    __slots__ = ("allocated", "completed", "node_updates", "rejected", "pending", "headroom", "response_id", "preemption", "reserved", "reservation")
    ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    NODE_UPDATES_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    allocated: _containers.RepeatedCompositeFieldContainer[Container]
    completed: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    node_updates: _containers.RepeatedCompositeFieldContainer[NodeReport]
    rejected: _containers.RepeatedCompositeFieldContainer[Rejection]
    pending: _containers.RepeatedCompositeFieldContainer[PendingAsk]
    headroom: Resource
    response_id: int
    preemption: PreemptionMessage
    reserved: _containers.RepeatedCompositeFieldContainer[ReservedNode]
    reservation: HeldReservation
    def __init__(self, allocated: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., completed: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., node_updates: _Optional[_Iterable[_Union[NodeReport, _Mapping]]] = ..., rejected: _Optional[_Iterable[_Union[Rejection, _Mapping]]] = ..., pending: _Optional[_Iterable[_Union[PendingAsk, _Mapping]]] = ..., headroom: _Optional[_Union[Resource, _Mapping]] = ..., response_id: _Optional[int] = ..., preemption: _Optional[_Union[PreemptionMessage, _Mapping]] = ..., reserved: _Optional[_Iterable[_Union[ReservedNode, _Mapping]]] = ..., reservation: _Optional[_Union[HeldReservation, _Mapping]] = ...) -> None: ...

class HeldReservation(_message.Message):
    __slots__ = ("start_in", "has_duration", "duration", "hosts", "waits_for", "known")
    START_IN_FIELD_NUMBER: _ClassVar[int]
    HAS_DURATION_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    WAITS_FOR_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    start_in: float
    has_duration: bool
    duration: float
    hosts: _containers.RepeatedCompositeFieldContainer[ReservedGpus]
    waits_for: _containers.RepeatedScalarFieldContainer[str]
    known: str
    def __init__(self, start_in: _Optional[float] = ..., has_duration: _Optional[bool] = ..., duration: _Optional[float] = ..., hosts: _Optional[_Iterable[_Union[ReservedGpus, _Mapping]]] = ..., waits_for: _Optional[_Iterable[str]] = ..., known: _Optional[str] = ...) -> None: ...

class ReservedGpus(_message.Message):
    __slots__ = ("host", "gpus")
    HOST_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    host: str
    gpus: int
    def __init__(self, host: _Optional[str] = ..., gpus: _Optional[int] = ...) -> None: ...

class ReservedNode(_message.Message):
    __slots__ = ("host", "start")
    HOST_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    host: str
    start: float
    def __init__(self, host: _Optional[str] = ..., start: _Optional[float] = ...) -> None: ...

class PreemptionMessage(_message.Message):
    __slots__ = ("containers", "deadline", "reason", "why")
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedScalarFieldContainer[str]
    deadline: float
    reason: str
    why: Reason
    def __init__(self, containers: _Optional[_Iterable[str]] = ..., deadline: _Optional[float] = ..., reason: _Optional[str] = ..., why: _Optional[_Union[Reason, _Mapping]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("app_id", "attempt", "queue", "maximum_resource", "containers_from_previous_attempts", "has_queue_limit", "queue_limit")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FROM_PREVIOUS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    HAS_QUEUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    attempt: int
    queue: str
    maximum_resource: Resource
    containers_from_previous_attempts: _containers.RepeatedCompositeFieldContainer[Container]
    has_queue_limit: bool
    queue_limit: Resource
    def __init__(self, app_id: _Optional[str] = ..., attempt: _Optional[int] = ..., queue: _Optional[str] = ..., maximum_resource: _Optional[_Union[Resource, _Mapping]] = ..., containers_from_previous_attempts: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., has_queue_limit: _Optional[bool] = ..., queue_limit: _Optional[_Union[Resource, _Mapping]] = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ("app_id", "attempt", "final_status", "diagnostics")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATUS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    attempt: int
    final_status: str
    diagnostics: str
    def __init__(self, app_id: _Optional[str] = ..., attempt: _Optional[int] = ..., final_status: _Optional[str] = ..., diagnostics: _Optional[str] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ("name", "queue", "max_attempts", "keep_containers_across_attempts", "am_expiry_s", "priority", "gang", "has_expected_duration", "expected_duration_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    KEEP_CONTAINERS_ACROSS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    AM_EXPIRY_S_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    GANG_FIELD_NUMBER: _ClassVar[int]
    HAS_EXPECTED_DURATION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_DURATION_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    max_attempts: int
    keep_containers_across_attempts: bool
    am_expiry_s: float
    priority: int
    gang: _containers.RepeatedCompositeFieldContainer[GangRole]
    has_expected_duration: bool
    expected_duration_s: float
    def __init__(self, name: _Optional[str] = ..., queue: _Optional[str] = ..., max_attempts: _Optional[int] = ..., keep_containers_across_attempts: _Optional[bool] = ..., am_expiry_s: _Optional[float] = ..., priority: _Optional[int] = ..., gang: _Optional[_Iterable[_Union[GangRole, _Mapping]]] = ..., has_expected_duration: _Optional[bool] = ..., expected_duration_s: _Optional[float] = ...) -> None: ...

class GangRole(_message.Message):
    __slots__ = ("name", "instances", "gpus", "gpu_milli", "vcores", "memory_mb", "max_instances_per_node")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    VCORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    MAX_INSTANCES_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    instances: int
    gpus: int
    gpu_milli: int
    vcores: float
    memory_mb: int
    max_instances_per_node: int
    def __init__(self, name: _Optional[str] = ..., instances: _Optional[int] = ..., gpus: _Optional[int] = ..., gpu_milli: _Optional[int] = ..., vcores: _Optional[float] = ..., memory_mb: _Optional[int] = ..., max_instances_per_node: _Optional[int] = ...) -> None: ...

class AppId(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class KillRequest(_message.Message):
    __slots__ = ("app_id", "diagnostics")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    diagnostics: str
    def __init__(self, app_id: _Optional[str] = ..., diagnostics: _Optional[str] = ...) -> None: ...

class ApplicationReport(_message.Message):
    __slots__ = ("app_id", "name", "queue", "state", "attempt", "submitted_at", "has_finished_at", "finished_at", "final_status", "diagnostics", "running_containers", "pending_containers", "used", "gpu_milli_used", "stopping_containers")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    HAS_FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATUS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    PENDING_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_USED_FIELD_NUMBER: _ClassVar[int]
    STOPPING_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    name: str
    queue: str
    state: str
    attempt: int
    submitted_at: float
    has_finished_at: bool
    finished_at: float
    final_status: str
    diagnostics: str
    running_containers: int
    pending_containers: int
    used: Resource
    gpu_milli_used: int
    stopping_containers: int
    def __init__(self, app_id: _Optional[str] = ..., name: _Optional[str] = ..., queue: _Optional[str] = ..., state: _Optional[str] = ..., attempt: _Optional[int] = ..., submitted_at: _Optional[float] = ..., has_finished_at: _Optional[bool] = ..., finished_at: _Optional[float] = ..., final_status: _Optional[str] = ..., diagnostics: _Optional[str] = ..., running_containers: _Optional[int] = ..., pending_containers: _Optional[int] = ..., used: _Optional[_Union[Resource, _Mapping]] = ..., gpu_milli_used: _Optional[int] = ..., stopping_containers: _Optional[int] = ...) -> None: ...

class NodesRequest(_message.Message):
    __slots__ = ("usable_only",)
    USABLE_ONLY_FIELD_NUMBER: _ClassVar[int]
    usable_only: bool
    def __init__(self, usable_only: _Optional[bool] = ...) -> None: ...

class NodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeReport]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeReport, _Mapping]]] = ...) -> None: ...

class EnvVar(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class LaunchContext(_message.Message):
    __slots__ = ("command", "env")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    def __init__(self, command: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ...) -> None: ...

class StartContainerRequest(_message.Message):
    __slots__ = ("container_id", "launch")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    launch: LaunchContext
    def __init__(self, container_id: _Optional[str] = ..., launch: _Optional[_Union[LaunchContext, _Mapping]] = ...) -> None: ...

class StartContainersRequest(_message.Message):
    __slots__ = ("containers", "shared")
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedCompositeFieldContainer[StartContainerRequest]
    shared: LaunchContext
    def __init__(self, containers: _Optional[_Iterable[_Union[StartContainerRequest, _Mapping]]] = ..., shared: _Optional[_Union[LaunchContext, _Mapping]] = ...) -> None: ...

class StartContainersResponse(_message.Message):
    __slots__ = ("refused", "index", "container_id", "error_code", "error_message")
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    refused: bool
    index: int
    container_id: str
    error_code: str
    error_message: str
    def __init__(self, refused: _Optional[bool] = ..., index: _Optional[int] = ..., container_id: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class ContainerId(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class PreemptionDeadline(_message.Message):
    __slots__ = ("deadline",)
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    deadline: float
    def __init__(self, deadline: _Optional[float] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
