from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class FaultRequest(_message.Message):
    __slots__ = ("action", "host", "container_id", "app_id", "exit_code", "text")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    action: str
    host: str
    container_id: str
    app_id: str
    exit_code: int
    text: str
    def __init__(self, action: _Optional[str] = ..., host: _Optional[str] = ..., container_id: _Optional[str] = ..., app_id: _Optional[str] = ..., exit_code: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
