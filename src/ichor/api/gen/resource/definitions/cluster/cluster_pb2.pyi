from ichor.api.gen.common import common_pb2 as _common_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2 as _enums_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AffiliateSpec(_message.Message):
    __slots__ = ("node_id", "addresses", "hostname", "nodename", "operating_system", "machine_type", "kube_span", "control_plane")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    OPERATING_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    MACHINE_TYPE_FIELD_NUMBER: _ClassVar[int]
    KUBE_SPAN_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    hostname: str
    nodename: str
    operating_system: str
    machine_type: _enums_pb2.MachineType
    kube_span: KubeSpanAffiliateSpec
    control_plane: ControlPlane
    def __init__(self, node_id: _Optional[str] = ..., addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., hostname: _Optional[str] = ..., nodename: _Optional[str] = ..., operating_system: _Optional[str] = ..., machine_type: _Optional[_Union[_enums_pb2.MachineType, str]] = ..., kube_span: _Optional[_Union[KubeSpanAffiliateSpec, _Mapping]] = ..., control_plane: _Optional[_Union[ControlPlane, _Mapping]] = ...) -> None: ...

class ConfigSpec(_message.Message):
    __slots__ = ("discovery_enabled", "registry_kubernetes_enabled", "registry_service_enabled", "service_endpoint", "service_endpoint_insecure", "service_encryption_key", "service_cluster_id")
    DISCOVERY_ENABLED_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_KUBERNETES_ENABLED_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_SERVICE_ENABLED_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENDPOINT_INSECURE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ENCRYPTION_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    discovery_enabled: bool
    registry_kubernetes_enabled: bool
    registry_service_enabled: bool
    service_endpoint: str
    service_endpoint_insecure: bool
    service_encryption_key: bytes
    service_cluster_id: str
    def __init__(self, discovery_enabled: _Optional[bool] = ..., registry_kubernetes_enabled: _Optional[bool] = ..., registry_service_enabled: _Optional[bool] = ..., service_endpoint: _Optional[str] = ..., service_endpoint_insecure: _Optional[bool] = ..., service_encryption_key: _Optional[bytes] = ..., service_cluster_id: _Optional[str] = ...) -> None: ...

class ControlPlane(_message.Message):
    __slots__ = ("api_server_port",)
    API_SERVER_PORT_FIELD_NUMBER: _ClassVar[int]
    api_server_port: int
    def __init__(self, api_server_port: _Optional[int] = ...) -> None: ...

class IdentitySpec(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class InfoSpec(_message.Message):
    __slots__ = ("cluster_id", "cluster_name")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    cluster_name: str
    def __init__(self, cluster_id: _Optional[str] = ..., cluster_name: _Optional[str] = ...) -> None: ...

class KubeSpanAffiliateSpec(_message.Message):
    __slots__ = ("public_key", "address", "additional_addresses", "endpoints")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    public_key: str
    address: _common_pb2.NetIP
    additional_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    endpoints: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPort]
    def __init__(self, public_key: _Optional[str] = ..., address: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., additional_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ..., endpoints: _Optional[_Iterable[_Union[_common_pb2.NetIPPort, _Mapping]]] = ...) -> None: ...

class MemberSpec(_message.Message):
    __slots__ = ("node_id", "addresses", "hostname", "machine_type", "operating_system", "control_plane")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    MACHINE_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATING_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    hostname: str
    machine_type: _enums_pb2.MachineType
    operating_system: str
    control_plane: ControlPlane
    def __init__(self, node_id: _Optional[str] = ..., addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., hostname: _Optional[str] = ..., machine_type: _Optional[_Union[_enums_pb2.MachineType, str]] = ..., operating_system: _Optional[str] = ..., control_plane: _Optional[_Union[ControlPlane, _Mapping]] = ...) -> None: ...
