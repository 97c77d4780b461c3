from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigSpec(_message.Message):
    __slots__ = ("enabled", "allowed_api_roles", "allowed_kubernetes_namespaces")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_API_ROLES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_KUBERNETES_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    allowed_api_roles: _containers.RepeatedScalarFieldContainer[str]
    allowed_kubernetes_namespaces: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, enabled: _Optional[bool] = ..., allowed_api_roles: _Optional[_Iterable[str]] = ..., allowed_kubernetes_namespaces: _Optional[_Iterable[str]] = ...) -> None: ...
