"""Cluster membership controllers: identity -> local affiliate -> discovery service -> members -> endpoints.

A node gets a random identity (kept in STATE), derives its discovery settings from
``cluster.discovery``, publishes itself as an *affiliate* on the discovery service
(:mod:`ichor.discovery`), and turns every affiliate it sees into a ``Member``; control plane
members' addresses become the ``Endpoints`` ``controlplane/discovery`` that etcd join reads.
``talosctl get members`` is the same on every node of a cluster.

These controllers only read and write resources (and the identity file); they never touch the
node's services.
"""

from __future__ import annotations

from ichor.machined.controllers.cluster.affiliates import (
    affiliate_merge_controller,
    endpoint_controller,
    local_affiliate_controller,
    member_controller,
)
from ichor.machined.controllers.cluster.config import (
    DEFAULT_DISCOVERY_ENDPOINT,
    discovery_config_controller,
    discovery_config_of,
    info_controller,
    new_node_id,
    node_identity_controller,
)
from ichor.machined.controllers.cluster.discovery import (
    ClientFactory,
    DiscoveryServiceController,
    affiliate_from_pb,
    affiliate_to_pb,
)
from ichor.machined.cosi import Controller
from ichor.machined.platform import Layout

__all__ = [
    "DEFAULT_DISCOVERY_ENDPOINT",
    "ClientFactory",
    "DiscoveryServiceController",
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
]


def cluster_controllers(layout: Layout, *, client_factory: ClientFactory | None = None) -> list[Controller]:
    """Every membership controller, in registration order."""
    return [
        node_identity_controller(layout),
        discovery_config_controller(),
        info_controller(),
        local_affiliate_controller(layout),
        DiscoveryServiceController(client_factory),
        affiliate_merge_controller(),
        member_controller(),
        endpoint_controller(),
    ]
