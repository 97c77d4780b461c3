"""Cluster area, membership: this node as an affiliate, the others merged, members, endpoints.

* ``cluster.LocalAffiliateController``: identity, hostname, addresses, machine type -> this node's
  ``Affiliate`` (namespace ``cluster``, id = node id) while discovery is enabled;
* ``cluster.AffiliateMergeController``: raw affiliates merged per node id -> ``cluster`` Affiliates;
* ``cluster.MemberController``: affiliates with a node name -> ``Member`` (id = node name);
* ``cluster.EndpointController``: control plane members' addresses -> ``Endpoints`` ``discovery``.
"""

from __future__ import annotations

import ipaddress

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, Input, OutputKind, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    AFFILIATES,
    DISCOVERED_ENDPOINTS_ID,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    ENDPOINTS,
    HOSTNAME_STATUSES,
    IDENTITIES,
    KUBESPAN_IDENTITIES,
    LOCAL_IDENTITY_ID,
    LOCAL_KUBESPAN_IDENTITY_ID,
    MACHINE_TYPES,
    MEMBERS,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESS_FILTER_ONLY_K8S,
    NODE_ADDRESSES,
    RAW_NAMESPACE,
    AffiliateSpec,
    ControlPlaneSpec,
    EndpointSpec,
    IPAddress,
    KubeSpanAffiliateSpec,
    MemberSpec,
    filtered_node_address_id,
)
from ichor.machined.resources._feature_configs import KUBESPAN_CONFIG_ID, KUBESPAN_CONFIGS
from ichor.machinery.hostport import join_host_port
from ichor.machinery.imageversion import running_version
from ichor.machinery.kubespan import ULA_SIDEROLINK
from ichor.machinery.subnets import filter_addresses

_AFFILIATE_ADDRESSES = tuple(
    filtered_node_address_id(kind, NODE_ADDRESS_FILTER_NO_K8S) for kind in ("routed", "current")
)
"""What a node tells its peers it is reached on (Talos's ``routed-no-k8s``): never a pod network address."""

__all__ = [
    "affiliate_merge_controller",
    "endpoint_controller",
    "local_affiliate_controller",
    "member_controller",
    "operating_system",
]

DEFAULT_API_SERVER_PORT = 6443
KUBESPAN_PORT = 51820
"""Talos's ``constants.KubeSpanDefaultPort``."""


def operating_system() -> str:
    """What this node reports as its OS (Talos reports ``Talos (v1.7.6)``): ``Ichor (v1.7.6)`` from the
    source tree (container, process nodes), an OS image's own version on metal."""
    return f"Ichor ({running_version()})"


def local_affiliate_controller(layout: Layout) -> TransformController[AffiliateSpec]:
    """This node as an affiliate; addresses from NodeAddresses ``routed`` (else ``current``, else the
    node's own address)."""

    def derive(ctx: ControllerContext) -> dict[str, AffiliateSpec]:
        config = ctx.get_or_none(DISCOVERY_CONFIGS, DISCOVERY_CONFIG_ID)
        if config is None or not config.spec.discovery_enabled:
            return {}
        identity = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
        if identity is None:
            raise WaitingFor("the node identity", "cluster.NodeIdentityController has not published it")
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, "hostname")
        if hostname is None:
            raise WaitingFor("the hostname", "no HostnameStatus yet")
        machine_type = ctx.get_or_none(MACHINE_TYPES, "machine-type")
        if machine_type is None:
            raise WaitingFor("the machine type", "no MachineType yet")
        addresses: tuple[IPAddress, ...] = ()
        for id in _AFFILIATE_ADDRESSES:
            found = ctx.get_or_none(NODE_ADDRESSES, id)
            if found is not None and found.spec.addresses:
                addresses = tuple(dict.fromkeys(p.ip for p in found.spec.addresses))
                break
        else:
            addresses = (ipaddress.ip_address(layout.address),)
        kind = str(machine_type.spec)
        control_plane = None
        if kind in ("init", "controlplane"):
            cluster = active_config(ctx).cluster
            plane = cluster.control_plane if cluster is not None else None
            port = plane.local_api_server_port if plane is not None else None
            control_plane = ControlPlaneSpec(port or DEFAULT_API_SERVER_PORT)
        node_id = identity.spec.node_id
        return {
            node_id: AffiliateSpec(
                node_id=node_id,
                addresses=addresses,
                hostname=hostname.spec.fqdn,
                nodename=hostname.spec.hostname,
                operating_system=operating_system(),
                machine_type=kind,
                control_plane=control_plane,
                kubespan=_kubespan_affiliate(ctx),
            )
        }

    return TransformController(
        "cluster.LocalAffiliateController",
        inputs=[
            Input(DISCOVERY_CONFIGS, id=DISCOVERY_CONFIG_ID),
            Input(IDENTITIES, id=LOCAL_IDENTITY_ID),
            Input(HOSTNAME_STATUSES, id="hostname"),
            Input(NODE_ADDRESSES),
            Input(MACHINE_TYPES, id="machine-type"),
            ACTIVE_CONFIG,
            Input(KUBESPAN_IDENTITIES, id=LOCAL_KUBESPAN_IDENTITY_ID),
            Input(KUBESPAN_CONFIGS, id=KUBESPAN_CONFIG_ID),
        ],
        output=AFFILIATES,
        output_kind=OutputKind.SHARED,
        map_inputs=derive,
    )


