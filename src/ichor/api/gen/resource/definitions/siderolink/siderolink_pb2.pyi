from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigSpec(_message.Message):
    __slots__ = ("api_endpoint", "host", "join_token", "insecure", "tunnel")
    API_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INSECURE_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_FIELD_NUMBER: _ClassVar[int]
    api_endpoint: str
    host: str
    join_token: str
    insecure: bool
    tunnel: bool
    def __init__(self, api_endpoint: _Optional[str] = ..., host: _Optional[str] = ..., join_token: _Optional[str] = ..., insecure: _Optional[bool] = ..., tunnel: _Optional[bool] = ...) -> None: ...

class TunnelSpec(_message.Message):
    __slots__ = ("api_endpoint", "link_name", "mtu", "node_address")
    API_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    NODE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    api_endpoint: str
    link_name: str
    mtu: int
    node_address: _common_pb2.NetIPPort
    def __init__(self, api_endpoint: _Optional[str] = ..., link_name: _Optional[str] = ..., mtu: _Optional[int] = ..., node_address: _Optional[_Union[_common_pb2.NetIPPort, _Mapping]] = ...) -> None: ...
