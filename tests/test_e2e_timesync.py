"""time.SyncController against a real NTP server (chrony) across two network namespaces this test makes.

Root only, needs chrony (``apt-get install -y chrony``). ``chronyd -d -x`` runs in namespace
``ichor-ntps-<random>`` (``-x``: it never touches the clock, the host's included), serving its local
clock at stratum 8 on 10.216.x.1; the node's controllers run in ``ichor-ntpn-<random>`` behind a veth.
The subnet is blackholed in the root namespace first (lowest priority) and unblackholed last.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ichor.machinery import proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("chronyd") is None,
        reason="needs root, iproute2 and chrony (apt-get install -y chrony)",
    ),
]

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


def _ip(*args: str) -> str:
    return proc.run(["ip", *args], timeout=10).stdout


def test_a_node_with_its_own_network_syncs_from_chrony_without_setting_the_clock(tmp_path: Path) -> None:
    suffix, third = secrets.token_hex(3), secrets.randbelow(250) + 1
    server_ns, node_ns, net = f"ichor-ntps-{suffix}", f"ichor-ntpn-{suffix}", f"10.216.{third}"
    conf = tmp_path / "chrony.conf"
    conf.write_text(f"allow all\nlocal stratum 8\nbindaddress {net}.1\ncmdport 0\n"
                    f"pidfile {tmp_path / 'chronyd.pid'}\n")  # fmt: skip
    made: list[str] = []
    chronyd: subprocess.Popen[str] | None = None
    try:
        _ip("route", "add", "blackhole", f"{net}.0/24", "metric", "4294967295")
        made.append("blackhole")
        for ns in (server_ns, node_ns):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("-n", server_ns, "link", "add", "srv0", "type", "veth", "peer", "name", "eth0", "netns", node_ns)
        for ns, link, address in ((server_ns, "srv0", f"{net}.1/24"), (node_ns, "eth0", f"{net}.2/24")):
            _ip("-n", ns, "addr", "add", address, "dev", link)
            _ip("-n", ns, "link", "set", link, "up")
        with (tmp_path / "chronyd.log").open("w") as log:
            chronyd = subprocess.Popen(["ip", "netns", "exec", server_ns, "chronyd", "-d", "-x", "-f", str(conf)],
                                       stdout=log, stderr=log, text=True, start_new_session=True)  # fmt: skip
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
        node = proc.run(["ip", "netns", "exec", node_ns, sys.executable, str(TESTS / "netns_timesync.py"), f"{net}.1"],
                        timeout=60, env=env, check=False)  # fmt: skip
        assert node.stdout.strip() == "synced", node.stdout + (tmp_path / "chronyd.log").read_text()
        assert "Disabled control of system clock" in (tmp_path / "chronyd.log").read_text()
    finally:
        if chronyd is not None:
            os.killpg(chronyd.pid, 15)
            chronyd.wait(timeout=10)
        for ns in (node_ns, server_ns):
            if ns in made:
                proc.run(["ip", "netns", "del", ns], timeout=10, check=False)
        if "blackhole" in made:
            proc.run(["ip", "route", "del", "blackhole", f"{net}.0/24", "metric", "4294967295"], timeout=10,
                     check=False)  # fmt: skip
    assert server_ns not in _ip("netns", "list") and node_ns not in _ip("netns", "list")
    assert f"{net}." not in _ip("route", "show", "table", "all")
