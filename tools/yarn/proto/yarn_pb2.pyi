from gangmaster.tools.yarn.proto import hadoop_common_pb2 as _hadoop_common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceTypesProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COUNTABLE: _ClassVar[ResourceTypesProto]

class ExecutionTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GUARANTEED: _ClassVar[ExecutionTypeProto]
    OPPORTUNISTIC: _ClassVar[ExecutionTypeProto]

class ContainerStateProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    C_NEW: _ClassVar[ContainerStateProto]
    C_RUNNING: _ClassVar[ContainerStateProto]
    C_COMPLETE: _ClassVar[ContainerStateProto]

class FinalApplicationStatusProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APP_UNDEFINED: _ClassVar[FinalApplicationStatusProto]
    APP_SUCCEEDED: _ClassVar[FinalApplicationStatusProto]
    APP_FAILED: _ClassVar[FinalApplicationStatusProto]
    APP_KILLED: _ClassVar[FinalApplicationStatusProto]
    APP_ENDED: _ClassVar[FinalApplicationStatusProto]

class NodeStateProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NS_NEW: _ClassVar[NodeStateProto]
    NS_RUNNING: _ClassVar[NodeStateProto]
    NS_UNHEALTHY: _ClassVar[NodeStateProto]
    NS_DECOMMISSIONED: _ClassVar[NodeStateProto]
    NS_LOST: _ClassVar[NodeStateProto]
    NS_REBOOTED: _ClassVar[NodeStateProto]
    NS_DECOMMISSIONING: _ClassVar[NodeStateProto]
    NS_SHUTDOWN: _ClassVar[NodeStateProto]

class AMCommandProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AM_RESYNC: _ClassVar[AMCommandProto]
    AM_SHUTDOWN: _ClassVar[AMCommandProto]
COUNTABLE: ResourceTypesProto
GUARANTEED: ExecutionTypeProto
OPPORTUNISTIC: ExecutionTypeProto
C_NEW: ContainerStateProto
C_RUNNING: ContainerStateProto
C_COMPLETE: ContainerStateProto
APP_UNDEFINED: FinalApplicationStatusProto
APP_SUCCEEDED: FinalApplicationStatusProto
APP_FAILED: FinalApplicationStatusProto
APP_KILLED: FinalApplicationStatusProto
APP_ENDED: FinalApplicationStatusProto
NS_NEW: NodeStateProto
NS_RUNNING: NodeStateProto
NS_UNHEALTHY: NodeStateProto
NS_DECOMMISSIONED: NodeStateProto
NS_LOST: NodeStateProto
NS_REBOOTED: NodeStateProto
NS_DECOMMISSIONING: NodeStateProto
NS_SHUTDOWN: NodeStateProto
AM_RESYNC: AMCommandProto
AM_SHUTDOWN: AMCommandProto

class SerializedExceptionProto(_message.Message):
    __slots__ = ("message", "trace", "class_name", "cause")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    message: str
    trace: str
    class_name: str
    cause: SerializedExceptionProto
    def __init__(self, message: _Optional[str] = ..., trace: _Optional[str] = ..., class_name: _Optional[str] = ..., cause: _Optional[_Union[SerializedExceptionProto, _Mapping]] = ...) -> None: ...

class ApplicationIdProto(_message.Message):
    __slots__ = ("id", "cluster_timestamp")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    id: int
    cluster_timestamp: int
    def __init__(self, id: _Optional[int] = ..., cluster_timestamp: _Optional[int] = ...) -> None: ...

class ApplicationAttemptIdProto(_message.Message):
    __slots__ = ("application_id", "attemptId")
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTID_FIELD_NUMBER: _ClassVar[int]
    application_id: ApplicationIdProto
    attemptId: int
    def __init__(self, application_id: _Optional[_Union[ApplicationIdProto, _Mapping]] = ..., attemptId: _Optional[int] = ...) -> None: ...

class ContainerIdProto(_message.Message):
    __slots__ = ("app_id", "app_attempt_id", "id")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    APP_ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    app_id: ApplicationIdProto
    app_attempt_id: ApplicationAttemptIdProto
    id: int
    def __init__(self, app_id: _Optional[_Union[ApplicationIdProto, _Mapping]] = ..., app_attempt_id: _Optional[_Union[ApplicationAttemptIdProto, _Mapping]] = ..., id: _Optional[int] = ...) -> None: ...

