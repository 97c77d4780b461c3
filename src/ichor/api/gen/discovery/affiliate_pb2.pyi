from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Affiliate(_message.Message):
    __slots__ = ("node_id", "addresses", "hostname", "nodename", "machine_type", "operating_system", "kubespan", "control_plane")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    MACHINE_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATING_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    KUBESPAN_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    addresses: _containers.RepeatedScalarFieldContainer[bytes]
    hostname: str
    nodename: str
    machine_type: str
    operating_system: str
    kubespan: KubeSpan
    control_plane: ControlPlane
    def __init__(self, node_id: _Optional[str] = ..., addresses: _Optional[_Iterable[bytes]] = ..., hostname: _Optional[str] = ..., nodename: _Optional[str] = ..., machine_type: _Optional[str] = ..., operating_system: _Optional[str] = ..., kubespan: _Optional[_Union[KubeSpan, _Mapping]] = ..., control_plane: _Optional[_Union[ControlPlane, _Mapping]] = ...) -> None: ...

class KubeSpan(_message.Message):
    __slots__ = ("public_key", "address", "additional_addresses")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    public_key: str
    address: bytes
    additional_addresses: _containers.RepeatedCompositeFieldContainer[IPPrefix]
    def __init__(self, public_key: _Optional[str] = ..., address: _Optional[bytes] = ..., additional_addresses: _Optional[_Iterable[_Union[IPPrefix, _Mapping]]] = ...) -> None: ...

class IPPrefix(_message.Message):
    __slots__ = ("ip", "bits")
    IP_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    ip: bytes
    bits: int
    def __init__(self, ip: _Optional[bytes] = ..., bits: _Optional[int] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("ip", "port")
    IP_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ip: bytes
    port: int
    def __init__(self, ip: _Optional[bytes] = ..., port: _Optional[int] = ...) -> None: ...

class ControlPlane(_message.Message):
    __slots__ = ("api_server_port",)
    API_SERVER_PORT_FIELD_NUMBER: _ClassVar[int]
    api_server_port: int
    def __init__(self, api_server_port: _Optional[int] = ...) -> None: ...
