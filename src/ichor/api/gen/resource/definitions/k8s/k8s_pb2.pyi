from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from ichor.api.gen.resource.definitions.proto import proto_pb2 as _proto_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class APIServerConfigSpec(_message.Message):
    __slots__ = ("image", "cloud_provider", "control_plane_endpoint", "etcd_servers", "local_port", "service_cid_rs", "extra_args", "extra_volumes", "environment_variables", "pod_security_policy_enabled", "advertised_address", "resources")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EnvironmentVariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CLOUD_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ETCD_SERVERS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_PORT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CID_RS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    POD_SECURITY_POLICY_ENABLED_FIELD_NUMBER: _ClassVar[int]
    ADVERTISED_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    image: str
    cloud_provider: str
    control_plane_endpoint: str
    etcd_servers: _containers.RepeatedScalarFieldContainer[str]
    local_port: int
    service_cid_rs: _containers.RepeatedScalarFieldContainer[str]
    extra_args: _containers.ScalarMap[str, str]
    extra_volumes: _containers.RepeatedCompositeFieldContainer[ExtraVolume]
    environment_variables: _containers.ScalarMap[str, str]
    pod_security_policy_enabled: bool
    advertised_address: str
    resources: Resources
    def __init__(self, image: _Optional[str] = ..., cloud_provider: _Optional[str] = ..., control_plane_endpoint: _Optional[str] = ..., etcd_servers: _Optional[_Iterable[str]] = ..., local_port: _Optional[int] = ..., service_cid_rs: _Optional[_Iterable[str]] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., extra_volumes: _Optional[_Iterable[_Union[ExtraVolume, _Mapping]]] = ..., environment_variables: _Optional[_Mapping[str, str]] = ..., pod_security_policy_enabled: _Optional[bool] = ..., advertised_address: _Optional[str] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ...) -> None: ...

