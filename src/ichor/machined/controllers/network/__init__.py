"""Area ``network``: Talos's network stack, layer by layer.

The graph (as ``talosctl inspect dependencies`` draws it)::

    MachineConfig + LinkStatuses --*ConfigController--> layered specs (namespace network-config,
        ids <layer>/<id>; layers default < cmdline < platform < operator < configuration)
    layered specs --*MergeController--> LinkSpecs, AddressSpecs, RouteSpecs, OperatorSpecs,
        HostnameSpec, ResolverSpec, TimeServerSpec (namespace network)
    OperatorSpecs + LinkStatuses --OperatorSpecController (DHCPv4 leases)--> operator-layer specs
        (only on a node with a network namespace of its own)
    OperatorSpecs vip/<link> + etcd service --VIPOperatorController (etcd election)--> operator-layer
        AddressSpec <ip>/32 + gratuitous ARP (a node with its own network namespace and etcd access)
    LinkSpecs, AddressSpecs, RouteSpecs --*SpecController--> the kernel, over netlink
        (only on a node with a network namespace of its own)
    MachineConfig --NfTablesChainConfigController--> NfTablesChains --NfTablesChainController-->
        table inet talos in the node's nftables (own network namespace only)
    HostnameSpec, ResolverSpec, TimeServerSpec --*SpecController--> HostnameStatus, ResolverStatus,
        TimeServerStatus
    the kernel --LinkStatus/AddressStatus/RouteStatusController--> links, addresses, routes
    AddressStatuses + LinkStatuses --NodeAddressController--> NodeAddresses
    MachineConfig --HostDNSConfigController--> HostDNSConfig; + ResolverStatus
        --DNSResolveCacheController--> the caching resolver on 127.0.0.53 (own netns only)
    HostnameStatus + NodeAddress + ResolverStatus + HostDNSConfig --EtcFileController--> EtcFileSpecs hosts,
        resolv.conf --files.EtcFileController--> /etc in the node, EtcFileStatuses
    NodeAddresses + RouteStatuses + HostnameStatus + EtcFileStatuses --StatusController--> NetworkStatus

Which kernel: :func:`network_controllers` takes a :class:`~ichor.machined.netlink.Netlink`. A process
node (``Layout.own_netns`` false) gets :class:`~ichor.machined.netlink.ProcessNodeView` and no
controller that applies specs, so nothing here can change the host's network.
"""

from __future__ import annotations

from collections.abc import Callable

from ichor.machined.controllers.network._layers import config_controller, layered, merge_controller
from ichor.machined.controllers.network.apply import (
    AddressSpecController,
    LinkSpecController,
    RouteSpecController,
)
from ichor.machined.controllers.network.config import (
    address_config_controller,
    config_or_none,
    link_config_controller,
    operator_config_controller,
    parse_address,
    route_config_controller,
    route_spec_of,
    select_links,
)
from ichor.machined.controllers.network.etcfiles import (
    EtcFileWriter,
    etc_file_spec_controller,
    render_hosts,
    render_resolv_conf,
)
from ichor.machined.controllers.network.firewall import nftables_chain_config_controller
from ichor.machined.controllers.network.hostdns import host_dns_controllers
from ichor.machined.controllers.network.hostname import (
    DEFAULT_RESOLVERS,
    default_hostname,
    hostname_config_controller,
    hostname_controllers,
    hostname_merge_controller,
    hostname_of,
    hostname_spec_controller,
    resolver_config_controller,
    resolver_controllers,
    resolver_merge_controller,
    resolver_spec_controller,
)
from ichor.machined.controllers.network.nftables import NfTablesChainController
from ichor.machined.controllers.network.operator import OperatorSpecController, lease_specs
from ichor.machined.controllers.network.status import (
    KernelObserver,
    address_status_controller,
    link_status_controller,
    node_address_controller,
    route_status_controller,
    status_controller,
)
from ichor.machined.controllers.network.timeservers import DEFAULT_TIME_SERVERS, time_server_controllers
from ichor.machined.controllers.network.vip import StoreFactory, VIPOperatorController
from ichor.machined.cosi import Controller
from ichor.machined.dhcp4 import TransportFactory, raw_transports
from ichor.machined.netlink import KernelNetlink, Netlink, ProcessNodeView
from ichor.machined.platform import Layout
from ichor.machined.resources import ADDRESS_SPECS, LINK_SPECS, OPERATOR_SPECS, ROUTE_SPECS

