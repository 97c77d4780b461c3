from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class APICertsSpec(_message.Message):
    __slots__ = ("client", "server", "accepted_c_as")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_C_AS_FIELD_NUMBER: _ClassVar[int]
    client: _common_pb2.PEMEncodedCertificateAndKey
    server: _common_pb2.PEMEncodedCertificateAndKey
    accepted_c_as: _containers.RepeatedCompositeFieldContainer[_common_pb2.PEMEncodedCertificate]
    def __init__(self, client: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., server: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., accepted_c_as: _Optional[_Iterable[_Union[_common_pb2.PEMEncodedCertificate, _Mapping]]] = ...) -> None: ...

class CertSANSpec(_message.Message):
    __slots__ = ("i_ps", "dns_names", "fqdn")
    I_PS_FIELD_NUMBER: _ClassVar[int]
    DNS_NAMES_FIELD_NUMBER: _ClassVar[int]
    FQDN_FIELD_NUMBER: _ClassVar[int]
    i_ps: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    dns_names: _containers.RepeatedScalarFieldContainer[str]
    fqdn: str
    def __init__(self, i_ps: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., dns_names: _Optional[_Iterable[str]] = ..., fqdn: _Optional[str] = ...) -> None: ...

class EtcdCertsSpec(_message.Message):
    __slots__ = ("etcd", "etcd_peer", "etcd_admin", "etcd_api_server")
    ETCD_FIELD_NUMBER: _ClassVar[int]
    ETCD_PEER_FIELD_NUMBER: _ClassVar[int]
    ETCD_ADMIN_FIELD_NUMBER: _ClassVar[int]
    ETCD_API_SERVER_FIELD_NUMBER: _ClassVar[int]
    etcd: _common_pb2.PEMEncodedCertificateAndKey
    etcd_peer: _common_pb2.PEMEncodedCertificateAndKey
    etcd_admin: _common_pb2.PEMEncodedCertificateAndKey
    etcd_api_server: _common_pb2.PEMEncodedCertificateAndKey
    def __init__(self, etcd: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., etcd_peer: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., etcd_admin: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., etcd_api_server: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ...) -> None: ...

class EtcdRootSpec(_message.Message):
    __slots__ = ("etcd_ca",)
    ETCD_CA_FIELD_NUMBER: _ClassVar[int]
    etcd_ca: _common_pb2.PEMEncodedCertificateAndKey
    def __init__(self, etcd_ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ...) -> None: ...

class KubeletSpec(_message.Message):
    __slots__ = ("endpoint", "bootstrap_token_id", "bootstrap_token_secret", "accepted_c_as")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_TOKEN_SECRET_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_C_AS_FIELD_NUMBER: _ClassVar[int]
    endpoint: _common_pb2.URL
    bootstrap_token_id: str
    bootstrap_token_secret: str
    accepted_c_as: _containers.RepeatedCompositeFieldContainer[_common_pb2.PEMEncodedCertificate]
    def __init__(self, endpoint: _Optional[_Union[_common_pb2.URL, _Mapping]] = ..., bootstrap_token_id: _Optional[str] = ..., bootstrap_token_secret: _Optional[str] = ..., accepted_c_as: _Optional[_Iterable[_Union[_common_pb2.PEMEncodedCertificate, _Mapping]]] = ...) -> None: ...

class KubernetesCertsSpec(_message.Message):
    __slots__ = ("scheduler_kubeconfig", "controller_manager_kubeconfig", "localhost_admin_kubeconfig", "admin_kubeconfig")
    SCHEDULER_KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_MANAGER_KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    LOCALHOST_ADMIN_KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    ADMIN_KUBECONFIG_FIELD_NUMBER: _ClassVar[int]
    scheduler_kubeconfig: str
    controller_manager_kubeconfig: str
    localhost_admin_kubeconfig: str
    admin_kubeconfig: str
    def __init__(self, scheduler_kubeconfig: _Optional[str] = ..., controller_manager_kubeconfig: _Optional[str] = ..., localhost_admin_kubeconfig: _Optional[str] = ..., admin_kubeconfig: _Optional[str] = ...) -> None: ...

class KubernetesDynamicCertsSpec(_message.Message):
    __slots__ = ("api_server", "api_server_kubelet_client", "front_proxy")
    API_SERVER_FIELD_NUMBER: _ClassVar[int]
    API_SERVER_KUBELET_CLIENT_FIELD_NUMBER: _ClassVar[int]
    FRONT_PROXY_FIELD_NUMBER: _ClassVar[int]
    api_server: _common_pb2.PEMEncodedCertificateAndKey
    api_server_kubelet_client: _common_pb2.PEMEncodedCertificateAndKey
    front_proxy: _common_pb2.PEMEncodedCertificateAndKey
    def __init__(self, api_server: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., api_server_kubelet_client: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., front_proxy: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ...) -> None: ...

