"""The netlink requests that make bonds, VLANs, dummy and WireGuard links, encoded and read back.

Each test encodes the message machined would send and checks the bytes the kernel would read: the
attribute types and values of ``IFLA_LINKINFO``/``IFLA_INFO_DATA`` and of the wireguard family's
``WG_CMD_SET_DEVICE``. Refused specs say what is wrong and name the config key.
"""

from __future__ import annotations

import base64
import errno
import os
import shutil
import socket
import struct
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyroute2.netlink.generic.wireguard import wgmsg

from ichor.machined.linkrequests import LinkRequestError, enslave, new_link, wireguard_device
from ichor.machined.resources import BondMasterSpec, LinkSpecSpec, VLANSpec, WireguardPeer, WireguardSpec

KEY = bytes(range(32))
PEER = bytes(range(100, 132))


def _attrs(data: bytes) -> dict[int, bytes]:
    """Top-level netlink attributes of ``data`` by type (nested flag cleared): the kernel's view."""
    found: dict[int, bytes] = {}
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, offset)
        found[kind & 0x3FFF] = data[offset + 4 : offset + length]
        offset += (length + 3) & ~3
    return found


def _encoded(msg: Any, header: int) -> dict[int, bytes]:
    msg.encode()
    return _attrs(msg.data[header:])


IFINFO = 16 + 16  # nlmsghdr + ifinfomsg
GENL = 16 + 4  # nlmsghdr + genlmsghdr
IFLA_IFNAME, IFLA_MTU, IFLA_LINK, IFLA_MASTER, IFLA_LINKINFO = 3, 4, 5, 10, 18
IFLA_INFO_KIND, IFLA_INFO_DATA = 1, 2


def test_a_bond_carries_its_mode_and_options_in_info_data() -> None:
    spec = LinkSpecSpec(name="bond0", logical=True, kind="bond", mtu=9000, bond_master=BondMasterSpec(
        mode="802.3ad", lacp_rate="fast", xmit_hash_policy="layer3+4", miimon=100, updelay=200, use_carrier=True))  # fmt: skip
    top = _encoded(new_link(spec, lambda name: 0), IFINFO)
    assert top[IFLA_IFNAME] == b"bond0\0" and struct.unpack("I", top[IFLA_MTU]) == (9000,)
    info = _attrs(top[IFLA_LINKINFO])
    assert info[IFLA_INFO_KIND].rstrip(b"\0") == b"bond"
    bond = _attrs(info[IFLA_INFO_DATA])
    # IFLA_BOND_MODE (1) = 4 (802.3ad), AD_LACP_RATE (21) = 1 (fast), XMIT_HASH_POLICY (14) = 1 (layer3+4)
    assert (bond[1][0], bond[21][0], bond[14][0]) == (4, 1, 1)
    # MIIMON (3) and UPDELAY (4) as u32, USE_CARRIER (6) = 1; an option left at zero is not sent.
    assert struct.unpack("I", bond[3]) == (100,) and struct.unpack("I", bond[4]) == (200,) and bond[6][0] == 1
    assert 5 not in bond  # DOWNDELAY


def test_a_vlan_names_its_parent_id_and_protocol_big_endian() -> None:
    spec = LinkSpecSpec(name="eth0.100", logical=True, kind="vlan", parent_name="eth0",
                        vlan=VLANSpec(vid=100, protocol="802.1ad"))  # fmt: skip
    top = _encoded(new_link(spec, {"eth0": 7}.__getitem__), IFINFO)
    assert struct.unpack("I", top[IFLA_LINK]) == (7,)
    info = _attrs(top[IFLA_LINKINFO])
    assert info[IFLA_INFO_KIND].rstrip(b"\0") == b"vlan"
    vlan = _attrs(info[IFLA_INFO_DATA])
    assert struct.unpack("H", vlan[1]) == (100,)  # IFLA_VLAN_ID
    assert vlan[5] == b"\x88\xa8"  # IFLA_VLAN_PROTOCOL, network order


@pytest.mark.parametrize("kind", ["dummy", "wireguard"])
def test_dummy_and_wireguard_links_are_a_kind_without_data(kind: str) -> None:
    top = _encoded(new_link(LinkSpecSpec(name="x0", logical=True, kind=kind), lambda name: 0), IFINFO)
    info = _attrs(top[IFLA_LINKINFO])
    assert info[IFLA_INFO_KIND].rstrip(b"\0") == kind.encode() and IFLA_INFO_DATA not in info
    assert IFLA_MTU not in top  # no MTU asked: the kernel's default


def test_a_bond_member_gets_its_master() -> None:
    msg = enslave(3, 9)
    msg.encode()
    assert struct.unpack_from("i", msg.data, 16 + 4) == (3,)  # ifi_index
    assert struct.unpack("I", _attrs(msg.data[IFINFO:])[IFLA_MASTER]) == (9,)


