"""Resources of the node's host DNS (Talos 1.7): its config and the running listeners.

``HostDNSConfigs`` (id ``config``) say whether the caching resolver runs, where it listens
(``127.0.0.53:53``) and, with ``forwardKubeDNSToHost``, the service address CoreDNS forwards to (the
tenth address of the first service subnet, recorded for the Kubernetes side). ``DNSResolveCaches``
(ids ``udp-127.0.0.53:53``, ``tcp-127.0.0.53:53``) say which listeners are up.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "DNS_RESOLVE_CACHES",
    "HOSTDNS_TYPES",
    "HOST_DNS_CONFIGS",
    "HOST_DNS_CONFIG_ID",
    "DNSResolveCacheSpec",
    "HostDNSConfigSpec",
]

HOST_DNS_CONFIG_ID = "config"
_NETWORK = "network"


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostDNSConfigSpec:
    enabled: bool = False
    listen_addresses: tuple[str, ...] = ()
    """``ip:port`` pairs (Go's ``netip.AddrPort``)."""
    service_host_dns_address: str = dataclasses.field(default="", metadata={"yaml": "serviceHostDNSAddress"})
    """Go's zero ``netip.Addr`` is ``""``: set only with ``forwardKubeDNSToHost``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DNSResolveCacheSpec:
    status: str


HOST_DNS_CONFIGS: ResourceType[HostDNSConfigSpec] = ResourceType(
    type="HostDNSConfigs.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=HostDNSConfigSpec,
    print_columns=(PrintColumn("Enabled", "{.enabled}"),),
)
DNS_RESOLVE_CACHES: ResourceType[DNSResolveCacheSpec] = ResourceType(
    type="DNSResolveCaches.net.talos.dev",
    default_namespace=_NETWORK,
    spec_class=DNSResolveCacheSpec,
    print_columns=(PrintColumn("Status", "{.status}"),),
)
HOSTDNS_TYPES: tuple[ResourceType[HostDNSConfigSpec] | ResourceType[DNSResolveCacheSpec], ...] = (
    HOST_DNS_CONFIGS,
    DNS_RESOLVE_CACHES,
)