class KubernetesRootSpec(_message.Message):
    __slots__ = ("name", "endpoint", "local_endpoint", "cert_sa_ns", "dns_domain", "issuing_ca", "service_account", "aggregator_ca", "aescbc_encryption_secret", "bootstrap_token_id", "bootstrap_token_secret", "secretbox_encryption_secret", "api_server_ips", "accepted_c_as")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CERT_SA_NS_FIELD_NUMBER: _ClassVar[int]
    DNS_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    ISSUING_CA_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_CA_FIELD_NUMBER: _ClassVar[int]
    AESCBC_ENCRYPTION_SECRET_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_TOKEN_SECRET_FIELD_NUMBER: _ClassVar[int]
    SECRETBOX_ENCRYPTION_SECRET_FIELD_NUMBER: _ClassVar[int]
    API_SERVER_IPS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_C_AS_FIELD_NUMBER: _ClassVar[int]
    name: str
    endpoint: _common_pb2.URL
    local_endpoint: _common_pb2.URL
    cert_sa_ns: _containers.RepeatedScalarFieldContainer[str]
    dns_domain: str
    issuing_ca: _common_pb2.PEMEncodedCertificateAndKey
    service_account: _common_pb2.PEMEncodedKey
    aggregator_ca: _common_pb2.PEMEncodedCertificateAndKey
    aescbc_encryption_secret: str
    bootstrap_token_id: str
    bootstrap_token_secret: str
    secretbox_encryption_secret: str
    api_server_ips: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    accepted_c_as: _containers.RepeatedCompositeFieldContainer[_common_pb2.PEMEncodedCertificate]
    def __init__(self, name: _Optional[str] = ..., endpoint: _Optional[_Union[_common_pb2.URL, _Mapping]] = ..., local_endpoint: _Optional[_Union[_common_pb2.URL, _Mapping]] = ..., cert_sa_ns: _Optional[_Iterable[str]] = ..., dns_domain: _Optional[str] = ..., issuing_ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., service_account: _Optional[_Union[_common_pb2.PEMEncodedKey, _Mapping]] = ..., aggregator_ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., aescbc_encryption_secret: _Optional[str] = ..., bootstrap_token_id: _Optional[str] = ..., bootstrap_token_secret: _Optional[str] = ..., secretbox_encryption_secret: _Optional[str] = ..., api_server_ips: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., accepted_c_as: _Optional[_Iterable[_Union[_common_pb2.PEMEncodedCertificate, _Mapping]]] = ...) -> None: ...

class MaintenanceRootSpec(_message.Message):
    __slots__ = ("ca",)
    CA_FIELD_NUMBER: _ClassVar[int]
    ca: _common_pb2.PEMEncodedCertificateAndKey
    def __init__(self, ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ...) -> None: ...

class MaintenanceServiceCertsSpec(_message.Message):
    __slots__ = ("ca", "server")
    CA_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    ca: _common_pb2.PEMEncodedCertificateAndKey
    server: _common_pb2.PEMEncodedCertificateAndKey
    def __init__(self, ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., server: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ...) -> None: ...

class OSRootSpec(_message.Message):
    __slots__ = ("issuing_ca", "cert_sani_ps", "cert_sandns_names", "token", "accepted_c_as")
    ISSUING_CA_FIELD_NUMBER: _ClassVar[int]
    CERT_SANI_PS_FIELD_NUMBER: _ClassVar[int]
    CERT_SANDNS_NAMES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_C_AS_FIELD_NUMBER: _ClassVar[int]
    issuing_ca: _common_pb2.PEMEncodedCertificateAndKey
    cert_sani_ps: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    cert_sandns_names: _containers.RepeatedScalarFieldContainer[str]
    token: str
    accepted_c_as: _containers.RepeatedCompositeFieldContainer[_common_pb2.PEMEncodedCertificate]
    def __init__(self, issuing_ca: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., cert_sani_ps: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., cert_sandns_names: _Optional[_Iterable[str]] = ..., token: _Optional[str] = ..., accepted_c_as: _Optional[_Iterable[_Union[_common_pb2.PEMEncodedCertificate, _Mapping]]] = ...) -> None: ...

class TrustdCertsSpec(_message.Message):
    __slots__ = ("server", "accepted_c_as")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_C_AS_FIELD_NUMBER: _ClassVar[int]
    server: _common_pb2.PEMEncodedCertificateAndKey
    accepted_c_as: _containers.RepeatedCompositeFieldContainer[_common_pb2.PEMEncodedCertificate]
    def __init__(self, server: _Optional[_Union[_common_pb2.PEMEncodedCertificateAndKey, _Mapping]] = ..., accepted_c_as: _Optional[_Iterable[_Union[_common_pb2.PEMEncodedCertificate, _Mapping]]] = ...) -> None: ...
