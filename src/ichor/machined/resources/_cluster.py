"""Resource types of cluster membership, declared as Talos 1.7 declares them.

``Identities``, ``Affiliates``, ``Members`` and ``Infos`` live in namespace ``cluster``; the raw
per-registry affiliates (``service/<node id>``) in ``cluster-raw``; ``DiscoveryConfigs`` in
``config`` (sensitive: it holds the cluster key); the control plane ``Endpoints`` that etcd join
reads in ``controlplane`` with id ``discovery``. Type names, namespaces, print columns and YAML keys
are Talos's, so ``talosctl get members`` prints what it prints against Talos.

This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "AFFILIATES",
    "CLUSTER_NAMESPACE",
    "CLUSTER_TYPES",
    "CONTROLPLANE_NAMESPACE",
    "DISCOVERED_ENDPOINTS_ID",
    "DISCOVERY_CONFIGS",
    "DISCOVERY_CONFIG_ID",
    "DISCOVERY_STATUSES",
    "DISCOVERY_STATUS_ID",
    "ENDPOINTS",
    "IDENTITIES",
    "INFOS",
    "INFO_ID",
    "LOCAL_IDENTITY_ID",
    "MEMBERS",
    "RAW_NAMESPACE",
    "AffiliateSpec",
    "ControlPlaneSpec",
    "DiscoveryConfigSpec",
    "DiscoveryStatusSpec",
    "EndpointSpec",
    "IPAddress",
    "IdentitySpec",
    "InfoSpec",
    "KubeSpanAffiliateSpec",
    "MemberSpec",
]

CLUSTER_NAMESPACE = "cluster"
RAW_NAMESPACE = "cluster-raw"
CONTROLPLANE_NAMESPACE = "controlplane"
LOCAL_IDENTITY_ID = "local"
DISCOVERY_CONFIG_ID = "cluster"
DISCOVERY_STATUS_ID = "local"
INFO_ID = "current"
DISCOVERED_ENDPOINTS_ID = "discovery"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_OMITEMPTY: dict[str, Any] = {"omitempty": True}


@dataclasses.dataclass(frozen=True)
class IdentitySpec:
    """This node's id in the cluster: random, kept in STATE across reboots, new after a wipe."""

    node_id: str = dataclasses.field(metadata={"yaml": "nodeId"})


@dataclasses.dataclass(frozen=True)
class ControlPlaneSpec:
    api_server_port: int = dataclasses.field(default=6443, metadata={"yaml": "port"})


@dataclasses.dataclass(frozen=True)
class KubeSpanAffiliateSpec:
    public_key: str = ""
    address: str = ""
    additional_addresses: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class AffiliateSpec:
    """A node that may be a cluster member (and/or KubeSpan peer), as Talos's ``AffiliateSpec``."""

    node_id: str = dataclasses.field(metadata={"yaml": "nodeId"})
    addresses: tuple[IPAddress, ...] = ()
    hostname: str = ""
    nodename: str = dataclasses.field(default="", metadata=_OMITEMPTY)
    operating_system: str = ""
    machine_type: str = "unknown"
    kubespan: KubeSpanAffiliateSpec | None = dataclasses.field(default=None, metadata=_OMITEMPTY)
    control_plane: ControlPlaneSpec | None = dataclasses.field(default=None, metadata=_OMITEMPTY)

    def merge(self, other: AffiliateSpec) -> AffiliateSpec:
        """Talos's merge of two registries' views of one node: union of addresses, later wins."""
        return dataclasses.replace(
            self,
            addresses=self.addresses + tuple(a for a in other.addresses if a not in self.addresses),
            hostname=other.hostname or self.hostname,
            nodename=other.nodename or self.nodename,
            machine_type=other.machine_type if other.machine_type != "unknown" else self.machine_type,
            operating_system=self.operating_system or other.operating_system,
            kubespan=other.kubespan or self.kubespan,
            control_plane=other.control_plane or self.control_plane,
        )


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    node_id: str = dataclasses.field(metadata={"yaml": "nodeId"})
    addresses: tuple[IPAddress, ...] = ()
    hostname: str = ""
    machine_type: str = "unknown"
    operating_system: str = ""
    control_plane: ControlPlaneSpec | None = dataclasses.field(default=None, metadata=_OMITEMPTY)