def _kubespan_affiliate(ctx: ControllerContext) -> KubeSpanAffiliateSpec | None:
    """What this node tells its KubeSpan peers (Talos's rules): its KubeSpan address and public key,
    the node's current addresses (no pod networks, not its KubeSpan or SideroLink addresses, through
    ``filters.endpoints``) on port 51820, and with ``advertiseKubernetesNetworks`` its pod networks."""
    identity = ctx.get_or_none(KUBESPAN_IDENTITIES, LOCAL_KUBESPAN_IDENTITY_ID)
    config = ctx.get_or_none(KUBESPAN_CONFIGS, KUBESPAN_CONFIG_ID)
    if identity is None or config is None:
        return None
    own = ipaddress.ip_interface(identity.spec.address).ip
    current = ctx.get_or_none(NODE_ADDRESSES, filtered_node_address_id("current", NODE_ADDRESS_FILTER_NO_K8S))
    ips = [p.ip for p in (current.spec.addresses if current is not None else ())]
    endpoint_ips = [str(ip) for ip in dict.fromkeys(ips) if ip != own and not _is_siderolink(ip)]
    if config.spec.endpoint_filters:
        endpoint_ips = filter_addresses(
            endpoint_ips, config.spec.endpoint_filters, setting="kubespan.filters.endpoints"
        )
    advertised: tuple[str, ...] = ()
    if config.spec.advertise_kubernetes_networks:
        k8s = ctx.get_or_none(
            NODE_ADDRESSES, filtered_node_address_id("current", NODE_ADDRESS_FILTER_ONLY_K8S)
        )
        advertised = tuple(str(p) for p in (k8s.spec.addresses if k8s is not None else ()))
    return KubeSpanAffiliateSpec(
        public_key=identity.spec.public_key, address=str(own), additional_addresses=advertised,
        endpoints=tuple(join_host_port(ip, KUBESPAN_PORT) for ip in endpoint_ips),
    )  # fmt: skip


def _is_siderolink(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.version == 6 and ip.packed[0] == 0xFD and ip.packed[7] == ULA_SIDEROLINK


def affiliate_merge_controller() -> TransformController[AffiliateSpec]:
    def derive(ctx: ControllerContext) -> dict[str, AffiliateSpec]:
        identity = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
        local_id = identity.spec.node_id if identity is not None else None
        merged: dict[str, AffiliateSpec] = {}
        for raw in sorted(ctx.list(AFFILIATES, namespace=RAW_NAMESPACE), key=lambda r: r.id):
            node_id = raw.spec.node_id
            if node_id == local_id:
                continue  # the local affiliate has its own controller
            merged[node_id] = merged[node_id].merge(raw.spec) if node_id in merged else raw.spec
        return merged

    return TransformController(
        "cluster.AffiliateMergeController",
        inputs=[Input(AFFILIATES, namespace=RAW_NAMESPACE), Input(IDENTITIES, id=LOCAL_IDENTITY_ID)],
        output=AFFILIATES,
        output_kind=OutputKind.SHARED,
        map_inputs=derive,
    )


def member_controller() -> TransformController[MemberSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MemberSpec]:
        members: dict[str, MemberSpec] = {}
        for affiliate in ctx.list(AFFILIATES):
            spec = affiliate.spec
            if not spec.nodename:
                continue  # not a cluster member (yet)
            members[spec.nodename] = MemberSpec(
                node_id=spec.node_id,
                addresses=spec.addresses,
                hostname=spec.hostname,
                machine_type=spec.machine_type,
                operating_system=spec.operating_system,
                control_plane=spec.control_plane,
            )
        return members

    return TransformController(
        "cluster.MemberController", inputs=[Input(AFFILIATES)], output=MEMBERS, map_inputs=derive
    )


def endpoint_controller() -> TransformController[EndpointSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EndpointSpec]:
        addresses: set[IPAddress] = set()
        for member in ctx.list(MEMBERS):
            if member.spec.machine_type in ("init", "controlplane"):
                addresses.update(member.spec.addresses)
        ordered = sorted(addresses, key=lambda a: (a.version, a))
        return {DISCOVERED_ENDPOINTS_ID: EndpointSpec(tuple(ordered))}

    return TransformController(
        "cluster.EndpointController", inputs=[Input(MEMBERS)], output=ENDPOINTS, map_inputs=derive,
        output_kind=OutputKind.SHARED,
    )  # fmt: skip
