"""Talos 1.7's per-feature views of the machine config, and the devices' readiness.

* ``KubeSpanConfigs`` (namespace ``config``, id ``kubespan``, sensitive: it holds the cluster
  secret): ``machine.network.kubespan`` with the cluster id and secret, Talos's defaults applied
  (``mtu`` 1420, ``forceRouting`` unless ``allowDownPeerBypass``);
* ``KubernetesAccessConfigs`` (namespace ``config``, id ``config``, control planes only):
  ``machine.features.kubernetesTalosAPIAccess``;
* ``KubeletSecrets`` (namespace ``secrets``, id ``kubelet``, sensitive): the API server the kubelet
  bootstraps against, the CAs it accepts and the bootstrap token;
* ``SeccompProfiles`` (namespace ``cri``, id = the profile's name): ``machine.seccompProfiles``,
  written for the kubelet as ``/var/lib/kubelet/seccomp/profiles/<name>``;
* ``DevicesStatuses`` (namespace ``runtime``, id ``devices``): the node's devices are ready (Talos
  waits for udevd on metal; in a container they are always ready);
* ``MaintenanceServiceConfigs`` (namespace ``runtime``, id ``maintenance``): where the maintenance
  API listens and the addresses a client can reach it at; ``MaintenanceServiceRequests`` (same id,
  no spec): present while the machine waits in maintenance mode for a config.

Types only; ``controllers.feature_configs`` fills them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ichor.machined.cosi import EmptySpec, PrintColumn, ResourceType
from ichor.machined.resources._secrets import PEMCertificate

__all__ = [
    "DEVICES_STATUSES",
    "DEVICES_STATUS_ID",
    "FEATURE_CONFIG_TYPES",
    "KUBELET_SECRETS",
    "KUBELET_SECRETS_ID",
    "KUBERNETES_ACCESS_CONFIGS",
    "KUBERNETES_ACCESS_CONFIG_ID",
    "KUBESPAN_CONFIGS",
    "KUBESPAN_CONFIG_ID",
    "MAINTENANCE_SERVICE_CONFIGS",
    "MAINTENANCE_SERVICE_CONFIG_ID",
    "MAINTENANCE_SERVICE_REQUESTS",
    "MAINTENANCE_SERVICE_REQUEST_ID",
    "SECCOMP_PROFILES",
    "DevicesStatusSpec",
    "KubeSpanConfigSpec",
    "KubeletSecretsSpec",
    "KubernetesAccessConfigSpec",
    "MaintenanceServiceConfigSpec",
    "SeccompProfileSpec",
]

KUBESPAN_CONFIG_ID = "kubespan"
KUBERNETES_ACCESS_CONFIG_ID = "config"
KUBELET_SECRETS_ID = "kubelet"
DEVICES_STATUS_ID = "devices"
MAINTENANCE_SERVICE_CONFIG_ID = "maintenance"
MAINTENANCE_SERVICE_REQUEST_ID = "maintenance"


@dataclasses.dataclass(frozen=True)
class KubeSpanConfigSpec:
    enabled: bool = False
    cluster_id: str = dataclasses.field(default="", metadata={"yaml": "clusterId"})
    shared_secret: str = ""
    force_routing: bool = False
    advertise_kubernetes_networks: bool = False
    mtu: int = dataclasses.field(default=0, metadata={"omitempty": True})
    endpoint_filters: tuple[str, ...] = dataclasses.field(default=(), metadata={"omitempty": True})
    harvest_extra_endpoints: bool = False


@dataclasses.dataclass(frozen=True)
class KubernetesAccessConfigSpec:
    enabled: bool = False
    allowed_api_roles: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "allowedAPIRoles"})
    allowed_kubernetes_namespaces: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class KubeletSecretsSpec:
    endpoint: str = dataclasses.field(default="", metadata={"url": True})
    """A URL, shown as Go's ``*url.URL`` struct in the YAML, as Talos's is."""
    accepted_cas: tuple[PEMCertificate, ...] = dataclasses.field(default=(), metadata={"yaml": "acceptedCAs"})
    bootstrap_token_id: str = dataclasses.field(default="", metadata={"yaml": "bootstrapTokenID"})
    bootstrap_token_secret: str = ""


@dataclasses.dataclass(frozen=True)
class SeccompProfileSpec:
    name: str = ""
    value: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class DevicesStatusSpec:
    ready: bool = False


@dataclasses.dataclass(frozen=True)
class MaintenanceServiceConfigSpec:
    listen_address: str = ""
    reachable_addresses: tuple[str, ...] = ()


KUBESPAN_CONFIGS: ResourceType[KubeSpanConfigSpec] = ResourceType(
    type="KubeSpanConfigs.kubespan.talos.dev", default_namespace="config", spec_class=KubeSpanConfigSpec,
    sensitive=True,
)  # fmt: skip
KUBERNETES_ACCESS_CONFIGS: ResourceType[KubernetesAccessConfigSpec] = ResourceType(
    type="KubernetesAccessConfigs.cluster.talos.dev", default_namespace="config",
    spec_class=KubernetesAccessConfigSpec,
)  # fmt: skip
KUBELET_SECRETS: ResourceType[KubeletSecretsSpec] = ResourceType(
    type="KubeletSecrets.secrets.talos.dev", default_namespace="secrets", spec_class=KubeletSecretsSpec,
    sensitive=True,
)  # fmt: skip
SECCOMP_PROFILES: ResourceType[SeccompProfileSpec] = ResourceType(
    type="SeccompProfiles.cri.talos.dev", default_namespace="cri", spec_class=SeccompProfileSpec
)
DEVICES_STATUSES: ResourceType[DevicesStatusSpec] = ResourceType(
    type="DevicesStatuses.runtime.talos.dev", default_namespace="runtime", spec_class=DevicesStatusSpec,
    print_columns=(PrintColumn("Ready", "{.ready}"),),
)  # fmt: skip

MAINTENANCE_SERVICE_CONFIGS: ResourceType[MaintenanceServiceConfigSpec] = ResourceType(
    type="MaintenanceServiceConfigs.runtime.talos.dev", default_namespace="runtime",
    spec_class=MaintenanceServiceConfigSpec,
)  # fmt: skip

MAINTENANCE_SERVICE_REQUESTS: ResourceType[EmptySpec] = ResourceType(
    type="MaintenanceServiceRequests.runtime.talos.dev", default_namespace="runtime", spec_class=EmptySpec
)

FEATURE_CONFIG_TYPES: tuple[ResourceType[Any], ...] = (
    KUBESPAN_CONFIGS, KUBERNETES_ACCESS_CONFIGS, KUBELET_SECRETS, SECCOMP_PROFILES, DEVICES_STATUSES,
    MAINTENANCE_SERVICE_CONFIGS, MAINTENANCE_SERVICE_REQUESTS,
)  # fmt: skip
