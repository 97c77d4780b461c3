"""Resources of namespace ``network``: the hostname, the node's addresses, per-link addresses."""

from __future__ import annotations

import dataclasses
import enum
import ipaddress

from ichor.api.gen.resource.definitions.network import network_pb2
from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "ADDRESS_STATUSES",
    "HOSTNAME_STATUSES",
    "HOSTNAME_STATUS_ID",
    "NETWORK_NAMESPACE",
    "NODE_ADDRESSES",
    "NODE_ADDRESS_ACCUMULATIVE_ID",
    "NODE_ADDRESS_CURRENT_ID",
    "NODE_ADDRESS_DEFAULT_ID",
    "NODE_ADDRESS_FILTERS",
    "NODE_ADDRESS_FILTER_NO_K8S",
    "NODE_ADDRESS_FILTER_ONLY_K8S",
    "NODE_ADDRESS_ROUTED_ID",
    "AddressFamily",
    "AddressScope",
    "AddressStatusSpec",
    "HostnameStatusSpec",
    "IPPrefix",
    "NodeAddressFilterSpec",
    "NodeAddressSpec",
    "filtered_node_address_id",
]

NETWORK_NAMESPACE = "network"
HOSTNAME_STATUS_ID = "hostname"
NODE_ADDRESS_DEFAULT_ID = "default"
"""A single address: the one the node advertises (e.g. etcd peer URL)."""
NODE_ADDRESS_CURRENT_ID = "current"
"""Addresses of the links that are up right now."""
NODE_ADDRESS_ACCUMULATIVE_ID = "accumulative"
"""Every address the node has had since boot."""
NODE_ADDRESS_ROUTED_ID = "routed"
"""Current addresses minus external and SideroLink ones: what services listen on."""

NODE_ADDRESS_FILTER_NO_K8S = "no-k8s"
"""The filter that removes the Kubernetes pod and service subnets (flannel's and kube-proxy's addresses)."""
NODE_ADDRESS_FILTER_ONLY_K8S = "only-k8s"
"""The filter that keeps only addresses in the Kubernetes pod and service subnets."""


def filtered_node_address_id(kind: str, filter_id: str) -> str:
    """The ID of a node address set seen through a filter, as Talos names it: ``routed-no-k8s``."""
    return f"{kind}-{filter_id}"


IPPrefix = ipaddress.IPv4Interface | ipaddress.IPv6Interface
"""An address with its prefix length, e.g. ``172.20.0.2/24`` (Go's ``netip.Prefix`` as Talos uses it)."""

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressFamily(enum.StrEnum):
    INET4 = "inet4"
    INET6 = "inet6"


class AddressScope(enum.StrEnum):
    GLOBAL = "global"
    SITE = "site"
    LINK = "link"
    HOST = "host"
    NOWHERE = "nowhere"


@dataclasses.dataclass(frozen=True)
class HostnameStatusSpec:
    hostname: str
    domainname: str = ""

    @property
    def fqdn(self) -> str:
        return f"{self.hostname}.{self.domainname}" if self.domainname else self.hostname

    def proto_spec(self) -> bytes:
        message = network_pb2.HostnameStatusSpec(hostname=self.hostname, domainname=self.domainname)
        return bytes(message.SerializeToString())


@dataclasses.dataclass(frozen=True)
class NodeAddressSpec:
    addresses: tuple[IPPrefix, ...] = ()


_OMITEMPTY = {"omitempty": True}

_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclasses.dataclass(frozen=True)
class NodeAddressFilterSpec:
    """Which addresses a filtered node address set keeps: in ``include`` (when set) and not in ``exclude``."""

    include_subnets: tuple[_IPNetwork, ...] = dataclasses.field(default=(), metadata=_OMITEMPTY)
    exclude_subnets: tuple[_IPNetwork, ...] = dataclasses.field(default=(), metadata=_OMITEMPTY)

    def keeps(self, address: IPPrefix) -> bool:
        ip = address.ip
        if self.include_subnets and not any(
            ip in net for net in self.include_subnets if net.version == ip.version
        ):
            return False
        return not any(ip in net for net in self.exclude_subnets if net.version == ip.version)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AddressStatusSpec:
    """One address on one link, as the kernel reports it (fields in Talos's YAML order)."""

    address: IPPrefix
    local: _IPAddress | None = dataclasses.field(default=None, metadata=_OMITEMPTY)
    broadcast: _IPAddress | None = dataclasses.field(default=None, metadata=_OMITEMPTY)
    anycast: _IPAddress | None = dataclasses.field(default=None, metadata=_OMITEMPTY)
    multicast: _IPAddress | None = dataclasses.field(default=None, metadata=_OMITEMPTY)
    link_index: int = 0
    link_name: str
    family: AddressFamily
    scope: AddressScope = AddressScope.GLOBAL
    flags: str = ""
    """Comma-separated kernel address flags as Talos prints them, e.g. ``permanent``."""
    priority: int = 0


HOSTNAME_STATUSES: ResourceType[HostnameStatusSpec] = ResourceType(
    type="HostnameStatuses.net.talos.dev",
    default_namespace=NETWORK_NAMESPACE,
    spec_class=HostnameStatusSpec,
    aliases=("hostname",),
    print_columns=(PrintColumn("Hostname", "{.hostname}"), PrintColumn("Domainname", "{.domainname}")),
)

NODE_ADDRESSES: ResourceType[NodeAddressSpec] = ResourceType(
    type="NodeAddresses.net.talos.dev",
    default_namespace=NETWORK_NAMESPACE,
    spec_class=NodeAddressSpec,
    print_columns=(PrintColumn("Addresses", "{.addresses}"),),
)

NODE_ADDRESS_FILTERS: ResourceType[NodeAddressFilterSpec] = ResourceType(
    type="NodeAddressFilters.net.talos.dev",
    default_namespace=NETWORK_NAMESPACE,
    spec_class=NodeAddressFilterSpec,
    print_columns=(
        PrintColumn("Include Subnets", "{.includeSubnets}"),
        PrintColumn("Exclude Subnets", "{.excludeSubnets}"),
    ),
)

ADDRESS_STATUSES: ResourceType[AddressStatusSpec] = ResourceType(
    type="AddressStatuses.net.talos.dev",
    default_namespace=NETWORK_NAMESPACE,
    spec_class=AddressStatusSpec,
    aliases=("address", "addresses"),
    print_columns=(PrintColumn("Address", "{.address}"), PrintColumn("Link", "{.linkName}")),
)
