"""Cluster membership on a node: resource types and the controllers that fill them.

A node gets a random identity (kept in STATE), derives its discovery settings from
``cluster.discovery`` of the machine config, publishes itself as an *affiliate* on the discovery
service (:mod:`ichor.discovery`), and turns every affiliate it sees into a ``Member``;
control plane members' addresses become the ``Endpoints`` ``controlplane/discovery`` that etcd
join reads. ``talosctl get members`` is the same on every node of a cluster.

Wiring (done by the node): :func:`register_cluster_types` on its registry, and each controller of
:func:`cluster_controllers` on its runtime. On reset, set ``MachineStatus`` to ``resetting`` and wait
(bounded) for :attr:`DiscoveryServiceController.left` before wiping STATE.

This package must not import the CLI, and must not start or stop node services.
"""

from __future__ import annotations

from ichor.machined.cluster._controllers import (
    DEFAULT_DISCOVERY_ENDPOINT,
    OPERATING_SYSTEM,
    ClientFactory,
    DiscoveryServiceController,
    affiliate_from_pb,
    affiliate_merge_controller,
    affiliate_to_pb,
    cluster_controllers,
    discovery_config_controller,
    discovery_config_of,
    endpoint_controller,
    info_controller,
    local_affiliate_controller,
    member_controller,
    new_node_id,
    node_identity_controller,
)
from ichor.machined.cluster._types import (
    AFFILIATES,
    CLUSTER_NAMESPACE,
    CLUSTER_TYPES,
    CONTROLPLANE_NAMESPACE,
    DISCOVERED_ENDPOINTS_ID,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    ENDPOINTS,
    IDENTITIES,
    INFO_ID,
    INFOS,
    LOCAL_IDENTITY_ID,
    MEMBERS,
    RAW_NAMESPACE,
    AffiliateSpec,
    ControlPlaneSpec,
    DiscoveryConfigSpec,
    EndpointSpec,
    IdentitySpec,
    InfoSpec,
    IPAddress,
    KubeSpanAffiliateSpec,
    MemberSpec,
    register_cluster_types,
)

__all__ = [
    "AFFILIATES",
    "CLUSTER_NAMESPACE",
    "CLUSTER_TYPES",
    "CONTROLPLANE_NAMESPACE",
    "DEFAULT_DISCOVERY_ENDPOINT",
    "DISCOVERED_ENDPOINTS_ID",
    "DISCOVERY_CONFIGS",
    "DISCOVERY_CONFIG_ID",
    "ENDPOINTS",
    "IDENTITIES",
    "INFOS",
    "INFO_ID",
    "LOCAL_IDENTITY_ID",
    "MEMBERS",
    "OPERATING_SYSTEM",
    "RAW_NAMESPACE",
    "AffiliateSpec",
    "ClientFactory",
    "ControlPlaneSpec",
    "DiscoveryConfigSpec",
    "DiscoveryServiceController",
    "EndpointSpec",
    "IPAddress",
    "IdentitySpec",
    "InfoSpec",
    "KubeSpanAffiliateSpec",
    "MemberSpec",
    "affiliate_from_pb",
    "affiliate_merge_controller",
    "affiliate_to_pb",
    "cluster_controllers",
    "discovery_config_controller",
    "discovery_config_of",
    "endpoint_controller",
    "info_controller",
    "local_affiliate_controller",
    "member_controller",
    "new_node_id",
    "node_identity_controller",
    "register_cluster_types",
]
