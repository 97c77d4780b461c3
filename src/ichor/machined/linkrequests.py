"""The netlink messages that make logical links from their LinkSpecs: built here, sent by
:class:`ichor.machined.netlink.KernelNetlink`.

* :func:`new_link` - ``RTM_NEWLINK`` with ``IFLA_LINKINFO {IFLA_INFO_KIND, IFLA_INFO_DATA}``: a bond
  with its ``IFLA_BOND_*`` options, a VLAN on its parent (``IFLA_LINK``) with ``IFLA_VLAN_ID`` and
  ``IFLA_VLAN_PROTOCOL``, a dummy or a WireGuard link (no data);
* :func:`enslave` - ``RTM_NEWLINK`` on a bond member with ``IFLA_MASTER`` (the member is down);
* :func:`wireguard_device` - the ``wireguard`` generic netlink family's ``WG_CMD_SET_DEVICE``:
  private key, listen port, firewall mark and the peers, replacing the device's peers and each
  peer's allowed IPs, as Talos configures WireGuard.

Pure: every function returns an unencoded pyroute2 message and sends nothing, so tests encode it
and read the bytes back. Kinds the kernel lacks are the sender's business (``EOPNOTSUPP``).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from pyroute2.netlink.generic.wireguard import wgmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from ichor.machined.resources import VLAN_PROTOCOLS, BondMasterSpec, LinkSpecSpec, WireguardSpec

__all__ = [
    "KINDS",
    "LinkRequestError",
    "enslave",
    "new_link",
    "wireguard_device",
]

KINDS = ("bond", "vlan", "dummy", "wireguard")
"""The logical link kinds Ichor creates."""
WG_CMD_SET_DEVICE = 1
WG_GENL_VERSION = 1
WGDEVICE_F_REPLACE_PEERS = 1
WGPEER_F_REPLACE_ALLOWEDIPS = 2

_BOND_INTS = (
    ("IFLA_BOND_MIIMON", "miimon"), ("IFLA_BOND_UPDELAY", "updelay"), ("IFLA_BOND_DOWNDELAY", "downdelay"),
    ("IFLA_BOND_ARP_INTERVAL", "arp_interval"), ("IFLA_BOND_RESEND_IGMP", "resend_igmp"),
    ("IFLA_BOND_MIN_LINKS", "min_links"), ("IFLA_BOND_LP_INTERVAL", "lp_interval"),
    ("IFLA_BOND_PACKETS_PER_SLAVE", "packets_per_slave"), ("IFLA_BOND_NUM_PEER_NOTIF", "num_peer_notif"),
    ("IFLA_BOND_TLB_DYNAMIC_LB", "tlb_dynamic_lb"), ("IFLA_BOND_ALL_SLAVES_ACTIVE", "all_slaves_active"),
    ("IFLA_BOND_AD_ACTOR_SYS_PRIO", "ad_actor_sys_prio"), ("IFLA_BOND_AD_USER_PORT_KEY", "ad_user_port_key"),
    ("IFLA_BOND_PRIMARY", "primary_index"),
)  # fmt: skip
"""Options sent only when set (zero is the kernel's default or means "none")."""
_BOND_ENUMS = (
    ("IFLA_BOND_XMIT_HASH_POLICY", "xmit_hash_policy"), ("IFLA_BOND_AD_LACP_RATE", "lacp_rate"),
    ("IFLA_BOND_ARP_VALIDATE", "arp_validate"), ("IFLA_BOND_ARP_ALL_TARGETS", "arp_all_targets"),
    ("IFLA_BOND_PRIMARY_RESELECT", "primary_reselect"), ("IFLA_BOND_FAIL_OVER_MAC", "fail_over_mac"),
    ("IFLA_BOND_AD_SELECT", "ad_select"),
)  # fmt: skip


class LinkRequestError(Exception):
    """A LinkSpec no request can be built from (an unknown kind, a bad key or endpoint)."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _bond_data(bond: BondMasterSpec) -> list[tuple[str, Any]]:
    data: list[tuple[str, Any]] = [("IFLA_BOND_MODE", bond.code("mode"))]
    data += [(attr, bond.code(option)) for attr, option in _BOND_ENUMS]
    data += [(attr, getattr(bond, option)) for attr, option in _BOND_INTS if getattr(bond, option)]
    if bond.use_carrier:
        data.append(("IFLA_BOND_USE_CARRIER", 1))
    return data


def new_link(spec: LinkSpecSpec, index_of: Callable[[str], int]) -> ifinfmsg:
    """``RTM_NEWLINK`` creating ``spec``'s logical link (down; the spec controller brings it up).
    ``index_of`` gives a link's index by name (a VLAN's parent)."""
    if spec.kind not in KINDS:
        raise LinkRequestError(
            f"link {spec.name}: kind {spec.kind!r} cannot be created",
            hint=f"Ichor creates {', '.join(KINDS)} links",
        )
    info: list[tuple[str, Any]] = [("IFLA_INFO_KIND", spec.kind)]
    attrs: list[tuple[str, Any]] = [("IFLA_IFNAME", spec.name)]
    if spec.mtu:
        attrs.append(("IFLA_MTU", spec.mtu))
    if spec.kind == "bond":
        info.append(("IFLA_INFO_DATA", {"attrs": _bond_data(spec.bond_master)}))
    elif spec.kind == "vlan":
        protocol = VLAN_PROTOCOLS.get(spec.vlan.protocol or "802.1q")
        if protocol is None or not 1 <= spec.vlan.vid <= 4094:
            raise LinkRequestError(
                f"link {spec.name}: VLAN {spec.vlan.vid} ({spec.vlan.protocol}) is not a VLAN",
                hint="machine.network.interfaces[].vlans[].vlanId is between 1 and 4094",
            )
        attrs.append(("IFLA_LINK", index_of(spec.parent_name)))
        info.append(("IFLA_INFO_DATA", {"attrs": [("IFLA_VLAN_ID", spec.vlan.vid),
                                                  ("IFLA_VLAN_PROTOCOL", protocol)]}))  # fmt: skip
    attrs.append(("IFLA_LINKINFO", {"attrs": info}))
    msg = ifinfmsg()
    msg["family"] = socket.AF_UNSPEC
    msg["attrs"] = attrs
    return msg


def enslave(index: int, master_index: int) -> ifinfmsg:
    """``RTM_NEWLINK`` on link ``index`` setting its master (a bond takes members that are down)."""
    msg = ifinfmsg()
    msg["family"] = socket.AF_UNSPEC
    msg["index"] = index
    msg["attrs"] = [("IFLA_MASTER", master_index)]
    return msg


def _key(text: str, what: str) -> str:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise LinkRequestError(f"{what} is not a base64 WireGuard key (32 bytes)",
                               hint=f"{what} comes from `wg genkey` / `wg pubkey`")  # fmt: skip
    return text


def _endpoint(text: str) -> dict[str, Any]:
    host, sep, port = text.rpartition(":")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
        number = int(port)
    except ValueError:
        address, number = None, 0
    if not sep or address is None or not 0 < number < 65536:
        raise LinkRequestError(
            f"WireGuard peer endpoint {text!r} is not <IP>:<port>",
            hint="machine.network.interfaces[].wireguard.peers[].endpoint: e.g. 192.168.1.3:51111 or [fd00::3]:51111",
        )
    return {"addr": str(address), "port": number}


def _allowed_ip(cidr: str) -> dict[str, Any]:
    network = ipaddress.ip_network(cidr, strict=False)
    family = socket.AF_INET6 if network.version == 6 else socket.AF_INET
    return {"attrs": [("WGALLOWEDIP_A_FAMILY", family), ("WGALLOWEDIP_A_IPADDR", network.network_address.packed),
                      ("WGALLOWEDIP_A_CIDR_MASK", network.prefixlen)]}  # fmt: skip


def wireguard_device(name: str, spec: WireguardSpec) -> wgmsg:
    """``WG_CMD_SET_DEVICE`` for link ``name``: the whole configuration, replacing what it had."""
    attrs: list[tuple[str, Any]] = [
        ("WGDEVICE_A_IFNAME", name),
        ("WGDEVICE_A_FLAGS", WGDEVICE_F_REPLACE_PEERS),
    ]
    if spec.private_key:
        attrs.append(("WGDEVICE_A_PRIVATE_KEY", _key(spec.private_key, "wireguard.privateKey")))
    attrs += [("WGDEVICE_A_LISTEN_PORT", spec.listen_port), ("WGDEVICE_A_FWMARK", spec.firewall_mark)]
    peers = []
    for peer in spec.peers:
        peer_attrs: list[tuple[str, Any]] = [
            ("WGPEER_A_PUBLIC_KEY", _key(peer.public_key, "wireguard.peers[].publicKey")),
            ("WGPEER_A_FLAGS", WGPEER_F_REPLACE_ALLOWEDIPS),
        ]
        if peer.preshared_key:
            peer_attrs.append(
                ("WGPEER_A_PRESHARED_KEY", _key(peer.preshared_key, "wireguard.peers[].presharedKey"))
            )
        if peer.endpoint:
            peer_attrs.append(("WGPEER_A_ENDPOINT", _endpoint(peer.endpoint)))
        keepalive = int(peer.persistent_keepalive_interval.total_seconds())
        peer_attrs.append(("WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL", keepalive))
        peer_attrs.append(("WGPEER_A_ALLOWEDIPS", [_allowed_ip(a) for a in peer.allowed_ips]))
        peers.append({"attrs": peer_attrs})
    if peers:
        attrs.append(("WGDEVICE_A_PEERS", peers))
    msg = wgmsg()
    msg["cmd"] = WG_CMD_SET_DEVICE
    msg["version"] = WG_GENL_VERSION
    msg["attrs"] = attrs
    return msg
