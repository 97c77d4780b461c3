"""Bonds, VLANs, dummy and WireGuard links: machine config -> LinkSpecs (Talos's fields) -> the
kernel (a fake), and a kernel that lacks a kind (a container node's host kernel) as a wait that says so.

The host kernel of container nodes cannot create these links ("Unknown device type"), so the
end-to-end test waits for the VM platform; here the fake kernel of ``network_helpers`` creates them,
or refuses a kind as that kernel does.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

from controller_helpers import apply, run, running
from network_helpers import FakeNetlink, ether

from ichor.machined.controllers import network
from ichor.machined.cosi import WAIT_STATUSES, assert_resource, spec_to_plain
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_SPECS,
    LINK_SPECS,
    LINK_STATUSES,
    OPERATOR_SPECS,
    BondMasterSpec,
    ConfigLayer,
    LinkSpecSpec,
    LinkStatusSpec,
    VLANSpec,
    WireguardPeer,
    WireguardSpec,
)

MAC0, MAC1, MAC2 = "0a:58:0a:05:00:02", "0a:58:0a:05:00:03", "0a:58:0a:05:00:04"
PRIVATE = base64.b64encode(bytes(range(32))).decode()
PEER = base64.b64encode(bytes(range(1, 33))).decode()
CONFIG = f"""version: v1alpha1
machine:
  type: worker
  network:
    interfaces:
      - interface: bond0
        mtu: 9000
        bond:
          mode: 802.3ad
          lacpRate: fast
          xmitHashPolicy: layer3+4
          miimon: 100
          updelay: 200
          deviceSelectors:
            - hardwareAddr: "0a:58:0a:05:00:0[23]"
        vlans:
          - vlanId: 100
            mtu: 1500
            addresses: [10.100.0.2/24]
            routes: [{{network: 10.200.0.0/16, gateway: 10.100.0.1}}]
          - vlanId: 200
            dhcp: true
      - interface: dummy0
        dummy: true
        addresses: [169.254.9.1/32]
      - interface: wg0
        addresses: [10.9.0.1/24]
        wireguard:
          privateKey: {PRIVATE}
          listenPort: 51820
          peers:
            - publicKey: {PEER}
              endpoint: 192.168.1.3:51111
              persistentKeepaliveInterval: 25s
              allowedIPs: [10.9.0.0/24]
