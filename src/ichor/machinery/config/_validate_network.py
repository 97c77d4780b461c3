"""Talos's rules for ``machine.network``: links (bond/bridge membership, device selectors,
addressing, routes, VLANs), bond options, WireGuard keys and the KubeSpan MTU.
"""

from __future__ import annotations

import base64
import binascii
import re

from . import _models as m
from ._paths import PathElem
from ._validate_base import _ip_or_cidr_error, _parse_cidr, _parse_ip, _q, _Report

BOND_OPTIONS: dict[str, tuple[str, ...]] = {
    "mode": (
        "balance-rr",
        "active-backup",
        "balance-xor",
        "broadcast",
        "802.3ad",
        "balance-tlb",
        "balance-alb",
    ),
    "xmitHashPolicy": ("layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4"),
    "lacpRate": ("slow", "fast"),
    "arpValidate": ("none", "active", "backup", "all"),
    "arpAllTargets": ("any", "all"),
    "primaryReselect": ("always", "better", "failure"),
    "failOverMac": ("none", "active", "follow"),
    "adSelect": ("stable", "bandwidth", "count"),
}
"""The bond options that are names (nethelpers' enums), each in the kernel's order: a name's index
is the number the kernel takes."""
_BOND_MODES = BOND_OPTIONS["mode"]
# nethelpers *ByName: the accepted names ("" means the kernel default) and Talos's error text.
_BOND_ENUMS: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(
    (key, ("", *BOND_OPTIONS[key]), text)
    for key, text in (
        ("xmitHashPolicy", "invalid xmit hash policy"),
        ("lacpRate", "invalid lacp rate"),
        ("arpValidate", "invalid arp validate mode"),
        ("arpAllTargets", "invalid arp all targets mode"),
        ("primaryReselect", "invalid primary reselect mode"),
        ("failOverMac", "invalid fail over mac mode"),
        ("adSelect", "invalid ad select mode"),
    )
)
_KUBESPAN_MIN_MTU = 1280
_KUBESPAN_DEFAULT_MTU = 1420


def _validate_network(network: m.NetworkConfig, r: _Report) -> None:
    devices = network.interfaces or []
    secondary: dict[str, str] = {}
    for i, dev in enumerate(devices):
        name = dev.interface or ""
        base: list[PathElem] = ["machine", "network", "interfaces", i]
        if dev.bond is not None and dev.bridge is not None:
            r.error(
                base,
                f"interface has both bridge and bond sections set {_q(name)}: config sections are mutually exclusive",
            )
        members: list[str] = []
        if dev.bond is not None:
            members = dev.bond.interfaces or []
            if members and dev.bond.device_selectors:
                r.error(
                    [*base, "bond"],
                    f"interface {_q(name)} has both interfaces and selectors set: config sections are mutually exclusive",
                )
        if dev.bridge is not None:
            members = dev.bridge.interfaces or []
        for member in members:
            other = secondary.get(member)
            if other is not None and other != name:
                r.error(
                    base,
                    f"interface {_q(member)} is declared as part of two separate links: {_q(other)} and {_q(name)}",
                )
            secondary[member] = name

    for i, dev in enumerate(devices):
        if dev.ignore:
            continue
        _check_device(dev, ["machine", "network", "interfaces", i], secondary, r)

    kubespan = network.kubespan
    if kubespan is not None and kubespan.enabled:
        mtu = kubespan.mtu if kubespan.mtu is not None else _KUBESPAN_DEFAULT_MTU
        if mtu < _KUBESPAN_MIN_MTU:
            r.error(
                ["machine", "network", "kubespan", "mtu"],
                f"kubespan link MTU must be at least {_KUBESPAN_MIN_MTU}",
            )


def _check_device(dev: m.Device, base: list[PathElem], secondary: dict[str, str], r: _Report) -> None:
    name = dev.interface or ""
    iface, sel = "networking.os.device.interface", "networking.os.device.deviceSelector"
    if not name and dev.device_selector is None:
        r.error(base, f"[{iface}], [{sel}]: required either config section to be set")
    elif name and dev.device_selector is not None:
        r.error(base, f"[{iface}], [{sel}]: config sections are mutually exclusive")
    if dev.device_selector is not None and not any(
        v is not None for v in dev.device_selector.model_dump().values()
    ):
        r.error([*base, "deviceSelector"], f"[{sel}]: config section should contain at least one field")
    if dev.bond is not None:
        _check_bond(dev.bond, [*base, "bond"], r)
    if dev.wireguard is not None:
        _check_wireguard(dev.wireguard, [*base, "wireguard"], r)
    for j, vlan in enumerate(dev.vlans or []):
        vbase = [*base, "vlans", j]
        label = f"{name}.{vlan.vlan_id or 0}"
        if vlan.addresses and vlan.cidr:
            r.error(
                vbase, f"[networking.os.device.vlan] {label}: vlan can't have both .cidr and .addresses set"
            )
        if vlan.cidr:
            err = _ip_or_cidr_error(vlan.cidr)
            if err:
                r.error([*vbase, "cidr"], f"[networking.os.device.vlan.CIDR] {label}: {err}")
        for k, address in enumerate(vlan.addresses or []):
            err = _ip_or_cidr_error(address)
            if err:
                r.error([*vbase, "addresses", k], f"[networking.os.device.vlan.addresses] {label}: {err}")

    # CheckDeviceAddressing
    if name in secondary and (dev.dhcp or dev.cidr or dev.addresses or dev.vip is not None):
        r.error(
            base,
            f"[networking.os.device] {_q(name)}: bonded/bridged interface shouldn't have any addressing methods configured",
        )
    if dev.addresses and dev.cidr:
        r.error(
            base, f"[networking.os.device] {_q(name)}: interface can't have both .cidr and .addresses set"
        )
    if dev.cidr:
        err = _ip_or_cidr_error(dev.cidr)
        if err:
            r.error([*base, "cidr"], f"[networking.os.device.CIDR] {_q(name)}: {err}")
        r.warn(
            [*base, "cidr"],
            f"{_q(name)}: machine.network.interface.cidr is deprecated, please use machine.network.interface.addresses",
        )
    for k, address in enumerate(dev.addresses or []):
        err = _ip_or_cidr_error(address)
        if err:
            r.error([*base, "addresses", k], f"[networking.os.device.addresses] {_q(name)}: {err}")
    if dev.vip is not None and not _parse_ip(dev.vip.ip or ""):
        r.error(
            [*base, "vip", "ip"],
            f"[networking.os.device.vip] failed to parse {_q(dev.vip.ip or '')} as IP address",
        )

    # CheckDeviceRoutes
    for k, route in enumerate(dev.routes or []):
        rbase = [*base, "routes", k]
        label = f"networking.os.device.route[{k}]"
        if route.network and not _parse_cidr(route.network):
            r.error([*rbase, "network"], f"[{label}.network] {_q(route.network)}: invalid network address")
        if route.gateway and not _parse_ip(route.gateway):
            r.error([*rbase, "gateway"], f"[{label}.gateway] {_q(route.gateway)}: invalid network address")
        if not route.gateway and not route.network:
            r.error(rbase, f"[{label}]: either network or gateway should be set")
        if route.source and not _parse_ip(route.source):
            r.error([*rbase, "source"], f"[{label}.source] {_q(route.source)}: invalid network address")


