"""Logical links from ``machine.network.interfaces[]``: bonds and their members, VLANs, dummy and
WireGuard links, as the LinkSpecs Talos's LinkConfigController writes for them.

* ``bond:`` -> the bond (``logical``, kind ``bond``, type ``ether``, ``bondMaster`` options) and,
  for each member (``bond.interfaces`` in order, or the links ``bond.deviceSelectors`` pick), a
  LinkSpec up with ``masterName`` and ``slaveIndex``;
* ``vlans[]`` -> ``<parent>.<vlanId>`` (kind ``vlan``, ``parentName``, ``vlan: {vlanID,
  vlanProtocol: 802.1q}``, the VLAN's own MTU);
* ``dummy: true`` -> kind ``dummy``; ``wireguard:`` -> kind ``wireguard`` (type ``none``) with the
  private key, listen port, firewall mark and peers.

Pure functions of one config entry and the kernel's links; the config values were validated when
the config was accepted (``machinery/config/_validate_network.py``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ichor.machined.resources import (
    BOND_ENUMS,
    BondMasterSpec,
    ConfigLayer,
    LinkSpecSpec,
    LinkStatusSpec,
    VLANSpec,
    WireguardPeer,
    WireguardSpec,
)
from ichor.machinery import goduration
from ichor.machinery.config._models import Bond, Device, DeviceWireguardConfig, NetworkDeviceSelector, Vlan

__all__ = ["bond_master_of", "logical_link_specs", "vlan_name", "wireguard_of"]

_CONFIGURATION = ConfigLayer.CONFIGURATION


def vlan_name(parent: str, vlan: Vlan) -> str:
    """``eth0.100``: the link a ``vlans[]`` entry makes, as Talos names it."""
    return f"{parent}.{vlan.vlan_id or 0}"


def bond_master_of(bond: Bond) -> BondMasterSpec:
    """The bond's options; an option left out is the kernel's default (Go's zero value)."""
    names: dict[str, Any] = {}
    for option, allowed in BOND_ENUMS.items():
        value = getattr(bond, option) or ""
        names[option] = value if value in allowed else allowed[0]
    options = BondMasterSpec(
        miimon=bond.miimon or 0, updelay=bond.updelay or 0, downdelay=bond.downdelay or 0,
        arp_interval=bond.arp_interval or 0, resend_igmp=bond.resend_igmp or 0, min_links=bond.min_links or 0,
        lp_interval=bond.lp_interval or 0, packets_per_slave=bond.packets_per_slave or 0,
        num_peer_notif=bond.num_peer_notif or 0, tlb_dynamic_lb=bond.tlb_dynamic_lb or 0,
        all_slaves_active=bond.all_slaves_active or 0, use_carrier=bool(bond.use_carrier),
        ad_actor_sys_prio=bond.ad_actor_sys_prio or 0, ad_user_port_key=bond.ad_user_port_key or 0,
        peer_notify_delay=bond.peer_notify_delay or 0,
    )  # fmt: skip
    return dataclasses.replace(options, **names)


def wireguard_of(config: DeviceWireguardConfig) -> WireguardSpec:
    peers = tuple(
        WireguardPeer(
            public_key=peer.public_key or "", endpoint=peer.endpoint or "",
            persistent_keepalive_interval=goduration.parse(peer.persistent_keepalive_interval or "0s"),
            allowed_ips=tuple(str(ipaddress.ip_network(a.strip(), strict=False)) for a in peer.allowed_ips or []),
        )
        for peer in config.peers or []
    )  # fmt: skip
    return WireguardSpec(private_key=config.private_key or "", listen_port=config.listen_port or 0,
                         firewall_mark=config.firewall_mark or 0, peers=peers)  # fmt: skip


def _members(
    bond: Bond, links: Mapping[str, LinkStatusSpec], select: Callable[[NetworkDeviceSelector], list[str]]
) -> list[str]:
    if bond.interfaces:
        return [str(name) for name in bond.interfaces]
    found: list[str] = []
    for selector in bond.device_selectors or []:
        found += [name for name in select(selector) if name not in found]
    return found


def logical_link_specs(
    name: str,
    device: Device,
    links: Mapping[str, LinkStatusSpec],
    select: Callable[[NetworkDeviceSelector], list[str]],
) -> Iterator[tuple[str, LinkSpecSpec]]:
    """The LinkSpecs besides ``name``'s own plain one that ``device`` asks for: ``name`` itself when
    it is a bond, dummy or WireGuard link (else nothing for it), the bond's members and the VLANs."""
    mtu = device.mtu or 0
    if device.bond is not None:
        yield name, LinkSpecSpec(name=name, logical=True, up=True, mtu=mtu, kind="bond", type="ether",
                                 bond_master=bond_master_of(device.bond), layer=_CONFIGURATION)  # fmt: skip
        for index, member in enumerate(_members(device.bond, links, select)):
            yield member, LinkSpecSpec(name=member, up=True, master_name=name, slave_index=index,
                                       layer=_CONFIGURATION)  # fmt: skip
    elif device.dummy:
        yield name, LinkSpecSpec(name=name, logical=True, up=True, mtu=mtu, kind="dummy", type="ether",
                                 layer=_CONFIGURATION)  # fmt: skip
    elif device.wireguard is not None:
        yield name, LinkSpecSpec(name=name, logical=True, up=True, mtu=mtu, kind="wireguard", type="none",
                                 wireguard=wireguard_of(device.wireguard), layer=_CONFIGURATION)  # fmt: skip
    for vlan in device.vlans or []:
        child = vlan_name(name, vlan)
        yield child, LinkSpecSpec(name=child, logical=True, up=True, mtu=vlan.mtu or 0, kind="vlan", type="ether",
                                  parent_name=name, vlan=VLANSpec(vid=vlan.vlan_id or 0, protocol="802.1q"),
                                  layer=_CONFIGURATION)  # fmt: skip