cluster: {{}}
"""


def _kernel() -> FakeNetlink:
    lo = LinkStatusSpec(index=1, type="loopback", flags="UP,LOOPBACK,RUNNING,LOWER_UP", mtu=65536)
    return FakeNetlink({"lo": lo, "eth0": ether(2, MAC0), "eth1": ether(3, MAC1), "eth2": ether(4, MAC2)})


def _own(tmp_path: Path) -> Layout:
    return Layout(root=tmp_path, address="10.100.0.2", own_netns=True)


def test_config_becomes_talos_link_specs_and_the_kernel_makes_the_links(tmp_path: Path) -> None:
    kernel = _kernel()

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, CONFIG)
            bond = await assert_resource(state, LINK_SPECS, "bond0")
            assert spec_to_plain(bond.spec) == {
                "name": "bond0", "logical": True, "up": True, "mtu": 9000, "kind": "bond", "type": "ether",
                "bondMaster": {"mode": "802.3ad", "xmitHashPolicy": "layer3+4", "lacpRate": "fast",
                               "arpValidate": "none", "arpAllTargets": "any", "primaryReselect": "always",
                               "failOverMac": "none", "adSelect": "stable", "miimon": 100, "updelay": 200},
                "layer": "configuration",
            }  # fmt: skip
            # The selector picks eth0 and eth1 (not eth2), in order, as the bond's members.
            for index, member in enumerate(["eth0", "eth1"]):
                spec = await assert_resource(state, LINK_SPECS, member)
                assert (spec.spec.master_name, spec.spec.slave_index, spec.spec.up) == ("bond0", index, True)
            vlan = await assert_resource(state, LINK_SPECS, "bond0.100")
            assert spec_to_plain(vlan.spec) == {
                "name": "bond0.100", "logical": True, "up": True, "mtu": 1500, "kind": "vlan", "type": "ether",
                "parentName": "bond0", "vlan": {"vlanID": 100, "vlanProtocol": "802.1q"}, "layer": "configuration",
            }  # fmt: skip
            wg = await assert_resource(state, LINK_SPECS, "wg0")
            assert (wg.spec.kind, wg.spec.type) == ("wireguard", "none")
            assert wg.spec.wireguard == WireguardSpec(
                private_key=PRIVATE, listen_port=51820,
                peers=(WireguardPeer(public_key=PEER, endpoint="192.168.1.3:51111",
                                     persistent_keepalive_interval=timedelta(seconds=25), allowed_ips=("10.9.0.0/24",)),),
            )  # fmt: skip
            dummy = await assert_resource(state, LINK_SPECS, "dummy0")
            assert (dummy.spec.kind, dummy.spec.logical) == ("dummy", True)
            # A plain link shows none of the logical parts.
            assert set(spec_to_plain((await assert_resource(state, LINK_SPECS, "lo")).spec)) == {
                "name",
                "logical",
                "up",
                "mtu",
                "kind",
                "type",
                "layer",
            }
            # A VLAN's addresses, routes and DHCP are on <parent>.<vlanId>.
            await assert_resource(state, ADDRESS_SPECS, "bond0.100/10.100.0.2/24")
            await assert_resource(state, OPERATOR_SPECS, "dhcp4/bond0.200")
            # Talos's default DHCP runs on physical links nothing configures (eth2), never on a
            # bond's members: a lease there would hold an address on a link that no longer receives.
            await assert_resource(state, OPERATOR_SPECS, "dhcp4/eth2")
            operators = {r.spec.link_name for r in state.list("network", OPERATOR_SPECS)}
            assert not operators & {"eth0", "eth1"}, operators

            # The kernel made them: the bond with its members, the VLANs on it, dummy and WireGuard.
            bond_link = await assert_resource(state, LINK_STATUSES, "bond0", lambda r: r.spec.kind == "bond")
            for member in ("eth0", "eth1"):
                await assert_resource(state, LINK_STATUSES, member,
                                      lambda r: r.spec.master_index == bond_link.spec.index and "UP" in r.spec.flags)  # fmt: skip
            await assert_resource(state, LINK_STATUSES, "bond0.100",
                                  lambda r: r.spec.link_index == bond_link.spec.index and r.spec.mtu == 1500)  # fmt: skip
            await assert_resource(state, LINK_STATUSES, "wg0", lambda r: "UP" in r.spec.flags)
            await assert_resource(state, LINK_STATUSES, "dummy0", lambda r: r.spec.kind == "dummy")
            assert kernel.wireguard["wg0"] == wg.spec.wireguard
        assert kernel.calls.count("create_link bond0 bond") == 1
        assert "enslave eth2 bond0" not in kernel.calls

    run(main)


def test_a_kernel_without_a_kind_is_a_wait_naming_it_never_a_crash_or_a_hot_loop(tmp_path: Path) -> None:
    kernel = _kernel()
    kernel.lacking = {"bond", "wireguard"}

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, CONFIG)
            wait = await assert_resource(
                state,
                WAIT_STATUSES,
                "network.LinkSpecController",
                lambda r: all(f"link {n}:" in r.spec.reason for n in ("wg0", "eth0", "bond0.100")),
            )
            reason = wait.spec.reason
            assert (
                "link bond0: this kernel cannot create bond links (Unknown device type): it lacks bond support"
                in reason
            )
            assert "link wg0: this kernel cannot create wireguard links" in reason
            # The bond's members and VLANs wait for it, saying why, and are not retried on a timer either.
            assert "link eth0: its bond bond0 does not exist: this kernel cannot create bond links" in reason
            assert (
                "link bond0.100: its parent bond0 does not exist: this kernel cannot create bond links"
                in reason
            )
            assert "the VM platform" in reason
            # What the kernel lacks is not retried on a timer...
            assert wait.spec.next_retry is None
            # ... and the rest is applied all the same: dummy0 is up with its address.
            await assert_resource(state, LINK_STATUSES, "dummy0", lambda r: "UP" in r.spec.flags)
            # Input changes re-run the controller, but the kernel is not asked for a bond again.
            for _ in range(5):
                kernel.changed()
                await asyncio.sleep(0.05)
            await assert_resource(state, WAIT_STATUSES, "network.LinkSpecController")
        assert kernel.calls.count("create_link bond0 bond") == 1
        assert kernel.calls.count("create_link wg0 wireguard") == 1
        assert not [call for call in kernel.calls if call.startswith("enslave")]

    run(main)


def test_layers_merge_as_talos_merges_link_specs() -> None:
    low = LinkSpecSpec(name="wg0", logical=True, kind="wireguard", mtu=1420,
                       wireguard=WireguardSpec(private_key=PRIVATE, listen_port=51820, firewall_mark=7,
                                               peers=(WireguardPeer(public_key=PEER),)))  # fmt: skip
    high = LinkSpecSpec(name="wg0", up=True, wireguard=WireguardSpec(listen_port=51821),
                        layer=ConfigLayer.CONFIGURATION)  # fmt: skip
    merged = low.merged(high)
    # A zero value in the higher layer keeps the lower's, WireGuard value by value.
    assert merged.wireguard == WireguardSpec(private_key=PRIVATE, listen_port=51821, firewall_mark=7,
                                             peers=(WireguardPeer(public_key=PEER),))  # fmt: skip
    assert (merged.up, merged.mtu, merged.kind, merged.layer) == (
        True,
        1420,
        "wireguard",
        ConfigLayer.CONFIGURATION,
    )
    bond = LinkSpecSpec(name="bond0", kind="bond", bond_master=BondMasterSpec(mode="active-backup"))
    over = bond.merged(LinkSpecSpec(name="bond0", bond_master=BondMasterSpec(mode="balance-xor", miimon=50)))
    assert over.bond_master == BondMasterSpec(mode="balance-xor", miimon=50)
    assert bond.merged(LinkSpecSpec(name="bond0")).bond_master.mode == "active-backup"
    vlan = LinkSpecSpec(name="eth0.5", parent_name="eth0", vlan=VLANSpec(vid=5, protocol="802.1q"))
    assert vlan.merged(LinkSpecSpec(name="eth0.5", up=True)).vlan == VLANSpec(vid=5, protocol="802.1q")
    member = LinkSpecSpec(name="eth1", master_name="bond0", slave_index=1)
    assert (member.merged(LinkSpecSpec(name="eth1", up=True)).master_name,
            member.merged(LinkSpecSpec(name="eth1", up=True)).slave_index) == ("bond0", 1)  # fmt: skip
