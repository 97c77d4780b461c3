import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdjtimeStatusSpec(_message.Message):
    __slots__ = ("offset", "frequency_adjustment_ratio", "max_error", "est_error", "status", "constant", "sync_status", "state")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_ADJUSTMENT_RATIO_FIELD_NUMBER: _ClassVar[int]
    MAX_ERROR_FIELD_NUMBER: _ClassVar[int]
    EST_ERROR_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    offset: _duration_pb2.Duration
    frequency_adjustment_ratio: float
    max_error: _duration_pb2.Duration
    est_error: _duration_pb2.Duration
    status: str
    constant: int
    sync_status: bool
    state: str
    def __init__(self, offset: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., frequency_adjustment_ratio: _Optional[float] = ..., max_error: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., est_error: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., status: _Optional[str] = ..., constant: _Optional[int] = ..., sync_status: _Optional[bool] = ..., state: _Optional[str] = ...) -> None: ...

class StatusSpec(_message.Message):
    __slots__ = ("synced", "epoch", "sync_disabled")
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SYNC_DISABLED_FIELD_NUMBER: _ClassVar[int]
    synced: bool
    epoch: int
    sync_disabled: bool
    def __init__(self, synced: _Optional[bool] = ..., epoch: _Optional[int] = ..., sync_disabled: _Optional[bool] = ...) -> None: ...
