"""End to end: a Layer 2 VIP on a container cluster of three control planes (root only, as CI runs).

``machine.network.interfaces[].vip.ip`` on every control plane: one of them holds the shared IP and
apid answers on it from the cluster's bridge; the holder is killed (SIGKILL, no goodbye): etcd
expires its lease and another control plane takes the IP, announces it with gratuitous ARP, and the
VIP answers again from the host. The failover time is printed (a figure, not an assertion). Whatever
happens, the fixture destroys the cluster and removes what destroy could not.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in as _talosctl
from container_helpers import CONTAINER_NODES, ContainerCluster, free_cidr

from ichor.provision._processes import find, signal_and_wait

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "vip"
CONTROL_PLANES = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    cidr = free_cidr()
    home, state = tmp_path / "home", tmp_path / "clusters"
    home.mkdir()
    try:
        yield home, state, cidr
    finally:
        ContainerCluster(NAME, home, state, cidr).destroy()


def _answers(ip: str, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((ip, 50000), timeout=timeout):
            return True
    except OSError:
        return False


def _holders(home: Path, nodes: list[str], vip: str) -> list[str]:
    """The nodes with the VIP among their addresses (``talosctl get addresses``)."""
    held = []
    for node in nodes:
        out = _talosctl(home, "-n", node, "get", "addresses", timeout=30)
        assert out.exit_code == 0 or "connect" in out.stderr, out.stderr
        if f"eth0/{vip}/32" in out.stdout:
            held.append(node)
    return held


def _wait(what: str, check: object, limit: float) -> float:
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - start < limit, f"{what}: not within {limit:g}s"
        time.sleep(0.1)
    return time.monotonic() - start


def test_the_vip_moves_to_another_control_plane_when_its_holder_dies(cluster: tuple[Path, Path, str]) -> None:
    home, state, cidr = cluster
    prefix = cidr.rsplit(".", 1)[0]
    vip = f"{prefix}.100"
    nodes = [f"{prefix}.{2 + i}" for i in range(CONTROL_PLANES)]
    patch = json.dumps(
        {"machine": {"network": {"interfaces": [{"interface": "eth0", "dhcp": True, "vip": {"ip": vip}}]}}}
    )
    # no Kubernetes images: create waits for the etcd stages only, as the VIP needs nothing more
    created = _talosctl(home, "cluster", "create", "--provisioner", "container", "--name", NAME,
                        "--state", str(state), "--cidr", cidr, "--controlplanes", str(CONTROL_PLANES),
                        "--workers", "0", "--config-patch-control-plane", patch, "--wait-timeout", "5m",
                        "--kubernetes-images", "upstream", timeout=420)  # fmt: skip
    assert created.exit_code == 0, created.stderr

    _wait("the VIP answers", lambda: _answers(vip), 120)
    holders = _holders(home, nodes, vip)
    assert len(holders) == 1, holders
    holder = holders[0]
    name = f"{NAME}-controlplane-{nodes.index(holder) + 1}"
    victims = [p.id for p in find((state / NAME).resolve()) if p.node == name]
    assert victims, f"no process of {name}"

    killed_at = time.monotonic()
    signal_and_wait(victims, signal.SIGKILL, 10)
    assert not _answers(vip), "the VIP still answers with its holder dead"
    _wait("the VIP answers from another node", lambda: _answers(vip), 120)
    print(f"\nVIP {vip}: holder {holder} killed; answering again after {time.monotonic() - killed_at:.1f}s")
    survivors = [n for n in nodes if n != holder]
    # The address shows in `get addresses` once the new holder's netlink event is through: wait a bit.
    now: list[str] = []

    def one_survivor_holds_it() -> bool:
        now[:] = _holders(home, survivors, vip)
        return len(now) == 1

    _wait("one survivor lists the VIP in get addresses", one_survivor_holds_it, 30)
    assert now[0] != holder, now
