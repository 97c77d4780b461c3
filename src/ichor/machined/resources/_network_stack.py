"""Resources of Talos's network stack: layered specs, merged specs, and what the kernel reports.

Talos's model, which these types keep (names, aliases, columns and YAML keys of Talos 1.7):

* ``*Config`` controllers write specs per :class:`ConfigLayer` into namespace ``network-config``
  with ids ``<layer>/<id>`` (``configuration/eth0/10.5.0.2/24``);
* merge controllers pick the winner per id into namespace ``network`` (``eth0/10.5.0.2/24``);
* spec controllers apply those over netlink; status controllers publish what the kernel has
  (``links``, ``addresses``, ``routes``).

Addresses and gateways that Go keeps as ``netip`` values are strings here, ``""`` for Go's zero
value, so the YAML shows ``gateway: ""`` exactly as Talos does.
"""

from __future__ import annotations

import dataclasses
import enum

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._links import BondMasterSpec, VLANSpec, WireguardSpec

__all__ = [
    "ADDRESS_SPECS",
    "DEFAULT_ROUTE_METRIC",
    "HOSTNAME_SPECS",
    "LINK_SPECS",
    "LINK_STATUSES",
    "NETWORK_CONFIG_NAMESPACE",
    "NETWORK_STATUSES",
    "NETWORK_STATUS_ID",
    "OPERATOR_SPECS",
    "RESOLVER_ID",
    "RESOLVER_SPECS",
    "RESOLVER_STATUSES",
    "ROUTE_SPECS",
    "ROUTE_STATUSES",
    "TIME_SERVER_ID",
    "TIME_SERVER_SPECS",
    "TIME_SERVER_STATUSES",
    "AddressSpecSpec",
    "ConfigLayer",
    "DHCP4OperatorSpec",
    "HostnameSpecSpec",
    "LinkSpecSpec",
    "LinkStatusSpec",
    "NetworkStatusSpec",
    "OperatorSpecSpec",
    "ResolverSpecSpec",
    "ResolverStatusSpec",
    "RouteProtocol",
    "RouteSpecSpec",
    "RouteStatusSpec",
    "RouteType",
    "RoutingTable",
    "TimeServerSpecSpec",
    "TimeServerStatusSpec",
    "layered_id",
]

NETWORK_CONFIG_NAMESPACE = "network-config"
"""Unmerged, per-layer specs; merged versions live in namespace ``network``."""
_NETWORK = "network"
RESOLVER_ID = "resolvers"
TIME_SERVER_ID = "timeservers"
NETWORK_STATUS_ID = "status"
DEFAULT_ROUTE_METRIC = 1024
"""Talos's metric for a route that names none."""


class ConfigLayer(enum.StrEnum):
    """Where a spec came from, lowest priority first: a later layer overrides an earlier one."""

    DEFAULT = "default"
    CMDLINE = "cmdline"
    PLATFORM = "platform"
    OPERATOR = "operator"
    CONFIGURATION = "configuration"

    @property
    def rank(self) -> int:
        return list(ConfigLayer).index(self)


def layered_id(layer: ConfigLayer, id: str) -> str:
    """``configuration/eth0``: the id of a spec at one layer (Talos's ``LayeredID``)."""
    return f"{layer}/{id}"


class RoutingTable(enum.StrEnum):
    UNSPEC = "unspec"
    DEFAULT = "default"
    MAIN = "main"
    LOCAL = "local"


class RouteType(enum.StrEnum):
    UNSPEC = "unspec"
    UNICAST = "unicast"
    LOCAL = "local"
    BROADCAST = "broadcast"
    ANYCAST = "anycast"
    MULTICAST = "multicast"
    BLACKHOLE = "blackhole"
    UNREACHABLE = "unreachable"
    PROHIBIT = "prohibit"
    THROW = "throw"
    NAT = "nat"
    XRESOLVE = "xresolve"


class RouteProtocol(enum.StrEnum):
    UNSPEC = "unspec"
    REDIRECT = "redirect"
    KERNEL = "kernel"
    BOOT = "boot"
    STATIC = "static"
    RA = "ra"
    DHCP = "dhcp"


_OMITEMPTY = {"omitempty": True}


