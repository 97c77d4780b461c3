"""The network controllers over a real kernel, in a network namespace this test makes and removes.

Root only. The namespace ``ichor-test-<random>`` gets one end of a veth pair as ``eth0``; the other
end stays in the root namespace, down and without addresses. The node's subnet and the network it
routes to are random 10.213.x.0/24 and 10.214.x.0/24: before anything else, each gets a blackhole
route of the lowest priority in the root namespace, so a packet to them can never leave by the
default route; they are removed last. The namespace, the veth and the blackholes go in a
``finally``, whatever happens.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"),
]

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"

FIRST = """version: v1alpha1
machine:
  type: worker
  network:
    hostname: netns-node
    interfaces:
      - deviceSelector: {{hardwareAddr: '{mac}'}}
        addresses: [{net}.2/24]
        mtu: 1400
        routes:
          - network: 0.0.0.0/0
            gateway: {net}.1
          - network: {far}.0/24
            gateway: {net}.1
            metric: 50
cluster: {{}}
"""
SECOND = """version: v1alpha1
machine:
  type: worker
  network:
    interfaces:
      - interface: eth0
        addresses: [{net}.2/24, {net}.3/24]
        mtu: 1400
        routes:
          - network: 0.0.0.0/0
            gateway: {net}.1
cluster: {{}}
"""


def _ip(*args: str) -> str:
    return proc.run(["ip", *args], timeout=10).stdout


@pytest.fixture
def netns() -> Iterator[tuple[str, str, str, str]]:
    """A fresh namespace with a veth end named eth0 in it: (namespace, eth0's MAC, subnet, far network)."""
    suffix, third = secrets.token_hex(3), secrets.randbelow(250) + 1
    ns, host_end = f"ichor-test-{suffix}", f"ichv{suffix}"
    net, far = f"10.213.{third}", f"10.214.{third}"
    blackholes: list[str] = []
    try:
        for cidr in (f"{net}.0/24", f"{far}.0/24"):
            _ip("route", "add", "blackhole", cidr, "metric", "4294967295")
            blackholes.append(cidr)
        _ip("netns", "add", ns)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
        mac = _ip("-n", ns, "-o", "link", "show", "eth0").split("link/ether ")[1].split()[0]
        yield ns, mac, net, far
    finally:
        proc.run(["ip", "link", "del", host_end], timeout=10, check=False)
        proc.run(["ip", "netns", "del", ns], timeout=10, check=False)
        for cidr in reversed(blackholes):
            proc.run(
                ["ip", "route", "del", "blackhole", cidr, "metric", "4294967295"], timeout=10, check=False
            )
        assert ns not in _ip("netns", "list")
        assert host_end not in _ip("-o", "link", "show")
        assert not [cidr for cidr in blackholes if cidr in _ip("route", "show")]


def test_static_address_route_and_mtu_land_in_the_namespace_and_go_when_unconfigured(
    netns: tuple[str, str, str, str], tmp_path: Path
) -> None:
    ns, mac, net, far = netns
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(FIRST.format(mac=mac, net=net, far=far))
    second.write_text(SECOND.format(net=net))
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    with subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, str(TESTS / "netns_node.py"), f"{net}.2",
         f"{first}=eth0/{net}.2/24", f"{second}=eth0/{net}.3/24"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
    ) as node:  # fmt: skip
        try:
            assert node.stdout is not None and node.stdin is not None
            assert node.stdout.readline().strip() == "applied 1"
            link = _ip("-n", ns, "-o", "link", "show", "eth0")
            assert "mtu 1400" in link and ",UP" in link
            assert f"inet {net}.2/24" in _ip("-n", ns, "-o", "addr", "show", "eth0")
            assert "UP" in _ip("-n", ns, "-o", "link", "show", "lo")  # the default layer brings lo up
            routes = _ip("-n", ns, "route", "show")
            assert f"default via {net}.1 dev eth0 proto static metric 1024" in routes
            assert f"{far}.0/24 via {net}.1 dev eth0 proto static metric 50" in routes

            node.stdin.write("\n")
            node.stdin.flush()
            assert node.stdout.readline().strip() == "applied 2"
            addresses = _ip("-n", ns, "-o", "addr", "show", "eth0")
            assert f"{net}.2/24" in addresses and f"{net}.3/24" in addresses
            routes = _ip("-n", ns, "route", "show")
            assert f"{far}.0/24" not in routes  # no longer configured: removed
            assert f"default via {net}.1" in routes
            node.stdin.write("\n")
            node.stdin.flush()
            assert node.wait(timeout=30) == 0
        finally:
            if node.poll() is None:
                os.killpg(node.pid, 9)
                node.wait()
    # Nothing of this reached the root namespace: its only routes there are the blackholes.
    assert f"{net}." not in _ip("-o", "addr", "show")
    assert [
        line.strip()
        for line in _ip("route", "show", "table", "all").splitlines()
        if net in line or far in line
    ] == [
        f"blackhole {net}.0/24 metric 4294967295",
        f"blackhole {far}.0/24 metric 4294967295",
    ]