@dataclasses.dataclass(frozen=True)
class DiscoveryConfigSpec:
    discovery_enabled: bool = False
    registry_kubernetes_enabled: bool = False
    registry_service_enabled: bool = False
    service_endpoint: str = ""
    service_endpoint_insecure: bool = dataclasses.field(default=False, metadata=_OMITEMPTY)
    service_encryption_key: bytes = b""
    service_cluster_id: str = dataclasses.field(default="", metadata={"yaml": "serviceClusterID"})


@dataclasses.dataclass(frozen=True)
class InfoSpec:
    cluster_id: str = dataclasses.field(default="", metadata={"yaml": "clusterId"})
    cluster_name: str = ""


@dataclasses.dataclass(frozen=True)
class EndpointSpec:
    addresses: tuple[IPAddress, ...] = ()


IDENTITIES: ResourceType[IdentitySpec] = ResourceType(
    type="Identities.cluster.talos.dev",
    default_namespace=CLUSTER_NAMESPACE,
    spec_class=IdentitySpec,
    print_columns=(PrintColumn("ID", "{.nodeId}"),),
)

AFFILIATES: ResourceType[AffiliateSpec] = ResourceType(
    type="Affiliates.cluster.talos.dev",
    default_namespace=CLUSTER_NAMESPACE,
    spec_class=AffiliateSpec,
    print_columns=(
        PrintColumn("Hostname", "{.hostname}"),
        PrintColumn("Machine Type", "{.machineType}"),
        PrintColumn("Addresses", "{.addresses}"),
    ),
)

MEMBERS: ResourceType[MemberSpec] = ResourceType(
    type="Members.cluster.talos.dev",
    default_namespace=CLUSTER_NAMESPACE,
    spec_class=MemberSpec,
    print_columns=(
        PrintColumn("Hostname", "{.hostname}"),
        PrintColumn("Machine Type", "{.machineType}"),
        PrintColumn("OS", "{.operatingSystem}"),
        PrintColumn("Addresses", "{.addresses}"),
    ),
)


@dataclasses.dataclass(frozen=True)
class DiscoveryStatusSpec:
    """This node on the discovery service: published, or (after a reset request) deleted from it."""

    published: bool = False
    left: bool = False


DISCOVERY_STATUSES: ResourceType[DiscoveryStatusSpec] = ResourceType(
    type="DiscoveryStatuses.cluster.ichor.dev",
    default_namespace=CLUSTER_NAMESPACE,
    spec_class=DiscoveryStatusSpec,
    print_columns=(PrintColumn("Published", "{.published}"), PrintColumn("Left", "{.left}")),
)
"""Ichor's own: lets a reset wait until the other nodes were told this node is gone."""

DISCOVERY_CONFIGS: ResourceType[DiscoveryConfigSpec] = ResourceType(
    type="DiscoveryConfigs.cluster.talos.dev",
    default_namespace="config",
    spec_class=DiscoveryConfigSpec,
    sensitive=True,
)

INFOS: ResourceType[InfoSpec] = ResourceType(
    type="Infos.cluster.talos.dev",
    default_namespace=CLUSTER_NAMESPACE,
    spec_class=InfoSpec,
    print_columns=(PrintColumn("Cluster ID", "{.clusterId}"), PrintColumn("Cluster Name", "{.clusterName}")),
)

ENDPOINTS: ResourceType[EndpointSpec] = ResourceType(
    type="Endpoints.kubernetes.talos.dev",
    default_namespace=CONTROLPLANE_NAMESPACE,
    spec_class=EndpointSpec,
    print_columns=(PrintColumn("Addresses", "{.addresses}"),),
)

CLUSTER_TYPES: tuple[ResourceType[Any], ...] = (
    IDENTITIES,
    AFFILIATES,
    MEMBERS,
    DISCOVERY_CONFIGS,
    DISCOVERY_STATUSES,
    INFOS,
    ENDPOINTS,
)