def test_wireguard_set_device_replaces_peers_with_keys_endpoint_and_allowed_ips() -> None:
    spec = WireguardSpec(private_key=base64.b64encode(KEY).decode(), listen_port=51820, firewall_mark=7, peers=(
        WireguardPeer(public_key=base64.b64encode(PEER).decode(), endpoint="[fd00::3]:51111",
                      persistent_keepalive_interval=timedelta(seconds=25), allowed_ips=("10.9.0.0/24", "fd01::/64")),
    ))  # fmt: skip
    msg = wireguard_device("wg0", spec)
    msg.encode()
    assert msg.data[16] == 1  # WG_CMD_SET_DEVICE
    device = _attrs(msg.data[GENL:])
    # IFNAME (2), PRIVATE_KEY (3) raw, FLAGS (5) = REPLACE_PEERS, LISTEN_PORT (6), FWMARK (7)
    assert device[2] == b"wg0\0" and device[3] == KEY and struct.unpack("I", device[5]) == (1,)
    assert struct.unpack("H", device[6]) == (51820,) and struct.unpack("I", device[7]) == (7,)
    (peer_bytes,) = _attrs(device[8]).values()  # PEERS (8): one nested peer
    peer = _attrs(peer_bytes)
    assert peer[1] == PEER and struct.unpack("I", peer[3]) == (2,)  # PUBLIC_KEY, FLAGS = REPLACE_ALLOWEDIPS
    family, port = (
        struct.unpack_from("H>H".replace("H>", "H"), peer[4])[0],
        struct.unpack_from(">H", peer[4], 2)[0],
    )
    assert (family, port) == (socket.AF_INET6, 51111)
    assert socket.inet_ntop(socket.AF_INET6, peer[4][8:24]) == "fd00::3"
    assert struct.unpack("H", peer[5]) == (25,)  # PERSISTENT_KEEPALIVE_INTERVAL in seconds
    allowed = [_attrs(a) for a in _attrs(peer[9]).values()]
    assert [(a[1], a[2], a[3][0]) for a in allowed] == [
        (struct.pack("H", socket.AF_INET), socket.inet_aton("10.9.0.0"), 24),
        (struct.pack("H", socket.AF_INET6), socket.inet_pton(socket.AF_INET6, "fd01::"), 64),
    ]
    # And pyroute2 reads back what was sent.
    decoded = wgmsg(msg.data)
    decoded.decode()
    assert decoded.get_attr("WGDEVICE_A_IFNAME") == "wg0"


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        (LinkSpecSpec(name="br0", logical=True, kind="bridge"), "kind 'bridge' cannot be created", "bond, vlan"),
        (LinkSpecSpec(name="eth0.0", logical=True, kind="vlan", parent_name="eth0", vlan=VLANSpec(vid=0)),
         "VLAN 0", "vlanId is between 1 and 4094"),
        (LinkSpecSpec(name="eth0.9", logical=True, kind="vlan", parent_name="eth0",
                      vlan=VLANSpec(vid=4095, protocol="802.1q")), "VLAN 4095", "vlanId"),
        (LinkSpecSpec(name="eth0.9", logical=True, kind="vlan", parent_name="eth0",
                      vlan=VLANSpec(vid=9, protocol="qinq")), "VLAN 9 (qinq)", "vlanId"),
    ],
)  # fmt: skip
def test_a_link_no_request_can_make_is_refused(spec: LinkSpecSpec, message: str, hint: str) -> None:
    with pytest.raises(LinkRequestError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        new_link(spec, lambda name: 2)
    assert hint in err.value.hint


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        (WireguardSpec(private_key="c2hvcnQ="), "wireguard.privateKey is not a base64 WireGuard key", "wg genkey"),
        (WireguardSpec(peers=(WireguardPeer(public_key="!!"),)), "wireguard.peers[].publicKey", "wg pubkey"),
        (WireguardSpec(peers=(WireguardPeer(public_key=base64.b64encode(PEER).decode(), endpoint="peer:51820"),)),
         "endpoint 'peer:51820' is not <IP>:<port>", "wireguard.peers[].endpoint"),
        (WireguardSpec(peers=(WireguardPeer(public_key=base64.b64encode(PEER).decode(), endpoint="10.0.0.1:0"),)),
         "endpoint '10.0.0.1:0'", "192.168.1.3:51111"),
    ],
)  # fmt: skip
def test_wireguard_input_that_is_wrong_is_refused_naming_the_key(
    spec: WireguardSpec, message: str, hint: str
) -> None:
    with pytest.raises(LinkRequestError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        wireguard_device("wg0", spec)
    assert hint in err.value.hint


ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
PROBE = """
import asyncio
from ichor.machined.netlink import KernelNetlink, NetlinkError
from ichor.machined.resources import LinkSpecSpec
async def main():
    kernel = KernelNetlink()
    try:
        await kernel.create_link(LinkSpecSpec(name="probe0", logical=True, kind="dummy", type="ether"))
        print("created", "probe0" in await kernel.links())
    except NetlinkError as err:
        print("refused", err.code, err)
    await kernel.close()
asyncio.run(main())
"""


@ROOT
def test_the_real_kernel_makes_the_link_or_says_it_lacks_the_kind(tmp_path: Path) -> None:
    """In a network namespace of its own (gone with the process): this host's kernel lacks dummy."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    out = subprocess.run(["unshare", "-n", sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout.strip()  # fmt: skip
    assert out in ("created True", f"refused {errno.EOPNOTSUPP} this kernel cannot create dummy links "
                   "(Unknown device type): it lacks dummy support"), out  # fmt: skip
