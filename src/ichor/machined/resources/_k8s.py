"""Resources of a node's Kubernetes control plane, with Talos 1.7's type names, namespaces and keys.

* namespace ``secrets``: ``KubernetesRootSecrets`` ``k8s`` (the CAs, keys and tokens of
  ``cluster.*``), ``CertSANs`` ``k8s`` (the apiserver certificate's SANs), ``KubernetesDynamicCerts``
  ``k8s-dynamic-certs`` (apiserver serving, apiserver-kubelet-client, front-proxy-client and the
  apiserver's etcd client certificates) and ``KubernetesSecrets`` ``k8s-certs`` (the kubeconfigs of
  the controller-manager, the scheduler and the localhost admin);
* namespace ``controlplane``: the component configs (``APIServerConfigs`` ``kube-apiserver``, ...),
  ``SecretStatuses``/``ConfigStatuses`` ``static-pods`` (the files under ``/system/secrets/kubernetes``
  and ``/system/config/kubernetes`` are written, at which versions);
* namespace ``k8s``: ``StaticPods`` (a pod as the kubelet reads it), ``StaticPodStatuses`` (a mirror
  pod's status), ``StaticPodServerStatuses`` (the URL of the PodList the kubelet polls).

This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._secrets import (
    SECRETS_NAMESPACE,
    IPAddress,
    PEMCertificate,
    PEMCertificateAndKey,
    PEMKey,
)

__all__ = [
    "ADMISSION_CONTROL_CONFIGS",
    "ADMISSION_CONTROL_ID",
    "APISERVER_CONFIGS",
    "APISERVER_ID",
    "AUDIT_POLICY_CONFIGS",
    "AUDIT_POLICY_ID",
    "CERT_SAN_K8S_ID",
    "CONFIG_STATUSES",
    "CONTROLLER_MANAGER_CONFIGS",
    "CONTROLLER_MANAGER_ID",
    "CONTROLPLANE_NS",
    "K8S_DYNAMIC_CERTS",
    "K8S_DYNAMIC_CERTS_ID",
    "K8S_NAMESPACE",
    "K8S_ROOT_ID",
    "K8S_ROOT_SECRETS",
    "K8S_SECRETS",
    "K8S_SECRETS_ID",
    "K8S_TYPES",
    "SCHEDULER_CONFIGS",
    "SCHEDULER_ID",
    "SECRETS_STATUSES",
    "STATIC_PODS",
    "STATIC_PODS_STATUS_ID",
    "STATIC_POD_SERVER_STATUSES",
    "STATIC_POD_SERVER_STATUS_ID",
    "STATIC_POD_STATUSES",
    "APIServerConfigSpec",
    "AdmissionControlConfigSpec",
    "AdmissionPluginSpec",
    "AuditPolicyConfigSpec",
    "ControllerManagerConfigSpec",
    "ExtraVolume",
    "KubernetesDynamicCertsSpec",
    "KubernetesRootSpec",
    "KubernetesSecretsSpec",
    "ResourcesSpec",
    "SchedulerConfigSpec",
    "StaticPodServerStatusSpec",
    "StaticPodSpec",
    "StaticPodStatusSpec",
    "VersionStatusSpec",
]

K8S_NAMESPACE = "k8s"
CONTROLPLANE_NS = "controlplane"
K8S_ROOT_ID = "k8s"
CERT_SAN_K8S_ID = "k8s"
K8S_DYNAMIC_CERTS_ID = "k8s-dynamic-certs"
K8S_SECRETS_ID = "k8s-certs"
APISERVER_ID = "kube-apiserver"
CONTROLLER_MANAGER_ID = "kube-controller-manager"
SCHEDULER_ID = "kube-scheduler"
ADMISSION_CONTROL_ID = "admission-control"
AUDIT_POLICY_ID = "audit-policy"
STATIC_PODS_STATUS_ID = "static-pods"
STATIC_POD_SERVER_STATUS_ID = "static-pod-server-status"


# -- secrets ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KubernetesRootSpec:
    """What a control plane's Kubernetes PKI is made from (``cluster.*`` of the machine config)."""

    name: str = ""
    endpoint: str = dataclasses.field(default="", metadata={"url": True})
    local_endpoint: str = dataclasses.field(default="", metadata={"yaml": "local_endpoint", "url": True})
    cert_sans: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "certSANs"})
    api_server_ips: tuple[IPAddress, ...] = dataclasses.field(default=(), metadata={"yaml": "apiServerIPs"})
    dns_domain: str = dataclasses.field(default="", metadata={"yaml": "dnsDomain"})
    issuing_ca: PEMCertificateAndKey | None = dataclasses.field(default=None, metadata={"yaml": "issuingCA"})
    accepted_cas: tuple[PEMCertificate, ...] = dataclasses.field(default=(), metadata={"yaml": "acceptedCAs"})
    aggregator_ca: PEMCertificateAndKey | None = dataclasses.field(
        default=None, metadata={"yaml": "aggregatorCA"}
    )
    service_account: PEMKey | None = dataclasses.field(default=None, metadata={"yaml": "serviceAccount"})
    aescbc_encryption_secret: str = dataclasses.field(default="", metadata={"yaml": "aesCBCEncryptionSecret"})
    secretbox_encryption_secret: str = dataclasses.field(
        default="", metadata={"yaml": "secretboxEncryptionSecret"}
    )
    bootstrap_token_id: str = dataclasses.field(default="", metadata={"yaml": "bootstrapTokenID"})
    bootstrap_token_secret: str = dataclasses.field(default="", metadata={"yaml": "bootstrapTokenSecret"})


