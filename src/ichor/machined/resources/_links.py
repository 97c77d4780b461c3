"""The parts of a LinkSpec that make a logical link: bond master options, VLAN, WireGuard.

YAML keys and enum names are Talos 1.7's (``talosctl get linkspecs -o yaml``): ``bondMaster`` with
``mode: active-backup``, ``vlan: {vlanID, vlanProtocol}``, ``wireguard: {privateKey, listenPort,
firewallMark, peers}``. Each part has Go's zero value as its default and ``is_zero()`` like Go's
``IsZero``, so a LinkSpec of a plain link omits them. The kernel's numbers for the enums live here
too (:data:`BOND_ENUMS`), beside their names, for the netlink requests
(:mod:`ichor.machined.linkrequests`).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from ichor.machinery.config import BOND_OPTIONS

__all__ = [
    "BOND_ENUMS",
    "VLAN_PROTOCOLS",
    "BondMasterSpec",
    "VLANSpec",
    "WireguardPeer",
    "WireguardSpec",
]

BOND_ENUMS: dict[str, tuple[str, ...]] = {
    "".join("_" + c.lower() if c.isupper() else c for c in key): names for key, names in BOND_OPTIONS.items()
}
"""Talos's names of each bond enum by field name (``xmit_hash_policy``), in the kernel's order."""
VLAN_PROTOCOLS = {"802.1q": 0x8100, "802.1ad": 0x88A8}

_OMIT = {"omitempty": True}


def _omit() -> dict[str, bool]:
    return dict(_OMIT)


class _Zero:
    def is_zero(self) -> bool:
        return self == type(self)()


@dataclasses.dataclass(frozen=True, kw_only=True)
class BondMasterSpec(_Zero):
    mode: str = "balance-rr"
    xmit_hash_policy: str = "layer2"
    lacp_rate: str = "slow"
    arp_validate: str = "none"
    arp_all_targets: str = "any"
    primary_index: int = dataclasses.field(default=0, metadata={**_OMIT, "yaml": "primary"})
    primary_reselect: str = "always"
    fail_over_mac: str = "none"
    ad_select: str = dataclasses.field(default="stable", metadata=_omit())
    miimon: int = dataclasses.field(default=0, metadata={**_OMIT, "yaml": "miimon"})
    updelay: int = dataclasses.field(default=0, metadata={**_OMIT, "yaml": "updelay"})
    downdelay: int = dataclasses.field(default=0, metadata={**_OMIT, "yaml": "downdelay"})
    arp_interval: int = dataclasses.field(default=0, metadata=_omit())
    resend_igmp: int = dataclasses.field(default=0, metadata=_omit())
    min_links: int = dataclasses.field(default=0, metadata=_omit())
    lp_interval: int = dataclasses.field(default=0, metadata=_omit())
    packets_per_slave: int = dataclasses.field(default=0, metadata=_omit())
    num_peer_notif: int = dataclasses.field(default=0, metadata=_omit())
    tlb_dynamic_lb: int = dataclasses.field(default=0, metadata={**_OMIT, "yaml": "tlbLogicalLb"})
    all_slaves_active: int = dataclasses.field(default=0, metadata=_omit())
    use_carrier: bool = dataclasses.field(default=False, metadata=_omit())
    ad_actor_sys_prio: int = dataclasses.field(default=0, metadata=_omit())
    ad_user_port_key: int = dataclasses.field(default=0, metadata=_omit())
    peer_notify_delay: int = dataclasses.field(default=0, metadata=_omit())

    def code(self, option: str) -> int:
        """The kernel's number for the enum ``option`` (``mode`` -> 1 for active-backup)."""
        return BOND_ENUMS[option].index(getattr(self, option))


@dataclasses.dataclass(frozen=True, kw_only=True)
class VLANSpec(_Zero):
    vid: int = dataclasses.field(default=0, metadata={"yaml": "vlanID"})
    protocol: str = dataclasses.field(default="", metadata={"yaml": "vlanProtocol"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class WireguardPeer:
    public_key: str
    preshared_key: str = ""
    endpoint: str = ""
    """``host:port``; an IPv6 host in brackets."""
    persistent_keepalive_interval: timedelta = timedelta(0)
    allowed_ips: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "allowedIPs"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class WireguardSpec(_Zero):
    private_key: str = dataclasses.field(default="", metadata=_omit())
    public_key: str = dataclasses.field(default="", metadata=_omit())
    listen_port: int = 0
    firewall_mark: int = 0
    peers: tuple[WireguardPeer, ...] = ()

    def merged(self, other: WireguardSpec) -> WireguardSpec:
        """``other`` (a higher layer) over this one, value by value, as Talos merges WireGuard: a
        zero value does not clear a lower layer's (a higher layer's peers, when it has any, replace
        the lower's)."""
        if other.is_zero():
            return self
        if self.is_zero():
            return other
        return WireguardSpec(
            private_key=other.private_key or self.private_key, public_key=other.public_key or self.public_key,
            listen_port=other.listen_port or self.listen_port, firewall_mark=other.firewall_mark or self.firewall_mark,
            peers=other.peers or self.peers,
        )  # fmt: skip
