"""The DHCPv4 operator against a real dnsmasq, between two network namespaces this test makes.

Root only, needs dnsmasq (``apt-get install -y dnsmasq-base``). Namespace ``ichor-dhcps-<random>``
runs dnsmasq on one end of a veth pair with a reservation for the other end's MAC, which is ``eth0`` in
namespace ``ichor-dhcpn-<random>``, where the node's network controllers run (``netns_node.py``).
The subnet is a random 10.215.x.0/24: before anything else it gets a blackhole route of the lowest
priority in the root namespace (nothing of the test touches the root namespace otherwise), removed
last. Namespaces, processes and the blackhole go in a ``finally``, whatever happens.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("dnsmasq") is None,
        reason="needs root, iproute2 and dnsmasq (apt-get install -y dnsmasq-base)",
    ),
]

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"
# A veth is not a physical link (Talos's rule: ether without a kind), so the default layer's DHCP does
# not cover it: the config asks for DHCP on eth0, as the Advanced Networking guide's dhcp: true does.
DHCP_ON_ETH0 = """version: v1alpha1
machine:
  type: worker
  network:
    interfaces:
      - interface: eth0
        dhcp: true
cluster: {}
"""


def _ip(*args: str) -> str:
    return proc.run(["ip", *args], timeout=10).stdout


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def link() -> Iterator[tuple[str, str, str, str]]:
    """(server namespace, node namespace, the node's eth0 MAC, subnet prefix ``10.215.x``)."""
    suffix, third = secrets.token_hex(3), secrets.randbelow(250) + 1
    server_ns, node_ns, net = f"ichor-dhcps-{suffix}", f"ichor-dhcpn-{suffix}", f"10.215.{third}"
    blackhole = f"{net}.0/24"
    made: list[str] = []
    try:
        _ip("route", "add", "blackhole", blackhole, "metric", "4294967295")
        made.append("blackhole")
        for ns in (server_ns, node_ns):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("-n", server_ns, "link", "add", "srv0", "type", "veth", "peer", "name", "eth0", "netns", node_ns)
        _ip("-n", server_ns, "addr", "add", f"{net}.1/24", "dev", "srv0")
        _ip("-n", server_ns, "link", "set", "srv0", "up")
        mac = _ip("-n", node_ns, "-o", "link", "show", "eth0").split("link/ether ")[1].split()[0]
        yield server_ns, node_ns, mac, net
    finally:
        for ns in (node_ns, server_ns):
            if ns in made:
                proc.run(["ip", "netns", "del", ns], timeout=10, check=False)
        if "blackhole" in made:
            proc.run(["ip", "route", "del", "blackhole", blackhole, "metric", "4294967295"], timeout=10,
                     check=False)  # fmt: skip
        listed = _ip("netns", "list")
        assert server_ns not in listed and node_ns not in listed
        assert blackhole not in _ip("route", "show")


def _wait_for(predicate, what: str, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_the_operator_leases_a_reserved_address_from_dnsmasq_and_releases_it(
    link: tuple[str, str, str, str], tmp_path: Path
) -> None:
    server_ns, node_ns, mac, net = link
    leases = tmp_path / "dnsmasq.leases"
    config = tmp_path / "config.yaml"
    config.write_text(DHCP_ON_ETH0)
    log = (tmp_path / "dnsmasq.log").open("w")
    dnsmasq = subprocess.Popen(
        ["ip", "netns", "exec", server_ns, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0",
         "--interface=srv0", "--bind-interfaces", f"--dhcp-range={net}.100,{net}.150,255.255.255.0,2m",
         f"--dhcp-host={mac},{net}.23,leased-node", f"--dhcp-option=option:router,{net}.1",
         f"--dhcp-option=option:dns-server,{net}.1", f"--dhcp-option=option:ntp-server,{net}.1",
         "--domain=lab.test", f"--dhcp-leasefile={leases}", f"--pid-file={tmp_path / 'dnsmasq.pid'}",
         "--dhcp-authoritative", "--log-dhcp"],
        stdout=subprocess.DEVNULL, stderr=log, text=True, start_new_session=True,
    )  # fmt: skip
    log.close()
    node: subprocess.Popen[str] | None = None
    try:
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
        node = subprocess.Popen(
            ["ip", "netns", "exec", node_ns, sys.executable, str(TESTS / "netns_node.py"), f"{net}.23",
             f"{config}=eth0/{net}.23/24"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
        )  # fmt: skip
        assert node.stdout is not None and node.stdin is not None
        assert node.stdout.readline().strip() == "applied 1"
        assert f"inet {net}.23/24" in _ip("-n", node_ns, "-o", "addr", "show", "eth0")
        # protocol boot (Talos's for DHCP routes), which iproute2 prints as no protocol at all
        assert f"default via {net}.1 dev eth0 src {net}.23 metric 1024" in _ip("-n", node_ns, "route")
        assert mac in leases.read_text() and f"{net}.23 leased-node" in leases.read_text()
        # Stopping the node releases the lease: dnsmasq forgets it.
        node.stdin.write("\n")
        node.stdin.flush()
        assert node.wait(timeout=30) == 0
        _wait_for(lambda: mac not in leases.read_text(), "dnsmasq to drop the released lease")
    finally:
        if node is not None:
            _stop(node)
        _stop(dnsmasq)
    # Nothing of this reached the root namespace but the blackhole.
    assert f"{net}." not in _ip("-o", "addr", "show")
    assert [line.strip() for line in _ip("route", "show", "table", "all").splitlines() if net in line] == [
        f"blackhole {net}.0/24 metric 4294967295"
    ]
