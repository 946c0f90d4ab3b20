from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Operation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BARRIER: _ClassVar[Operation]
    ALL_GATHER: _ClassVar[Operation]
BARRIER: Operation
ALL_GATHER: Operation

class Caller(_message.Message):
    __slots__ = ("job", "gang", "attempt", "token", "task")
    JOB_FIELD_NUMBER: _ClassVar[int]
    GANG_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    job: str
    gang: str
    attempt: int
    token: str
    task: int
    def __init__(self, job: _Optional[str] = ..., gang: _Optional[str] = ..., attempt: _Optional[int] = ..., token: _Optional[str] = ..., task: _Optional[int] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("caller", "epoch", "operation", "message", "hold_ms", "unsent_size", "leader_lost")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    UNSENT_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEADER_LOST_FIELD_NUMBER: _ClassVar[int]
    caller: Caller
    epoch: int
    operation: Operation
    message: bytes
    hold_ms: int
    unsent_size: int
    leader_lost: int
    def __init__(self, caller: _Optional[_Union[Caller, _Mapping]] = ..., epoch: _Optional[int] = ..., operation: _Optional[_Union[Operation, str]] = ..., message: _Optional[bytes] = ..., hold_ms: _Optional[int] = ..., unsent_size: _Optional[int] = ..., leader_lost: _Optional[int] = ...) -> None: ...

class HostSyncRequest(_message.Message):
    __slots__ = ("caller", "epoch", "hold_ms", "tasks", "operations", "messages", "unsent_sizes")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    UNSENT_SIZES_FIELD_NUMBER: _ClassVar[int]
    caller: Caller
    epoch: int
    hold_ms: int
    tasks: _containers.RepeatedScalarFieldContainer[int]
    operations: _containers.RepeatedScalarFieldContainer[Operation]
    messages: _containers.RepeatedScalarFieldContainer[bytes]
    unsent_sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, caller: _Optional[_Union[Caller, _Mapping]] = ..., epoch: _Optional[int] = ..., hold_ms: _Optional[int] = ..., tasks: _Optional[_Iterable[int]] = ..., operations: _Optional[_Iterable[_Union[Operation, str]]] = ..., messages: _Optional[_Iterable[bytes]] = ..., unsent_sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class Released(_message.Message):
    __slots__ = ("epoch", "messages")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    messages: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, epoch: _Optional[int] = ..., messages: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Pending(_message.Message):
    __slots__ = ("epoch", "arrived", "total", "waiting_s")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ARRIVED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    WAITING_S_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    arrived: int
    total: int
    waiting_s: float
    def __init__(self, epoch: _Optional[int] = ..., arrived: _Optional[int] = ..., total: _Optional[int] = ..., waiting_s: _Optional[float] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "has_epoch", "epoch", "has_progress", "arrived", "total", "missing")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HAS_EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HAS_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ARRIVED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    has_epoch: bool
    epoch: int
    has_progress: bool
    arrived: int
    total: int
    missing: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., has_epoch: _Optional[bool] = ..., epoch: _Optional[int] = ..., has_progress: _Optional[bool] = ..., arrived: _Optional[int] = ..., total: _Optional[int] = ..., missing: _Optional[_Iterable[int]] = ...) -> None: ...

class SyncReply(_message.Message):
    __slots__ = ("released", "pending", "error")
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    released: Released
    pending: Pending
    error: Error
    def __init__(self, released: _Optional[_Union[Released, _Mapping]] = ..., pending: _Optional[_Union[Pending, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class TaskInfosRequest(_message.Message):
    __slots__ = ("caller",)
    CALLER_FIELD_NUMBER: _ClassVar[int]
    caller: Caller
    def __init__(self, caller: _Optional[_Union[Caller, _Mapping]] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("index", "host", "ports", "role", "role_index")
    class PortsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    INDEX_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ROLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    host: str
    ports: _containers.ScalarMap[str, int]
    role: str
    role_index: int
    def __init__(self, index: _Optional[int] = ..., host: _Optional[str] = ..., ports: _Optional[_Mapping[str, int]] = ..., role: _Optional[str] = ..., role_index: _Optional[int] = ...) -> None: ...

class TaskInfos(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class TaskInfosReply(_message.Message):
    __slots__ = ("infos", "error")
    INFOS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    infos: TaskInfos
    error: Error
    def __init__(self, infos: _Optional[_Union[TaskInfos, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