@dataclasses.dataclass(frozen=True)
class KubernetesDynamicCertsSpec:
    """Certificates that change with the node's addresses (``api_server``) or are issued per node."""

    api_server: PEMCertificateAndKey | None = dataclasses.field(default=None, metadata={"yaml": "apiServer"})
    api_server_kubelet_client: PEMCertificateAndKey | None = dataclasses.field(
        default=None, metadata={"yaml": "apiServerKubeletClient"}
    )
    front_proxy: PEMCertificateAndKey | None = dataclasses.field(
        default=None, metadata={"yaml": "frontProxy"}
    )
    etcd_api_server: PEMCertificateAndKey | None = dataclasses.field(
        default=None, metadata={"yaml": "etcdAPIServer"}
    )


@dataclasses.dataclass(frozen=True)
class KubernetesSecretsSpec:
    scheduler_kubeconfig: str = dataclasses.field(default="", metadata={"yaml": "schedulerKubeconfig"})
    controller_manager_kubeconfig: str = dataclasses.field(
        default="", metadata={"yaml": "controllerManagerKubeconfig"}
    )
    localhost_admin_kubeconfig: str = dataclasses.field(
        default="", metadata={"yaml": "localhostAdminKubeconfig"}
    )


# -- control plane configs ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExtraVolume:
    name: str
    host_path: str = dataclasses.field(metadata={"yaml": "hostPath"})
    mount_path: str = dataclasses.field(metadata={"yaml": "mountPath"})
    read_only: bool = dataclasses.field(default=False, metadata={"yaml": "readonly"})


@dataclasses.dataclass(frozen=True)
class ResourcesSpec:
    requests: dict[str, str] = dataclasses.field(default_factory=dict)
    limits: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class APIServerConfigSpec:
    image: str = ""
    cloud_provider: str = ""
    control_plane_endpoint: str = dataclasses.field(default="", metadata={"yaml": "controlPlaneEndpoint"})
    etcd_servers: tuple[str, ...] = ()
    local_port: int = 6443
    service_cidrs: tuple[str, ...] = dataclasses.field(
        default=(), metadata={"yaml": "serviceCIDR"}
    )  # Talos's key
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)
    extra_volumes: tuple[ExtraVolume, ...] = ()
    environment_variables: dict[str, str] = dataclasses.field(default_factory=dict)
    pod_security_policy_enabled: bool = False
    advertised_address: str = ""
    resources: ResourcesSpec = dataclasses.field(default_factory=ResourcesSpec)


@dataclasses.dataclass(frozen=True)
class ControllerManagerConfigSpec:
    enabled: bool = True
    image: str = ""
    cloud_provider: str = ""
    pod_cidrs: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "podCIDRs"})
    service_cidrs: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "serviceCIDRs"})
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)
    extra_volumes: tuple[ExtraVolume, ...] = ()
    environment_variables: dict[str, str] = dataclasses.field(default_factory=dict)
    resources: ResourcesSpec = dataclasses.field(default_factory=ResourcesSpec)


@dataclasses.dataclass(frozen=True)
class SchedulerConfigSpec:
    enabled: bool = True
    image: str = ""
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)
    extra_volumes: tuple[ExtraVolume, ...] = ()
    environment_variables: dict[str, str] = dataclasses.field(default_factory=dict)
    resources: ResourcesSpec = dataclasses.field(default_factory=ResourcesSpec)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class AdmissionPluginSpec:
    name: str
    configuration: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class AdmissionControlConfigSpec:
    config: tuple[AdmissionPluginSpec, ...] = ()


@dataclasses.dataclass(frozen=True)
class AuditPolicyConfigSpec:
    config: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class VersionStatusSpec:
    """``SecretsStatus``/``ConfigStatus``: the files are written (``ready``) from these versions."""

    ready: bool = False
    version: str = ""


# -- static pods ------------------------------------------------------------------------------------


class _MappingSpec(Mapping[str, Any]):
    """A spec whose YAML is a Kubernetes object itself (Talos marshals these specs as the object)."""

    def __init__(self, value: Mapping[str, Any] | None = None) -> None:
        self._value: dict[str, Any] = dict(value or {})

    def __getitem__(self, key: str) -> Any:
        return self._value[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and dict(other) == self._value

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value!r})"