def _omit() -> dict[str, bool]:
    return dict(_OMITEMPTY)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkStatusSpec:
    """One link as rtnetlink reports it (fields in Talos's YAML order; ethtool fields not read)."""

    index: int
    type: str
    """``ether``, ``loopback``, ... (ARPHRD_* as Talos names them)."""
    link_index: int = 0
    flags: str = ""
    """``UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP``."""
    hardware_addr: str = ""
    permanent_addr: str = ""
    broadcast_addr: str = ""
    mtu: int = 0
    queue_disc: str = ""
    master_index: int = dataclasses.field(default=0, metadata=_omit())
    operational_state: str = "unknown"
    kind: str = ""
    slave_kind: str = ""
    bus_path: str = dataclasses.field(default="", metadata=_omit())
    driver: str = dataclasses.field(default="", metadata=_omit())
    link_state: bool = False
    port: str = "Other"
    duplex: str = "Unknown"

    @property
    def physical(self) -> bool:
        """An ethernet device that is not a virtual kind (Talos's ``Physical()``)."""
        return self.type == "ether" and self.kind == ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkSpecSpec:
    """What a link should be: up or down, its MTU (0 = leave as is); a logical link (``logical``)
    also its kind and what makes it (bond options, VLAN id and parent, WireGuard), a bond's member
    its bond (``masterName``, ``slaveIndex``)."""

    name: str
    logical: bool = False
    up: bool = False
    mtu: int = 0
    kind: str = ""
    type: str = dataclasses.field(default="", metadata={"zero": "netrom"})
    """A logical link's ARP hardware type (``ether``...); "" for a physical one, whose Go zero value
    Talos's YAML shows as ``netrom``."""
    parent_name: str = dataclasses.field(default="", metadata=_omit())
    master_name: str = dataclasses.field(default="", metadata=_omit())
    slave_index: int = dataclasses.field(default=0, metadata=_omit())
    vlan: VLANSpec = dataclasses.field(default_factory=VLANSpec, metadata=_omit())
    bond_master: BondMasterSpec = dataclasses.field(default_factory=BondMasterSpec, metadata=_omit())
    wireguard: WireguardSpec = dataclasses.field(default_factory=WireguardSpec, metadata=_omit())
    layer: ConfigLayer = ConfigLayer.DEFAULT

    def merged(self, other: LinkSpecSpec) -> LinkSpecSpec:
        """``other`` (a higher layer) over this one: its non-zero fields win (Talos's ``Merge``);
        WireGuard merges value by value."""
        return LinkSpecSpec(
            name=self.name, logical=other.logical or self.logical, up=other.up or self.up,
            mtu=other.mtu or self.mtu, kind=other.kind or self.kind, type=other.type or self.type,
            parent_name=other.parent_name or self.parent_name,
            master_name=other.master_name or self.master_name,
            slave_index=other.slave_index if other.master_name else self.slave_index,
            vlan=self.vlan if other.vlan.is_zero() else other.vlan,
            bond_master=self.bond_master if other.bond_master.is_zero() else other.bond_master,
            wireguard=self.wireguard.merged(other.wireguard), layer=other.layer,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class AddressSpecSpec:
    address: str
    """``10.5.0.2/24``."""
    link_name: str
    family: str
    scope: str = "global"
    flags: str = "permanent"
    announce_with_arp: bool = dataclasses.field(
        default=False, metadata={**_OMITEMPTY, "yaml": "announceWithARP"}
    )
    layer: ConfigLayer = ConfigLayer.DEFAULT


@dataclasses.dataclass(frozen=True, kw_only=True)
class RouteSpecSpec:
    family: str
    dst: str = ""
    src: str = ""
    gateway: str = ""
    out_link_name: str = dataclasses.field(default="", metadata=_omit())
    table: str = RoutingTable.MAIN
    priority: int = dataclasses.field(default=0, metadata=_omit())
    scope: str = "global"
    type: str = RouteType.UNICAST
    flags: str = ""
    protocol: str = RouteProtocol.STATIC
    layer: ConfigLayer = ConfigLayer.DEFAULT
    mtu: int = dataclasses.field(default=0, metadata=_omit())

    @property
    def id(self) -> str:
        """Talos's ``RouteID``: ``inet4/<gateway>/<dst>/<metric>`` (link name first for IPv6)."""
        prefix = "" if self.table == RoutingTable.MAIN else f"{self.table}/"
        if self.family == "inet6":
            prefix += f"{self.out_link_name}/"
        return f"{prefix}{self.family}/{self.gateway}/{self.dst}/{self.priority}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RouteStatusSpec:
    family: str
    dst: str = ""
    src: str = ""
    gateway: str = ""
    out_link_index: int = dataclasses.field(default=0, metadata=_omit())
    out_link_name: str = dataclasses.field(default="", metadata=_omit())
    table: str = RoutingTable.MAIN
    priority: int = 0
    scope: str = "global"
    type: str = RouteType.UNICAST
    flags: str = ""
    protocol: str = RouteProtocol.STATIC
    mtu: int = dataclasses.field(default=0, metadata=_omit())

    @property
    def id(self) -> str:
        """The id of the RouteSpec that would make this route (so statuses and specs line up)."""
        spec = RouteSpecSpec(family=self.family, dst=self.dst, gateway=self.gateway,
                             out_link_name=self.out_link_name, table=self.table, priority=self.priority)  # fmt: skip
        return spec.id


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostnameSpecSpec:
    hostname: str
    domainname: str = ""
    layer: ConfigLayer = ConfigLayer.DEFAULT


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolverSpecSpec:
    dns_servers: tuple[str, ...] = ()
    layer: ConfigLayer = ConfigLayer.DEFAULT
    search_domains: tuple[str, ...] = dataclasses.field(default=(), metadata=_omit())


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolverStatusSpec:
    dns_servers: tuple[str, ...] = ()
    search_domains: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimeServerSpecSpec:
    time_servers: tuple[str, ...] = ()
    """Host names or addresses (Go's ``NTPServers``, YAML ``timeServers``)."""
    layer: ConfigLayer = ConfigLayer.DEFAULT


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimeServerStatusSpec:
    time_servers: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class DHCP4OperatorSpec:
    route_metric: int = 0
    skip_hostname_request: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class VIPOperatorSpec:
    ip: str = ""
    gratuitous_arp: bool = dataclasses.field(default=True, metadata={"yaml": "gratuitousARP"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSpecSpec:
    """An operator to run on a link (``dhcp4``: the DHCPv4 client of ``network.OperatorSpecController``;
    ``vip``: the shared-IP election of ``network.VIPOperatorController``)."""

    operator: str
    link_name: str
    require_up: bool = False
    dhcp4: DHCP4OperatorSpec = dataclasses.field(default_factory=DHCP4OperatorSpec)
    vip: VIPOperatorSpec = dataclasses.field(default_factory=VIPOperatorSpec)
    layer: ConfigLayer = ConfigLayer.DEFAULT

    @property
    def id(self) -> str:
        return f"{self.operator}/{self.link_name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkStatusSpec:
    address_ready: bool = False
    connectivity_ready: bool = False
    hostname_ready: bool = False
    etc_files_ready: bool = False


LINK_STATUSES: ResourceType[LinkStatusSpec] = ResourceType(
    type="LinkStatuses.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=LinkStatusSpec,
    aliases=("link", "links"),
    print_columns=(
        PrintColumn("Type", "{.type}"),
        PrintColumn("Kind", "{.kind}"),
        PrintColumn("Hw Addr", "{.hardwareAddr}"),
        PrintColumn("Oper State", "{.operationalState}"),
        PrintColumn("Link State", "{.linkState}"),
    ),
)
LINK_SPECS: ResourceType[LinkSpecSpec] = ResourceType(
    type="LinkSpecs.net.talos.dev", default_namespace=_NETWORK, spec_class=LinkSpecSpec, sensitive=True
)
ADDRESS_SPECS: ResourceType[AddressSpecSpec] = ResourceType(
    type="AddressSpecs.net.talos.dev", default_namespace=_NETWORK, spec_class=AddressSpecSpec
)
ROUTE_SPECS: ResourceType[RouteSpecSpec] = ResourceType(
    type="RouteSpecs.net.talos.dev", default_namespace=_NETWORK, spec_class=RouteSpecSpec
)
ROUTE_STATUSES: ResourceType[RouteStatusSpec] = ResourceType(
    type="RouteStatuses.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=RouteStatusSpec,
    aliases=("route", "routes"),
    print_columns=(
        PrintColumn("Destination", "{.dst}"),
        PrintColumn("Gateway", "{.gateway}"),
        PrintColumn("Link", "{.outLinkName}"),
        PrintColumn("Metric", "{.priority}"),
    ),
)
HOSTNAME_SPECS: ResourceType[HostnameSpecSpec] = ResourceType(
    type="HostnameSpecs.net.talos.dev", default_namespace=_NETWORK, spec_class=HostnameSpecSpec
)
RESOLVER_SPECS: ResourceType[ResolverSpecSpec] = ResourceType(
    type="ResolverSpecs.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=ResolverSpecSpec,
)
RESOLVER_STATUSES: ResourceType[ResolverStatusSpec] = ResourceType(
    type="ResolverStatuses.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=ResolverStatusSpec,
    aliases=("resolvers",),
    print_columns=(PrintColumn("Resolvers", "{.dnsServers}"),),
)
OPERATOR_SPECS: ResourceType[OperatorSpecSpec] = ResourceType(
    type="OperatorSpecs.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=OperatorSpecSpec,
    sensitive=True,
)
NETWORK_STATUSES: ResourceType[NetworkStatusSpec] = ResourceType(
    type="NetworkStatuses.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=NetworkStatusSpec,
    aliases=("netstatus", "netstatuses"),
    print_columns=(
        PrintColumn("Address", "{.addressReady}"),
        PrintColumn("Connectivity", "{.connectivityReady}"),
        PrintColumn("Hostname", "{.hostnameReady}"),
        PrintColumn("Etc", "{.etcFilesReady}"),
    ),
)
TIME_SERVER_SPECS: ResourceType[TimeServerSpecSpec] = ResourceType(
    type="TimeServerSpecs.net.talos.dev", default_namespace=_NETWORK, spec_class=TimeServerSpecSpec
)
TIME_SERVER_STATUSES: ResourceType[TimeServerStatusSpec] = ResourceType(
    type="TimeServerStatuses.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=TimeServerStatusSpec,
    aliases=("timeserver", "timeservers"),
    print_columns=(PrintColumn("Timeservers", "{.timeServers}"),),
)
