"""Resources of KubePrism, the node-local API server load balancer, declared as Talos 1.7 does.

All three are singletons in namespace ``k8s``: ``KubePrismEndpoints`` (id ``k8s-cluster``, every
API server this node may reach), ``KubePrismConfigs`` (id ``k8s-loadbalancer-config``, where the
balancer listens and the endpoints it balances; present only while
``machine.features.kubePrism.enabled``) and ``KubePrismStatuses`` (id ``k8s-loadbalancer``, its
``host:port`` and whether any upstream is healthy).

This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "K8S_NAMESPACE",
    "KUBEPRISM_CONFIGS",
    "KUBEPRISM_CONFIG_ID",
    "KUBEPRISM_ENDPOINTS",
    "KUBEPRISM_ENDPOINTS_ID",
    "KUBEPRISM_STATUSES",
    "KUBEPRISM_STATUSES_ID",
    "KUBEPRISM_TYPES",
    "KubePrismConfigSpec",
    "KubePrismEndpoint",
    "KubePrismEndpointsSpec",
    "KubePrismStatusesSpec",
]

K8S_NAMESPACE = "k8s"
KUBEPRISM_ENDPOINTS_ID = "k8s-cluster"
KUBEPRISM_CONFIG_ID = "k8s-loadbalancer-config"
KUBEPRISM_STATUSES_ID = "k8s-loadbalancer"


@dataclasses.dataclass(frozen=True)
class KubePrismEndpoint:
    host: str
    port: int


@dataclasses.dataclass(frozen=True)
class KubePrismEndpointsSpec:
    endpoints: tuple[KubePrismEndpoint, ...] = ()


@dataclasses.dataclass(frozen=True)
class KubePrismConfigSpec:
    host: str = ""
    port: int = 0
    endpoints: tuple[KubePrismEndpoint, ...] = ()


@dataclasses.dataclass(frozen=True)
class KubePrismStatusesSpec:
    host: str = ""
    """The balancer's ``host:port``."""
    healthy: bool = False


KUBEPRISM_ENDPOINTS: ResourceType[KubePrismEndpointsSpec] = ResourceType(
    type="KubePrismEndpoints.kubernetes.talos.dev",
    default_namespace=K8S_NAMESPACE,
    spec_class=KubePrismEndpointsSpec,
    print_columns=(
        PrintColumn("Hosts", "{.endpoints[*].host}"),
        PrintColumn("Ports", "{.endpoints[*].port}"),
    ),
)

KUBEPRISM_CONFIGS: ResourceType[KubePrismConfigSpec] = ResourceType(
    type="KubePrismConfigs.kubernetes.talos.dev",
    default_namespace=K8S_NAMESPACE,
    spec_class=KubePrismConfigSpec,
    print_columns=(
        PrintColumn("Host", "{.host}"),
        PrintColumn("Port", "{.port}"),
        PrintColumn("Endpoints", "{.endpoints}"),
    ),
)

KUBEPRISM_STATUSES: ResourceType[KubePrismStatusesSpec] = ResourceType(
    type="KubePrismStatuses.kubernetes.talos.dev",
    default_namespace=K8S_NAMESPACE,
    spec_class=KubePrismStatusesSpec,
    print_columns=(PrintColumn("HOST", "{.host}"), PrintColumn("HEALTHY", "{.healthy}")),
)

KUBEPRISM_TYPES: tuple[ResourceType[Any], ...] = (KUBEPRISM_ENDPOINTS, KUBEPRISM_CONFIGS, KUBEPRISM_STATUSES)
