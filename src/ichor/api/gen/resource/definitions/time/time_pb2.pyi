from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class StatusSpec(_message.Message):
    __slots__ = ("synced", "epoch", "sync_disabled")
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_DISABLED_FIELD_NUMBER: _ClassVar[int]
    synced: bool
    epoch: int
    sync_disabled: bool
    def __init__(self, synced: _Optional[bool] = ..., epoch: _Optional[int] = ..., sync_disabled: _Optional[bool] = ...) -> None: ...