class StaticPodSpec(_MappingSpec):
    """A pod manifest (``apiVersion: v1, kind: Pod``) as the kubelet reads it."""

    @property
    def pod(self) -> dict[str, Any]:
        return self._value


class StaticPodStatusSpec(_MappingSpec):
    """A mirror pod's ``status`` as the kubelet reports it (a PodStatus)."""

    @property
    def pod_status(self) -> dict[str, Any]:
        return self._value


@dataclasses.dataclass(frozen=True)
class StaticPodServerStatusSpec:
    url: str = dataclasses.field(default="", metadata={"yaml": "url"})


def _secret(type_name: str, spec: type[Any]) -> ResourceType[Any]:
    return ResourceType(type=type_name, default_namespace=SECRETS_NAMESPACE, spec_class=spec, sensitive=True)


def _controlplane(type_name: str, spec: type[Any], **kwargs: Any) -> ResourceType[Any]:
    return ResourceType(type=type_name, default_namespace=CONTROLPLANE_NS, spec_class=spec, **kwargs)


K8S_ROOT_SECRETS: ResourceType[KubernetesRootSpec] = _secret(
    "KubernetesRootSecrets.secrets.talos.dev", KubernetesRootSpec
)
K8S_DYNAMIC_CERTS: ResourceType[KubernetesDynamicCertsSpec] = _secret(
    "KubernetesDynamicCerts.secrets.talos.dev", KubernetesDynamicCertsSpec
)
K8S_SECRETS: ResourceType[KubernetesSecretsSpec] = _secret(
    "KubernetesSecrets.secrets.talos.dev", KubernetesSecretsSpec
)
APISERVER_CONFIGS: ResourceType[APIServerConfigSpec] = _controlplane(
    "APIServerConfigs.kubernetes.talos.dev", APIServerConfigSpec
)
CONTROLLER_MANAGER_CONFIGS: ResourceType[ControllerManagerConfigSpec] = _controlplane(
    "ControllerManagerConfigs.kubernetes.talos.dev", ControllerManagerConfigSpec
)
SCHEDULER_CONFIGS: ResourceType[SchedulerConfigSpec] = _controlplane(
    "SchedulerConfigs.kubernetes.talos.dev", SchedulerConfigSpec
)
ADMISSION_CONTROL_CONFIGS: ResourceType[AdmissionControlConfigSpec] = _controlplane(
    "AdmissionControlConfigs.kubernetes.talos.dev", AdmissionControlConfigSpec
)
AUDIT_POLICY_CONFIGS: ResourceType[AuditPolicyConfigSpec] = _controlplane(
    "AuditPolicyConfigs.kubernetes.talos.dev", AuditPolicyConfigSpec, sensitive=True
)
SECRETS_STATUSES: ResourceType[VersionStatusSpec] = _controlplane(
    "SecretStatuses.kubernetes.talos.dev", VersionStatusSpec,
    print_columns=(PrintColumn("Ready", "{.ready}"), PrintColumn("Secrets Version", "{.version}")),
)  # fmt: skip
CONFIG_STATUSES: ResourceType[VersionStatusSpec] = _controlplane(
    "ConfigStatuses.kubernetes.talos.dev", VersionStatusSpec,
    print_columns=(PrintColumn("Ready", "{.ready}"), PrintColumn("Secrets Version", "{.version}")),
)  # fmt: skip
STATIC_PODS: ResourceType[StaticPodSpec] = ResourceType(
    type="StaticPods.kubernetes.talos.dev", default_namespace=K8S_NAMESPACE, spec_class=StaticPodSpec
)
STATIC_POD_STATUSES: ResourceType[StaticPodStatusSpec] = ResourceType(
    type="StaticPodStatuses.kubernetes.talos.dev", default_namespace=K8S_NAMESPACE, aliases=("podstatus",),
    spec_class=StaticPodStatusSpec, print_columns=(PrintColumn("Ready", '{.conditions[?(@.type=="Ready")].status}'),),
)  # fmt: skip
STATIC_POD_SERVER_STATUSES: ResourceType[StaticPodServerStatusSpec] = ResourceType(
    type="StaticPodServerStatuses.kubernetes.talos.dev", default_namespace=K8S_NAMESPACE,
    spec_class=StaticPodServerStatusSpec,
)  # fmt: skip

K8S_TYPES: tuple[ResourceType[Any], ...] = (
    K8S_ROOT_SECRETS,
    K8S_DYNAMIC_CERTS,
    K8S_SECRETS,
    APISERVER_CONFIGS,
    CONTROLLER_MANAGER_CONFIGS,
    SCHEDULER_CONFIGS,
    ADMISSION_CONTROL_CONFIGS,
    AUDIT_POLICY_CONFIGS,
    SECRETS_STATUSES,
    CONFIG_STATUSES,
    STATIC_PODS,
    STATIC_POD_STATUSES,
    STATIC_POD_SERVER_STATUSES,
)
