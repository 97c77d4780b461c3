from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceSpec(_message.Message):
    __slots__ = ("running", "healthy", "unknown")
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    running: bool
    healthy: bool
    unknown: bool
    def __init__(self, running: _Optional[bool] = ..., healthy: _Optional[bool] = ..., unknown: _Optional[bool] = ...) -> None: ...
