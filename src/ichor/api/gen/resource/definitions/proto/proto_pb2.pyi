from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LinuxIDMapping(_message.Message):
    __slots__ = ("container_id", "host_id", "size")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    container_id: int
    host_id: int
    size: int
    def __init__(self, container_id: _Optional[int] = ..., host_id: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class Mount(_message.Message):
    __slots__ = ("destination", "type", "source", "options", "uid_mappings", "gid_mappings")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    UID_MAPPINGS_FIELD_NUMBER: _ClassVar[int]
    GID_MAPPINGS_FIELD_NUMBER: _ClassVar[int]
    destination: str
    type: str
    source: str
    options: _containers.RepeatedScalarFieldContainer[str]
    uid_mappings: _containers.RepeatedCompositeFieldContainer[LinuxIDMapping]
    gid_mappings: _containers.RepeatedCompositeFieldContainer[LinuxIDMapping]
    def __init__(self, destination: _Optional[str] = ..., type: _Optional[str] = ..., source: _Optional[str] = ..., options: _Optional[_Iterable[str]] = ..., uid_mappings: _Optional[_Iterable[_Union[LinuxIDMapping, _Mapping]]] = ..., gid_mappings: _Optional[_Iterable[_Union[LinuxIDMapping, _Mapping]]] = ...) -> None: ...