class StringStringMapProto(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class StringBytesMapProto(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class ResourceInformationProto(_message.Message):
    __slots__ = ("key", "value", "units", "type")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: int
    units: str
    type: ResourceTypesProto
    def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ..., units: _Optional[str] = ..., type: _Optional[_Union[ResourceTypesProto, str]] = ...) -> None: ...

class ResourceProto(_message.Message):
    __slots__ = ("memory", "virtual_cores", "resource_value_map")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_CORES_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VALUE_MAP_FIELD_NUMBER: _ClassVar[int]
    memory: int
    virtual_cores: int
    resource_value_map: _containers.RepeatedCompositeFieldContainer[ResourceInformationProto]
    def __init__(self, memory: _Optional[int] = ..., virtual_cores: _Optional[int] = ..., resource_value_map: _Optional[_Iterable[_Union[ResourceInformationProto, _Mapping]]] = ...) -> None: ...

class PriorityProto(_message.Message):
    __slots__ = ("priority",)
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    priority: int
    def __init__(self, priority: _Optional[int] = ...) -> None: ...

class NodeIdProto(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class NodeReportProto(_message.Message):
    __slots__ = ("nodeId", "httpAddress", "rackName", "used", "capability", "numContainers", "node_state", "health_report")
    NODEID_FIELD_NUMBER: _ClassVar[int]
    HTTPADDRESS_FIELD_NUMBER: _ClassVar[int]
    RACKNAME_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    NUMCONTAINERS_FIELD_NUMBER: _ClassVar[int]
    NODE_STATE_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REPORT_FIELD_NUMBER: _ClassVar[int]
    nodeId: NodeIdProto
    httpAddress: str
    rackName: str
    used: ResourceProto
    capability: ResourceProto
    numContainers: int
    node_state: NodeStateProto
    health_report: str
    def __init__(self, nodeId: _Optional[_Union[NodeIdProto, _Mapping]] = ..., httpAddress: _Optional[str] = ..., rackName: _Optional[str] = ..., used: _Optional[_Union[ResourceProto, _Mapping]] = ..., capability: _Optional[_Union[ResourceProto, _Mapping]] = ..., numContainers: _Optional[int] = ..., node_state: _Optional[_Union[NodeStateProto, str]] = ..., health_report: _Optional[str] = ...) -> None: ...

class ContainerProto(_message.Message):
    __slots__ = ("id", "nodeId", "node_http_address", "resource", "priority", "container_token", "execution_type", "allocation_request_id", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    NODEID_FIELD_NUMBER: _ClassVar[int]
    NODE_HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: ContainerIdProto
    nodeId: NodeIdProto
    node_http_address: str
    resource: ResourceProto
    priority: PriorityProto
    container_token: _hadoop_common_pb2.TokenProto
    execution_type: ExecutionTypeProto
    allocation_request_id: int
    version: int
    def __init__(self, id: _Optional[_Union[ContainerIdProto, _Mapping]] = ..., nodeId: _Optional[_Union[NodeIdProto, _Mapping]] = ..., node_http_address: _Optional[str] = ..., resource: _Optional[_Union[ResourceProto, _Mapping]] = ..., priority: _Optional[_Union[PriorityProto, _Mapping]] = ..., container_token: _Optional[_Union[_hadoop_common_pb2.TokenProto, _Mapping]] = ..., execution_type: _Optional[_Union[ExecutionTypeProto, str]] = ..., allocation_request_id: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class ContainerStatusProto(_message.Message):
    __slots__ = ("container_id", "state", "diagnostics", "exit_status", "capability")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    container_id: ContainerIdProto
    state: ContainerStateProto
    diagnostics: str
    exit_status: int
    capability: ResourceProto
    def __init__(self, container_id: _Optional[_Union[ContainerIdProto, _Mapping]] = ..., state: _Optional[_Union[ContainerStateProto, str]] = ..., diagnostics: _Optional[str] = ..., exit_status: _Optional[int] = ..., capability: _Optional[_Union[ResourceProto, _Mapping]] = ...) -> None: ...

class ExecutionTypeRequestProto(_message.Message):
    __slots__ = ("execution_type", "enforce_execution_type")
    EXECUTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENFORCE_EXECUTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    execution_type: ExecutionTypeProto
    enforce_execution_type: bool
    def __init__(self, execution_type: _Optional[_Union[ExecutionTypeProto, str]] = ..., enforce_execution_type: _Optional[bool] = ...) -> None: ...

class ResourceRequestProto(_message.Message):
    __slots__ = ("priority", "resource_name", "capability", "num_containers", "relax_locality", "node_label_expression", "execution_type_request", "allocation_request_id")
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    NUM_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    RELAX_LOCALITY_FIELD_NUMBER: _ClassVar[int]
    NODE_LABEL_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TYPE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    priority: PriorityProto
    resource_name: str
    capability: ResourceProto
    num_containers: int
    relax_locality: bool
    node_label_expression: str
    execution_type_request: ExecutionTypeRequestProto
    allocation_request_id: int
    def __init__(self, priority: _Optional[_Union[PriorityProto, _Mapping]] = ..., resource_name: _Optional[str] = ..., capability: _Optional[_Union[ResourceProto, _Mapping]] = ..., num_containers: _Optional[int] = ..., relax_locality: _Optional[bool] = ..., node_label_expression: _Optional[str] = ..., execution_type_request: _Optional[_Union[ExecutionTypeRequestProto, _Mapping]] = ..., allocation_request_id: _Optional[int] = ...) -> None: ...

class ContainerLaunchContextProto(_message.Message):
    __slots__ = ("tokens", "service_data", "environment", "command")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_DATA_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    tokens: bytes
    service_data: _containers.RepeatedCompositeFieldContainer[StringBytesMapProto]
    environment: _containers.RepeatedCompositeFieldContainer[StringStringMapProto]
    command: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tokens: _Optional[bytes] = ..., service_data: _Optional[_Iterable[_Union[StringBytesMapProto, _Mapping]]] = ..., environment: _Optional[_Iterable[_Union[StringStringMapProto, _Mapping]]] = ..., command: _Optional[_Iterable[str]] = ...) -> None: ...

class PreemptionContainerProto(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: ContainerIdProto
    def __init__(self, id: _Optional[_Union[ContainerIdProto, _Mapping]] = ...) -> None: ...

class StrictPreemptionContractProto(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedCompositeFieldContainer[PreemptionContainerProto]
    def __init__(self, container: _Optional[_Iterable[_Union[PreemptionContainerProto, _Mapping]]] = ...) -> None: ...

class PreemptionContractProto(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedCompositeFieldContainer[PreemptionContainerProto]
    def __init__(self, container: _Optional[_Iterable[_Union[PreemptionContainerProto, _Mapping]]] = ...) -> None: ...

class PreemptionMessageProto(_message.Message):
    __slots__ = ("strictContract", "contract")
    STRICTCONTRACT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    strictContract: StrictPreemptionContractProto
    contract: PreemptionContractProto
    def __init__(self, strictContract: _Optional[_Union[StrictPreemptionContractProto, _Mapping]] = ..., contract: _Optional[_Union[PreemptionContractProto, _Mapping]] = ...) -> None: ...

class RegisterApplicationMasterRequestProto(_message.Message):
    __slots__ = ("host", "rpc_port", "tracking_url")
    HOST_FIELD_NUMBER: _ClassVar[int]
    RPC_PORT_FIELD_NUMBER: _ClassVar[int]
    TRACKING_URL_FIELD_NUMBER: _ClassVar[int]
    host: str
    rpc_port: int
    tracking_url: str
    def __init__(self, host: _Optional[str] = ..., rpc_port: _Optional[int] = ..., tracking_url: _Optional[str] = ...) -> None: ...

class NMTokenProto(_message.Message):
    __slots__ = ("nodeId", "token")
    NODEID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodeId: NodeIdProto
    token: _hadoop_common_pb2.TokenProto
    def __init__(self, nodeId: _Optional[_Union[NodeIdProto, _Mapping]] = ..., token: _Optional[_Union[_hadoop_common_pb2.TokenProto, _Mapping]] = ...) -> None: ...

class RegisterApplicationMasterResponseProto(_message.Message):
    __slots__ = ("maximumCapability", "containers_from_previous_attempts", "queue", "nm_tokens_from_previous_attempts")
    MAXIMUMCAPABILITY_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FROM_PREVIOUS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NM_TOKENS_FROM_PREVIOUS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    maximumCapability: ResourceProto
    containers_from_previous_attempts: _containers.RepeatedCompositeFieldContainer[ContainerProto]
    queue: str
    nm_tokens_from_previous_attempts: _containers.RepeatedCompositeFieldContainer[NMTokenProto]
    def __init__(self, maximumCapability: _Optional[_Union[ResourceProto, _Mapping]] = ..., containers_from_previous_attempts: _Optional[_Iterable[_Union[ContainerProto, _Mapping]]] = ..., queue: _Optional[str] = ..., nm_tokens_from_previous_attempts: _Optional[_Iterable[_Union[NMTokenProto, _Mapping]]] = ...) -> None: ...

class FinishApplicationMasterRequestProto(_message.Message):
    __slots__ = ("diagnostics", "tracking_url", "final_application_status")
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    TRACKING_URL_FIELD_NUMBER: _ClassVar[int]
    FINAL_APPLICATION_STATUS_FIELD_NUMBER: _ClassVar[int]
    diagnostics: str
    tracking_url: str
    final_application_status: FinalApplicationStatusProto
    def __init__(self, diagnostics: _Optional[str] = ..., tracking_url: _Optional[str] = ..., final_application_status: _Optional[_Union[FinalApplicationStatusProto, str]] = ...) -> None: ...

class FinishApplicationMasterResponseProto(_message.Message):
    __slots__ = ("isUnregistered",)
    ISUNREGISTERED_FIELD_NUMBER: _ClassVar[int]
    isUnregistered: bool
    def __init__(self, isUnregistered: _Optional[bool] = ...) -> None: ...

class AllocateRequestProto(_message.Message):
    __slots__ = ("ask", "release", "response_id", "progress")
    ASK_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ask: _containers.RepeatedCompositeFieldContainer[ResourceRequestProto]
    release: _containers.RepeatedCompositeFieldContainer[ContainerIdProto]
    response_id: int
    progress: float
    def __init__(self, ask: _Optional[_Iterable[_Union[ResourceRequestProto, _Mapping]]] = ..., release: _Optional[_Iterable[_Union[ContainerIdProto, _Mapping]]] = ..., response_id: _Optional[int] = ..., progress: _Optional[float] = ...) -> None: ...

class AllocateResponseProto(_message.Message):
    __slots__ = ("a_m_command", "response_id", "allocated_containers", "completed_container_statuses", "limit", "updated_nodes", "num_cluster_nodes", "preempt", "nm_tokens", "am_rm_token", "containers_from_previous_attempts")
    A_M_COMMAND_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_CLUSTER_NODES_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_FIELD_NUMBER: _ClassVar[int]
    NM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AM_RM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FROM_PREVIOUS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    a_m_command: AMCommandProto
    response_id: int
    allocated_containers: _containers.RepeatedCompositeFieldContainer[ContainerProto]
    completed_container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatusProto]
    limit: ResourceProto
    updated_nodes: _containers.RepeatedCompositeFieldContainer[NodeReportProto]
    num_cluster_nodes: int
    preempt: PreemptionMessageProto
    nm_tokens: _containers.RepeatedCompositeFieldContainer[NMTokenProto]
    am_rm_token: _hadoop_common_pb2.TokenProto
    containers_from_previous_attempts: _containers.RepeatedCompositeFieldContainer[ContainerProto]
    def __init__(self, a_m_command: _Optional[_Union[AMCommandProto, str]] = ..., response_id: _Optional[int] = ..., allocated_containers: _Optional[_Iterable[_Union[ContainerProto, _Mapping]]] = ..., completed_container_statuses: _Optional[_Iterable[_Union[ContainerStatusProto, _Mapping]]] = ..., limit: _Optional[_Union[ResourceProto, _Mapping]] = ..., updated_nodes: _Optional[_Iterable[_Union[NodeReportProto, _Mapping]]] = ..., num_cluster_nodes: _Optional[int] = ..., preempt: _Optional[_Union[PreemptionMessageProto, _Mapping]] = ..., nm_tokens: _Optional[_Iterable[_Union[NMTokenProto, _Mapping]]] = ..., am_rm_token: _Optional[_Union[_hadoop_common_pb2.TokenProto, _Mapping]] = ..., containers_from_previous_attempts: _Optional[_Iterable[_Union[ContainerProto, _Mapping]]] = ...) -> None: ...

class StartContainerRequestProto(_message.Message):
    __slots__ = ("container_launch_context", "container_token")
    CONTAINER_LAUNCH_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    container_launch_context: ContainerLaunchContextProto
    container_token: _hadoop_common_pb2.TokenProto
    def __init__(self, container_launch_context: _Optional[_Union[ContainerLaunchContextProto, _Mapping]] = ..., container_token: _Optional[_Union[_hadoop_common_pb2.TokenProto, _Mapping]] = ...) -> None: ...

class StartContainersRequestProto(_message.Message):
    __slots__ = ("start_container_request",)
    START_CONTAINER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    start_container_request: _containers.RepeatedCompositeFieldContainer[StartContainerRequestProto]
    def __init__(self, start_container_request: _Optional[_Iterable[_Union[StartContainerRequestProto, _Mapping]]] = ...) -> None: ...

class ContainerExceptionMapProto(_message.Message):
    __slots__ = ("container_id", "exception")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    container_id: ContainerIdProto
    exception: SerializedExceptionProto
    def __init__(self, container_id: _Optional[_Union[ContainerIdProto, _Mapping]] = ..., exception: _Optional[_Union[SerializedExceptionProto, _Mapping]] = ...) -> None: ...

class StartContainersResponseProto(_message.Message):
    __slots__ = ("services_meta_data", "succeeded_requests", "failed_requests")
    SERVICES_META_DATA_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    services_meta_data: _containers.RepeatedCompositeFieldContainer[StringBytesMapProto]
    succeeded_requests: _containers.RepeatedCompositeFieldContainer[ContainerIdProto]
    failed_requests: _containers.RepeatedCompositeFieldContainer[ContainerExceptionMapProto]
    def __init__(self, services_meta_data: _Optional[_Iterable[_Union[StringBytesMapProto, _Mapping]]] = ..., succeeded_requests: _Optional[_Iterable[_Union[ContainerIdProto, _Mapping]]] = ..., failed_requests: _Optional[_Iterable[_Union[ContainerExceptionMapProto, _Mapping]]] = ...) -> None: ...

class StopContainersRequestProto(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: _containers.RepeatedCompositeFieldContainer[ContainerIdProto]
    def __init__(self, container_id: _Optional[_Iterable[_Union[ContainerIdProto, _Mapping]]] = ...) -> None: ...

class StopContainersResponseProto(_message.Message):
    __slots__ = ("succeeded_requests", "failed_requests")
    SUCCEEDED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    succeeded_requests: _containers.RepeatedCompositeFieldContainer[ContainerIdProto]
    failed_requests: _containers.RepeatedCompositeFieldContainer[ContainerExceptionMapProto]
    def __init__(self, succeeded_requests: _Optional[_Iterable[_Union[ContainerIdProto, _Mapping]]] = ..., failed_requests: _Optional[_Iterable[_Union[ContainerExceptionMapProto, _Mapping]]] = ...) -> None: ...

class GetContainerStatusesRequestProto(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: _containers.RepeatedCompositeFieldContainer[ContainerIdProto]
    def __init__(self, container_id: _Optional[_Iterable[_Union[ContainerIdProto, _Mapping]]] = ...) -> None: ...

class GetContainerStatusesResponseProto(_message.Message):
    __slots__ = ("status", "failed_requests")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FAILED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    status: _containers.RepeatedCompositeFieldContainer[ContainerStatusProto]
    failed_requests: _containers.RepeatedCompositeFieldContainer[ContainerExceptionMapProto]
    def __init__(self, status: _Optional[_Iterable[_Union[ContainerStatusProto, _Mapping]]] = ..., failed_requests: _Optional[_Iterable[_Union[ContainerExceptionMapProto, _Mapping]]] = ...) -> None: ...
