"""controllers/network/checks.py: a network config the node cannot do as asked is a wait naming the
YAML key with its indexes (``machine.network.interfaces[1].interface``), and, before it is applied,
a warning of ``ApplyConfiguration``; a change that leaves a link with dhcp off no address in a subnet
it is reached on now names ``interfaces[N].addresses[M]``."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

from controller_helpers import apply, run, running
from network_helpers import FakeNetlink, ether

from ichor.machined.controllers import network
from ichor.machined.controllers.network.checks import apply_warnings, cutoffs
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import AddressFamily, AddressStatusSpec
from ichor.machinery.config import Config, load_config

MAC0, MAC1 = "0a:58:0a:05:00:02", "0a:58:0a:05:00:03"
LINKS = {"eth0": ether(2, MAC0, up=True), "eth1": ether(3, MAC1, up=True)}


def _config(network: str, type: str = "worker") -> str:
    return f"version: v1alpha1\nmachine:\n  type: {type}\n  network:\n{network}cluster: {{}}\n"


def _loaded(text: str) -> Config:
    model = load_config(text).v1alpha1.model  # type: ignore[union-attr]
    assert isinstance(model, Config)
    return model


def _on(link: str, *prefixes: str) -> list[AddressStatusSpec]:
    return [
        AddressStatusSpec(
            address=ipaddress.ip_interface(p), link_name=link, link_index=2, family=AddressFamily.INET4
        )
        for p in prefixes
    ]


def _own(tmp_path: Path) -> Layout:
    return Layout(root=tmp_path, address="10.0.0.201", own_netns=True)


def _wait_id(controller: str, key: str) -> str:
    return f"network.{controller}/{key}"


def test_an_unknown_link_and_an_unreachable_gateway_are_waits_naming_their_keys(tmp_path: Path) -> None:
    kernel = FakeNetlink(dict(LINKS))
    bad = _config(
        "    interfaces:\n"
        "      - interface: eth0\n        addresses: [10.0.0.201/24]\n"
        "        routes: [{network: 10.77.0.0/16, gateway: 10.0.0.1}, {network: 0.0.0.0/0, gateway: 192.168.77.1}]\n"
        "      - interface: eth9\n        addresses: [10.1.0.1/24]\n"
    )
    gateway = _wait_id("RouteConfigController", "machine.network.interfaces[0].routes[1].gateway")
    link = _wait_id("LinkConfigController", "machine.network.interfaces[1].interface")

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, bad)
            wait = await assert_resource(state, WAIT_STATUSES, gateway)
            assert "192.168.77.1 is outside every subnet on eth0 (10.0.0.0/24)" in wait.spec.reason
            wait = await assert_resource(state, WAIT_STATUSES, link)
            assert "no link named 'eth9'" in wait.spec.reason, wait.spec.reason
            # The first route's gateway is fine: no wait names it.
            await assert_no_resource(
                state,
                WAIT_STATUSES,
                _wait_id("RouteConfigController", "machine.network.interfaces[0].routes[0].gateway"),
            )
            # Fixed, the waits go.
            apply(state, bad.replace("192.168.77.1", "10.0.0.254").replace("eth9", "eth1"))
            await assert_no_resource(state, WAIT_STATUSES, gateway)
            await assert_no_resource(state, WAIT_STATUSES, link)

    run(main)


def test_a_vip_outside_the_links_subnets_is_a_wait_on_a_control_plane_only(tmp_path: Path) -> None:
    kernel = FakeNetlink(dict(LINKS))
    device = "    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.201/24]\n        vip: {ip: 10.9.9.9}\n"
    key = _wait_id("OperatorConfigController", "machine.network.interfaces[0].vip.ip")

    async def main() -> None:
        async with running(*network.network_controllers(_own(tmp_path), kernel)) as state:
            apply(state, _config(device, "controlplane"))
            wait = await assert_resource(state, WAIT_STATUSES, key)
            assert "shared IP 10.9.9.9 is outside every subnet on eth0 (10.0.0.0/24)" in wait.spec.reason
            apply(state, _config(device.replace("10.9.9.9", "10.0.0.100"), "controlplane"))
            await assert_no_resource(state, WAIT_STATUSES, key)
            apply(state, _config(device, "worker"))  # workers ignore vip
            await asyncio.sleep(0.2)
            await assert_no_resource(state, WAIT_STATUSES, key)

    run(main)


def test_an_address_in_another_subnet_with_dhcp_off_is_a_cutoff_naming_the_address() -> None:
    now = _on("eth0", "10.5.0.3/24")
    moved = _loaded(_config("    interfaces:\n      - interface: eth0\n        dhcp: false\n"
                            "        addresses: [10.9.9.2/24, 10.9.8.2/24]\n"))  # fmt: skip
    problems = cutoffs(moved, LINKS, now)
    assert [p.key for p in problems] == [
        "machine.network.interfaces[0].addresses[0]",
        "machine.network.interfaces[0].addresses[1]",
    ]
    assert "reached on eth0 in 10.5.0.0/24" in problems[0].message and "--mode=try" in problems[0].message
    # One address still in the subnet, dhcp on, or another link: not cut off.
    kept = _loaded(
        _config("    interfaces:\n      - interface: eth0\n        addresses: [10.9.9.2/24, 10.5.0.9/24]\n")
    )
    assert cutoffs(kept, LINKS, now) == []
    dhcp = _loaded(
        _config(
            "    interfaces:\n      - interface: eth0\n        dhcp: true\n        addresses: [10.9.9.2/24]\n"
        )
    )
    assert cutoffs(dhcp, LINKS, now) == []
    assert cutoffs(moved, LINKS, _on("eth1", "10.5.0.3/24")) == []
    # dhcp off and no address at all: the link loses the one it has.
    bare = _loaded(
        _config("    interfaces:\n      - interface: eth0\n        dhcp: false\n        mtu: 1400\n")
    )
    assert [p.key for p in cutoffs(bare, LINKS, now)] == ["machine.network.interfaces[0].dhcp"]
    # A host-length address (a VIP) is no subnet the node is reached on.
    assert cutoffs(moved, LINKS, _on("eth0", "10.5.0.100/32")) == []


def test_apply_warnings_list_every_problem_with_its_key() -> None:
    config = _loaded(_config(
        "    interfaces:\n"
        "      - interface: eth0\n        addresses: [10.9.9.2/24]\n        vip: {ip: 10.7.7.7}\n"
        "        routes: [{network: 10.6.0.0/16, gateway: 10.9.9.1}, {network: 0.0.0.0/0, gateway: 10.8.0.1},\n"
        "                 {network: '::/0', gateway: 'fe80::1'}]\n"
        "      - interface: wlan7\n        dhcp: true\n",
        "controlplane",
    ))  # fmt: skip
    warnings = apply_warnings(config, LINKS, _on("eth0", "10.5.0.3/24"))
    keys = [w.split(": ", 1)[0] for w in warnings]
    assert keys == [
        "machine.network.interfaces[0].addresses[0]",
        "machine.network.interfaces[1].interface",
        "machine.network.interfaces[0].routes[1].gateway",
        "machine.network.interfaces[0].vip.ip",
    ], warnings