__all__ = [
    "DEFAULT_RESOLVERS",
    "DEFAULT_TIME_SERVERS",
    "AddressSpecController",
    "EtcFileWriter",
    "KernelObserver",
    "LinkSpecController",
    "NfTablesChainController",
    "OperatorSpecController",
    "RouteSpecController",
    "StoreFactory",
    "VIPOperatorController",
    "address_config_controller",
    "address_status_controller",
    "config_controller",
    "config_or_none",
    "default_hostname",
    "etc_file_spec_controller",
    "host_dns_controllers",
    "hostname_config_controller",
    "hostname_controllers",
    "hostname_merge_controller",
    "hostname_of",
    "hostname_spec_controller",
    "layered",
    "lease_specs",
    "link_config_controller",
    "link_status_controller",
    "merge_controller",
    "netlink_for",
    "network_controllers",
    "nftables_chain_config_controller",
    "node_address_controller",
    "operator_config_controller",
    "parse_address",
    "render_hosts",
    "render_resolv_conf",
    "resolver_config_controller",
    "resolver_controllers",
    "resolver_merge_controller",
    "resolver_spec_controller",
    "route_config_controller",
    "route_spec_of",
    "route_status_controller",
    "select_links",
    "spec_merge_controllers",
    "status_controller",
    "time_server_controllers",
]


def netlink_for(layout: Layout) -> Netlink:
    """The kernel of the node's own network namespace, or a process node's read-only view."""
    return KernelNetlink() if layout.own_netns else ProcessNodeView(layout.address)


def spec_merge_controllers() -> list[Controller]:
    return [
        merge_controller(
            "network.LinkMergeController", LINK_SPECS, combine=lambda low, high: low.merged(high)
        ),
        merge_controller("network.AddressMergeController", ADDRESS_SPECS),
        merge_controller("network.RouteMergeController", ROUTE_SPECS),
        merge_controller("network.OperatorMergeController", OPERATOR_SPECS),
    ]


def network_controllers(
    layout: Layout,
    netlink: Netlink | None = None,
    dhcp_transports: Callable[[str], TransportFactory] | None = None,
    vip_store: StoreFactory | None = None,
) -> list[Controller]:
    """Every network controller of a node, in registration order.

    The DHCP operator runs on a node with its own network namespace, over raw sockets on its links
    when ``netlink`` is the real kernel; with a fake ``netlink`` (tests) only if ``dhcp_transports``
    is given, so a test can never send DHCP onto a host's link of the same name.
    """
    kernel = netlink if netlink is not None else netlink_for(layout)
    applying: list[Controller] = []
    if layout.own_netns:
        applying = [LinkSpecController(kernel), AddressSpecController(kernel), RouteSpecController(kernel)]
        transports = dhcp_transports or (raw_transports if netlink is None else None)
        if transports is not None:
            applying.append(OperatorSpecController(transports))
        if netlink is None:  # the node's own kernel: never nft in a test's (the host's) namespace
            applying.append(NfTablesChainController())
        if vip_store is not None and netlink is None:
            applying.append(VIPOperatorController(vip_store))
    return [
        *hostname_controllers(layout),
        *resolver_controllers(),
        *time_server_controllers(),
        *host_dns_controllers(layout),
        link_config_controller(),
        address_config_controller(),
        route_config_controller(),
        operator_config_controller(),
        nftables_chain_config_controller(),
        *spec_merge_controllers(),
        *applying,
        link_status_controller(kernel),
        address_status_controller(kernel),
        route_status_controller(kernel),
        node_address_controller(layout),
        etc_file_spec_controller(),
        EtcFileWriter(layout),
        status_controller(layout),
    ]