class AdmissionControlConfigSpec(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _containers.RepeatedCompositeFieldContainer[AdmissionPluginSpec]
    def __init__(self, config: _Optional[_Iterable[_Union[AdmissionPluginSpec, _Mapping]]] = ...) -> None: ...

class AdmissionPluginSpec(_message.Message):
    __slots__ = ("name", "configuration")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    configuration: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., configuration: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AuditPolicyConfigSpec(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    def __init__(self, config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class BootstrapManifestsConfigSpec(_message.Message):
    __slots__ = ("server", "cluster_domain", "pod_cid_rs", "proxy_enabled", "proxy_image", "proxy_args", "core_dns_enabled", "core_dns_image", "dns_service_ip", "dns_service_i_pv6", "flannel_enabled", "flannel_image", "flannel_cni_image", "pod_security_policy_enabled", "talos_api_service_enabled", "flannel_extra_args", "flannel_kube_service_host", "flannel_kube_service_port", "service_host_dns_address")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    POD_CID_RS_FIELD_NUMBER: _ClassVar[int]
    PROXY_ENABLED_FIELD_NUMBER: _ClassVar[int]
    PROXY_IMAGE_FIELD_NUMBER: _ClassVar[int]
    PROXY_ARGS_FIELD_NUMBER: _ClassVar[int]
    CORE_DNS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    CORE_DNS_IMAGE_FIELD_NUMBER: _ClassVar[int]
    DNS_SERVICE_IP_FIELD_NUMBER: _ClassVar[int]
    DNS_SERVICE_I_PV6_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_ENABLED_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_IMAGE_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_CNI_IMAGE_FIELD_NUMBER: _ClassVar[int]
    POD_SECURITY_POLICY_ENABLED_FIELD_NUMBER: _ClassVar[int]
    TALOS_API_SERVICE_ENABLED_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_KUBE_SERVICE_HOST_FIELD_NUMBER: _ClassVar[int]
    FLANNEL_KUBE_SERVICE_PORT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_HOST_DNS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    server: str
    cluster_domain: str
    pod_cid_rs: _containers.RepeatedScalarFieldContainer[str]
    proxy_enabled: bool
    proxy_image: str
    proxy_args: _containers.RepeatedScalarFieldContainer[str]
    core_dns_enabled: bool
    core_dns_image: str
    dns_service_ip: str
    dns_service_i_pv6: str
    flannel_enabled: bool
    flannel_image: str
    flannel_cni_image: str
    pod_security_policy_enabled: bool
    talos_api_service_enabled: bool
    flannel_extra_args: _containers.RepeatedScalarFieldContainer[str]
    flannel_kube_service_host: str
    flannel_kube_service_port: str
    service_host_dns_address: str
    def __init__(self, server: _Optional[str] = ..., cluster_domain: _Optional[str] = ..., pod_cid_rs: _Optional[_Iterable[str]] = ..., proxy_enabled: _Optional[bool] = ..., proxy_image: _Optional[str] = ..., proxy_args: _Optional[_Iterable[str]] = ..., core_dns_enabled: _Optional[bool] = ..., core_dns_image: _Optional[str] = ..., dns_service_ip: _Optional[str] = ..., dns_service_i_pv6: _Optional[str] = ..., flannel_enabled: _Optional[bool] = ..., flannel_image: _Optional[str] = ..., flannel_cni_image: _Optional[str] = ..., pod_security_policy_enabled: _Optional[bool] = ..., talos_api_service_enabled: _Optional[bool] = ..., flannel_extra_args: _Optional[_Iterable[str]] = ..., flannel_kube_service_host: _Optional[str] = ..., flannel_kube_service_port: _Optional[str] = ..., service_host_dns_address: _Optional[str] = ...) -> None: ...

class ConfigStatusSpec(_message.Message):
    __slots__ = ("ready", "version")
    READY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    version: str
    def __init__(self, ready: _Optional[bool] = ..., version: _Optional[str] = ...) -> None: ...

class ControllerManagerConfigSpec(_message.Message):
    __slots__ = ("enabled", "image", "cloud_provider", "pod_cid_rs", "service_cid_rs", "extra_args", "extra_volumes", "environment_variables", "resources")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EnvironmentVariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CLOUD_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    POD_CID_RS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CID_RS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    image: str
    cloud_provider: str
    pod_cid_rs: _containers.RepeatedScalarFieldContainer[str]
    service_cid_rs: _containers.RepeatedScalarFieldContainer[str]
    extra_args: _containers.ScalarMap[str, str]
    extra_volumes: _containers.RepeatedCompositeFieldContainer[ExtraVolume]
    environment_variables: _containers.ScalarMap[str, str]
    resources: Resources
    def __init__(self, enabled: _Optional[bool] = ..., image: _Optional[str] = ..., cloud_provider: _Optional[str] = ..., pod_cid_rs: _Optional[_Iterable[str]] = ..., service_cid_rs: _Optional[_Iterable[str]] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., extra_volumes: _Optional[_Iterable[_Union[ExtraVolume, _Mapping]]] = ..., environment_variables: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ...) -> None: ...

class EndpointSpec(_message.Message):
    __slots__ = ("addresses",)
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    def __init__(self, addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ...) -> None: ...

class ExtraManifest(_message.Message):
    __slots__ = ("name", "url", "priority", "extra_headers", "inline_manifest")
    class ExtraHeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    EXTRA_HEADERS_FIELD_NUMBER: _ClassVar[int]
    INLINE_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    url: str
    priority: str
    extra_headers: _containers.ScalarMap[str, str]
    inline_manifest: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., priority: _Optional[str] = ..., extra_headers: _Optional[_Mapping[str, str]] = ..., inline_manifest: _Optional[str] = ...) -> None: ...

class ExtraManifestsConfigSpec(_message.Message):
    __slots__ = ("extra_manifests",)
    EXTRA_MANIFESTS_FIELD_NUMBER: _ClassVar[int]
    extra_manifests: _containers.RepeatedCompositeFieldContainer[ExtraManifest]
    def __init__(self, extra_manifests: _Optional[_Iterable[_Union[ExtraManifest, _Mapping]]] = ...) -> None: ...

class ExtraVolume(_message.Message):
    __slots__ = ("name", "host_path", "mount_path", "read_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    host_path: str
    mount_path: str
    read_only: bool
    def __init__(self, name: _Optional[str] = ..., host_path: _Optional[str] = ..., mount_path: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class KubePrismConfigSpec(_message.Message):
    __slots__ = ("host", "port", "endpoints")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    endpoints: _containers.RepeatedCompositeFieldContainer[KubePrismEndpoint]
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[KubePrismEndpoint, _Mapping]]] = ...) -> None: ...

class KubePrismEndpoint(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class KubePrismEndpointsSpec(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[KubePrismEndpoint]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[KubePrismEndpoint, _Mapping]]] = ...) -> None: ...

class KubePrismStatusesSpec(_message.Message):
    __slots__ = ("host", "healthy")
    HOST_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    host: str
    healthy: bool
    def __init__(self, host: _Optional[str] = ..., healthy: _Optional[bool] = ...) -> None: ...

