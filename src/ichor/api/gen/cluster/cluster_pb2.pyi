import datetime

from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthCheckRequest(_message.Message):
    __slots__ = ("wait_timeout", "cluster_info")
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_INFO_FIELD_NUMBER: _ClassVar[int]
    wait_timeout: _duration_pb2.Duration
    cluster_info: ClusterInfo
    def __init__(self, wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cluster_info: _Optional[_Union[ClusterInfo, _Mapping]] = ...) -> None: ...

class ClusterInfo(_message.Message):
    __slots__ = ("control_plane_nodes", "worker_nodes", "force_endpoint")
    CONTROL_PLANE_NODES_FIELD_NUMBER: _ClassVar[int]
    WORKER_NODES_FIELD_NUMBER: _ClassVar[int]
    FORCE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    control_plane_nodes: _containers.RepeatedScalarFieldContainer[str]
    worker_nodes: _containers.RepeatedScalarFieldContainer[str]
    force_endpoint: str
    def __init__(self, control_plane_nodes: _Optional[_Iterable[str]] = ..., worker_nodes: _Optional[_Iterable[str]] = ..., force_endpoint: _Optional[str] = ...) -> None: ...

class HealthCheckProgress(_message.Message):
    __slots__ = ("metadata", "message")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    message: str
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., message: _Optional[str] = ...) -> None: ...
