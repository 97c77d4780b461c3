"""Area ``k8s``: the node address filters of Talos's ``k8s.NodeAddressFilterController``.

``no-k8s`` removes the cluster's pod and service subnets from the node's addresses, ``only-k8s``
keeps just them. What a node says about itself (its API and Kubernetes certificates, etcd's
addresses, the kubelet's node IP, its discovery affiliate and so KubePrism's upstreams) reads
the ``no-k8s`` sets: the addresses the CNI adds (flannel's ``flannel.1`` and ``cni0``) are not the
node's, and certificates or static pods changing when they appear would restart the control plane.
"""

from __future__ import annotations

import ipaddress

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, TransformController, WaitingFor
from ichor.machined.resources import (
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESS_FILTER_ONLY_K8S,
    NODE_ADDRESS_FILTERS,
    NodeAddressFilterSpec,
)
from ichor.machinery.constants import DEFAULT_POD_SUBNET, DEFAULT_SERVICE_SUBNET

__all__ = ["node_address_filter_controller"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _subnets(key: str, values: list[str] | None, default: str) -> tuple[_Network, ...]:
    out: list[_Network] = []
    for value in values or [default]:
        try:
            out.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise WaitingFor("the Kubernetes subnets", f"{key}: {value!r} is not a CIDR subnet") from None
    return tuple(out)


def node_address_filter_controller() -> TransformController[NodeAddressFilterSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodeAddressFilterSpec]:
        config = active_config(ctx)
        if config.cluster is None:
            return {}
        network = config.cluster.network
        k8s = (
            *_subnets(
                "cluster.network.podSubnets", network.pod_subnets if network else None, DEFAULT_POD_SUBNET
            ),
            *_subnets(
                "cluster.network.serviceSubnets",
                network.service_subnets if network else None,
                DEFAULT_SERVICE_SUBNET,
            ),
        )
        return {
            NODE_ADDRESS_FILTER_NO_K8S: NodeAddressFilterSpec(exclude_subnets=k8s),
            NODE_ADDRESS_FILTER_ONLY_K8S: NodeAddressFilterSpec(include_subnets=k8s),
        }

    return TransformController(
        "k8s.NodeAddressFilterController",
        inputs=[ACTIVE_CONFIG],
        output=NODE_ADDRESS_FILTERS,
        map_inputs=derive,
    )
