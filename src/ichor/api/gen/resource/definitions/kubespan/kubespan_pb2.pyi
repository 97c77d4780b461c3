import datetime

from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2 as _enums_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigSpec(_message.Message):
    __slots__ = ("enabled", "cluster_id", "shared_secret", "force_routing", "advertise_kubernetes_networks", "mtu", "endpoint_filters", "harvest_extra_endpoints")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_SECRET_FIELD_NUMBER: _ClassVar[int]
    FORCE_ROUTING_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_KUBERNETES_NETWORKS_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FILTERS_FIELD_NUMBER: _ClassVar[int]
    HARVEST_EXTRA_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    cluster_id: str
    shared_secret: str
    force_routing: bool
    advertise_kubernetes_networks: bool
    mtu: int
    endpoint_filters: _containers.RepeatedScalarFieldContainer[str]
    harvest_extra_endpoints: bool
    def __init__(self, enabled: _Optional[bool] = ..., cluster_id: _Optional[str] = ..., shared_secret: _Optional[str] = ..., force_routing: _Optional[bool] = ..., advertise_kubernetes_networks: _Optional[bool] = ..., mtu: _Optional[int] = ..., endpoint_filters: _Optional[_Iterable[str]] = ..., harvest_extra_endpoints: _Optional[bool] = ...) -> None: ...

class EndpointSpec(_message.Message):
    __slots__ = ("affiliate_id", "endpoint")
    AFFILIATE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    affiliate_id: str
    endpoint: _common_pb2.NetIPPort
    def __init__(self, affiliate_id: _Optional[str] = ..., endpoint: _Optional[_Union[_common_pb2.NetIPPort, _Mapping]] = ...) -> None: ...

class IdentitySpec(_message.Message):
    __slots__ = ("address", "subnet", "private_key", "public_key")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SUBNET_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.NetIPPrefix
    subnet: _common_pb2.NetIPPrefix
    private_key: str
    public_key: str
    def __init__(self, address: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., subnet: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., private_key: _Optional[str] = ..., public_key: _Optional[str] = ...) -> None: ...

class PeerSpecSpec(_message.Message):
    __slots__ = ("address", "allowed_ips", "endpoints", "label")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_IPS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.NetIP
    allowed_ips: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    endpoints: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPort]
    label: str
    def __init__(self, address: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., allowed_ips: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ..., endpoints: _Optional[_Iterable[_Union[_common_pb2.NetIPPort, _Mapping]]] = ..., label: _Optional[str] = ...) -> None: ...

class PeerStatusSpec(_message.Message):
    __slots__ = ("endpoint", "label", "state", "receive_bytes", "transmit_bytes", "last_handshake_time", "last_used_endpoint", "last_endpoint_change")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRANSMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAST_HANDSHAKE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LAST_ENDPOINT_CHANGE_FIELD_NUMBER: _ClassVar[int]
    endpoint: _common_pb2.NetIPPort
    label: str
    state: _enums_pb2.KubespanPeerState
    receive_bytes: int
    transmit_bytes: int
    last_handshake_time: _timestamp_pb2.Timestamp
    last_used_endpoint: _common_pb2.NetIPPort
    last_endpoint_change: _timestamp_pb2.Timestamp
    def __init__(self, endpoint: _Optional[_Union[_common_pb2.NetIPPort, _Mapping]] = ..., label: _Optional[str] = ..., state: _Optional[_Union[_enums_pb2.KubespanPeerState, str]] = ..., receive_bytes: _Optional[int] = ..., transmit_bytes: _Optional[int] = ..., last_handshake_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_endpoint: _Optional[_Union[_common_pb2.NetIPPort, _Mapping]] = ..., last_endpoint_change: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