class KubeletConfigSpec(_message.Message):
    __slots__ = ("image", "cluster_dns", "cluster_domain", "extra_args", "extra_mounts", "extra_config", "cloud_provider_external", "default_runtime_seccomp_enabled", "skip_node_registration", "static_pod_list_url", "disable_manifests_directory", "enable_fs_quota_monitoring", "credential_provider_config")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DNS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_MOUNTS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CLOUD_PROVIDER_EXTERNAL_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RUNTIME_SECCOMP_ENABLED_FIELD_NUMBER: _ClassVar[int]
    SKIP_NODE_REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    STATIC_POD_LIST_URL_FIELD_NUMBER: _ClassVar[int]
    DISABLE_MANIFESTS_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    ENABLE_FS_QUOTA_MONITORING_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_PROVIDER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    image: str
    cluster_dns: _containers.RepeatedScalarFieldContainer[str]
    cluster_domain: str
    extra_args: _containers.ScalarMap[str, str]
    extra_mounts: _containers.RepeatedCompositeFieldContainer[_proto_pb2.Mount]
    extra_config: _struct_pb2.Struct
    cloud_provider_external: bool
    default_runtime_seccomp_enabled: bool
    skip_node_registration: bool
    static_pod_list_url: str
    disable_manifests_directory: bool
    enable_fs_quota_monitoring: bool
    credential_provider_config: _struct_pb2.Struct
    def __init__(self, image: _Optional[str] = ..., cluster_dns: _Optional[_Iterable[str]] = ..., cluster_domain: _Optional[str] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., extra_mounts: _Optional[_Iterable[_Union[_proto_pb2.Mount, _Mapping]]] = ..., extra_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., cloud_provider_external: _Optional[bool] = ..., default_runtime_seccomp_enabled: _Optional[bool] = ..., skip_node_registration: _Optional[bool] = ..., static_pod_list_url: _Optional[str] = ..., disable_manifests_directory: _Optional[bool] = ..., enable_fs_quota_monitoring: _Optional[bool] = ..., credential_provider_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class KubeletSpecSpec(_message.Message):
    __slots__ = ("image", "args", "extra_mounts", "expected_nodename", "config", "credential_provider_config")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_MOUNTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_NODENAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_PROVIDER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    image: str
    args: _containers.RepeatedScalarFieldContainer[str]
    extra_mounts: _containers.RepeatedCompositeFieldContainer[_proto_pb2.Mount]
    expected_nodename: str
    config: _struct_pb2.Struct
    credential_provider_config: _struct_pb2.Struct
    def __init__(self, image: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., extra_mounts: _Optional[_Iterable[_Union[_proto_pb2.Mount, _Mapping]]] = ..., expected_nodename: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., credential_provider_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ManifestSpec(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SingleManifest]
    def __init__(self, items: _Optional[_Iterable[_Union[SingleManifest, _Mapping]]] = ...) -> None: ...

class ManifestStatusSpec(_message.Message):
    __slots__ = ("manifests_applied",)
    MANIFESTS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    manifests_applied: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, manifests_applied: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeIPConfigSpec(_message.Message):
    __slots__ = ("valid_subnets", "exclude_subnets")
    VALID_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    valid_subnets: _containers.RepeatedScalarFieldContainer[str]
    exclude_subnets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, valid_subnets: _Optional[_Iterable[str]] = ..., exclude_subnets: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeIPSpec(_message.Message):
    __slots__ = ("addresses",)
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    def __init__(self, addresses: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ...) -> None: ...

class NodeLabelSpecSpec(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class NodeStatusSpec(_message.Message):
    __slots__ = ("nodename", "node_ready", "unschedulable", "labels", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    NODE_READY_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    nodename: str
    node_ready: bool
    unschedulable: bool
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, nodename: _Optional[str] = ..., node_ready: _Optional[bool] = ..., unschedulable: _Optional[bool] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class NodeTaintSpecSpec(_message.Message):
    __slots__ = ("key", "effect", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    effect: str
    value: str
    def __init__(self, key: _Optional[str] = ..., effect: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class NodenameSpec(_message.Message):
    __slots__ = ("nodename", "hostname_version", "skip_node_registration")
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_VERSION_FIELD_NUMBER: _ClassVar[int]
    SKIP_NODE_REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    nodename: str
    hostname_version: str
    skip_node_registration: bool
    def __init__(self, nodename: _Optional[str] = ..., hostname_version: _Optional[str] = ..., skip_node_registration: _Optional[bool] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("requests", "limits")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.ScalarMap[str, str]
    limits: _containers.ScalarMap[str, str]
    def __init__(self, requests: _Optional[_Mapping[str, str]] = ..., limits: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SchedulerConfigSpec(_message.Message):
    __slots__ = ("enabled", "image", "extra_args", "extra_volumes", "environment_variables", "resources", "config")
    class ExtraArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EnvironmentVariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    image: str
    extra_args: _containers.ScalarMap[str, str]
    extra_volumes: _containers.RepeatedCompositeFieldContainer[ExtraVolume]
    environment_variables: _containers.ScalarMap[str, str]
    resources: Resources
    config: _struct_pb2.Struct
    def __init__(self, enabled: _Optional[bool] = ..., image: _Optional[str] = ..., extra_args: _Optional[_Mapping[str, str]] = ..., extra_volumes: _Optional[_Iterable[_Union[ExtraVolume, _Mapping]]] = ..., environment_variables: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SecretsStatusSpec(_message.Message):
    __slots__ = ("ready", "version")
    READY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    version: str
    def __init__(self, ready: _Optional[bool] = ..., version: _Optional[str] = ...) -> None: ...

class SingleManifest(_message.Message):
    __slots__ = ("object",)
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    object: _struct_pb2.Struct
    def __init__(self, object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StaticPodServerStatusSpec(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class StaticPodSpec(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: _struct_pb2.Struct
    def __init__(self, pod: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StaticPodStatusSpec(_message.Message):
    __slots__ = ("pod_status",)
    POD_STATUS_FIELD_NUMBER: _ClassVar[int]
    pod_status: _struct_pb2.Struct
    def __init__(self, pod_status: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
