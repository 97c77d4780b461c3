from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DependencyEdgeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MANAGES: _ClassVar[DependencyEdgeType]
    STRONG: _ClassVar[DependencyEdgeType]
    WEAK: _ClassVar[DependencyEdgeType]
MANAGES: DependencyEdgeType
STRONG: DependencyEdgeType
WEAK: DependencyEdgeType

class ControllerDependencyEdge(_message.Message):
    __slots__ = ("controller_name", "edge_type", "resource_namespace", "resource_type", "resource_id")
    CONTROLLER_NAME_FIELD_NUMBER: _ClassVar[int]
    EDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    controller_name: str
    edge_type: DependencyEdgeType
    resource_namespace: str
    resource_type: str
    resource_id: str
    def __init__(self, controller_name: _Optional[str] = ..., edge_type: _Optional[_Union[DependencyEdgeType, str]] = ..., resource_namespace: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_id: _Optional[str] = ...) -> None: ...

class ControllerRuntimeDependency(_message.Message):
    __slots__ = ("metadata", "edges")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.Metadata
    edges: _containers.RepeatedCompositeFieldContainer[ControllerDependencyEdge]
    def __init__(self, metadata: _Optional[_Union[_common_pb2.Metadata, _Mapping]] = ..., edges: _Optional[_Iterable[_Union[ControllerDependencyEdge, _Mapping]]] = ...) -> None: ...

class ControllerRuntimeDependenciesResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ControllerRuntimeDependency]
    def __init__(self, messages: _Optional[_Iterable[_Union[ControllerRuntimeDependency, _Mapping]]] = ...) -> None: ...