def _check_bond(bond: m.Bond, base: list[PathElem], r: _Report) -> None:
    raw = bond.model_dump(by_alias=True)
    mode = bond.mode or ""
    mode_name = mode
    if mode not in _BOND_MODES:
        r.error([*base, "mode"], f"invalid bond type {mode}")
        mode_name = "balance-rr"  # Go falls back to the zero value
    for key, allowed, text in _BOND_ENUMS:
        value = raw.get(key) or ""
        if value not in allowed:
            r.error([*base, key], f"{text} {value}")
    miimon = bond.miimon or 0
    updelay, downdelay = bond.updelay or 0, bond.downdelay or 0
    if miimon == 0:
        if updelay != 0:
            r.error([*base, "updelay"], "bond.upDelay can't be set if miiMon is zero")
        if downdelay != 0:
            r.error([*base, "downdelay"], "bond.downDelay can't be set if miiMon is zero")
    else:
        if updelay % miimon != 0:
            r.error([*base, "updelay"], "bond.upDelay should be a multiple of miiMon")
        if downdelay % miimon != 0:
            r.error([*base, "downdelay"], "bond.downDelay should be a multiple of miiMon")
    if bond.arp_ip_target:
        r.error([*base, "arpIPTarget"], "bond.arpIPTarget is not supported")
    if bond.lacp_rate and mode_name != "802.3ad":
        r.error([*base, "lacpRate"], "bond.lacpRate is only available in 802.3ad mode")
    if bond.ad_actor_system:
        r.error([*base, "adActorSystem"], "bond.adActorSystem is not supported")
    if mode_name in ("802.3ad", "balance-alb", "balance-tlb") and bond.arp_validate:
        r.error([*base, "arpValidate"], f"bond.arpValidate is not available in {mode_name} mode")
    if mode_name not in ("active-backup", "balance-alb", "balance-tlb") and bond.primary:
        r.error([*base, "primary"], f"bond.primary is not available in {mode_name} mode")
    if mode_name in ("802.3ad", "balance-alb", "balance-tlb") and (bond.arp_interval or 0) > 0:
        r.error([*base, "arpInterval"], f"bond.arpInterval is not available in {mode_name} mode")
    if mode_name != "balance-rr" and (bond.packets_per_slave or 0) > 1:
        r.error([*base, "packetsPerSlave"], f"bond.packetsPerSlave is not available in {mode_name} mode")
    if mode_name not in ("balance-alb", "balance-tlb") and (bond.tlb_dynamic_lb or 0) > 0:
        r.error([*base, "tlbDynamicLb"], f"bond.tlbDynamicTLB is not available in {mode_name} mode")
    if mode_name != "802.3ad" and (bond.ad_actor_sys_prio or 0) > 0:
        r.error([*base, "adActorSysPrio"], "bond.adActorSysPrio is only available in 802.3ad mode")
    if mode_name != "802.3ad" and (bond.ad_user_port_key or 0) > 0:
        r.error([*base, "adUserPortKey"], "bond.adUserPortKey is only available in 802.3ad mode")


def _wireguard_key_error(key: str) -> str | None:
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return "illegal base64 data"
    if len(raw) != 32:
        return f"wrong key {_q(key)} length: {len(raw)}"
    return None


def _check_wireguard(wg: m.DeviceWireguardConfig, base: list[PathElem], r: _Report) -> None:
    err = _wireguard_key_error(wg.private_key or "")
    if err:
        r.error([*base, "privateKey"], f"private key is invalid: {err}")
    for i, peer in enumerate(wg.peers or []):
        pbase = [*base, "peers", i]
        err = _wireguard_key_error(peer.public_key or "")
        if err:
            r.error([*pbase, "publicKey"], f"public key invalid: {err}")
        if peer.endpoint and not re.search(r":\d+$", peer.endpoint):
            r.error([*pbase, "endpoint"], f"peer endpoint {_q(peer.endpoint)} is invalid")
        for j, allowed in enumerate(peer.allowed_ips or []):
            if not _parse_cidr(allowed):
                r.error(
                    [*pbase, "allowedIPs", j],
                    f"peer allowed IP {_q(allowed)} is invalid: invalid CIDR address: {allowed}",
                )
