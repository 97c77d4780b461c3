"""End to end: bad network config on a container cluster (root only, as CI runs).

One 1+1 cluster for every assert: a route whose gateway is outside every subnet of its link and an
interface the node has no link of (on the worker), a VIP outside the control plane's subnet: each is
applied, reported by ``apply-config`` as a warning and by ``get waits`` as a wait naming its key
with indexes, and the API keeps answering. Last, the worker's eth0 is moved to another subnet with
dhcp off in ``--mode=try``: apply-config warns, the client loses the node, and after the timeout the
node reverts and answers on its original address again (the times are printed, figures not
assertions).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, ContainerCluster, connects, container_cluster, until

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

TRY_TIMEOUT = 20.0


def _apply(
    cluster: ContainerCluster, node: str, name: str, patch: list[dict[str, object]], *mode: str
) -> str:
    """``apply-config`` of ``name``'s config file with ``patch``; its stderr (the warnings)."""
    file = cluster.state_dir / f"{cluster.name}-{name}.yaml"
    applied = cluster.talosctl(
        "-n", node, "apply-config", "-f", str(file), "--config-patch", json.dumps(patch), *mode
    )
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    return applied.stderr


def _waits(cluster: ContainerCluster, node: str) -> str:
    shown = cluster.talosctl("-n", node, "get", "waits", "-o", "yaml", timeout=30)
    return shown.stdout if shown.exit_code == 0 else ""


def _answers(cluster: ContainerCluster, node: str) -> bool:
    return cluster.talosctl("-n", node, "version", timeout=30).exit_code == 0


def test_bad_network_config_says_why_and_try_mode_reverts_a_cutoff(tmp_path: Path) -> None:
    with container_cluster(tmp_path, "nfault") as cluster:
        cluster.create()
        cp, worker = cluster.address(2), cluster.address(3)

        # A route via a gateway no subnet of eth0 covers, and an interface the node has none of.
        bad = [
            {"op": "add", "path": "/machine/network/interfaces/0/routes",
             "value": [{"network": "10.77.0.0/16", "gateway": "192.168.77.1"}]},
            {"op": "add", "path": "/machine/network/interfaces/-",
             "value": {"interface": "eth9", "addresses": ["10.66.0.1/24"]}},
        ]  # fmt: skip
        warned = _apply(cluster, worker, "worker-1", bad, "--mode", "no-reboot")
        gateway, link = (
            "machine.network.interfaces[0].routes[0].gateway",
            "machine.network.interfaces[1].interface",
        )
        assert gateway in warned and link in warned, warned
        until("the waits name both keys", lambda: gateway in (w := _waits(cluster, worker)) and link in w, 60)
        assert "192.168.77.1 is outside every subnet on eth0" in _waits(cluster, worker)
        assert _answers(cluster, worker)

        # A VIP outside the control plane's subnet.
        vip = [{"op": "add", "path": "/machine/network/interfaces/0/vip", "value": {"ip": "10.99.0.100"}}]
        key = "machine.network.interfaces[0].vip.ip"
        warned = _apply(cluster, cp, "controlplane-1", vip, "--mode", "no-reboot")
        assert key in warned, warned
        until("the wait names the VIP's key", lambda: key in _waits(cluster, cp), 60)
        assert "shared IP 10.99.0.100 is outside every subnet on eth0" in _waits(cluster, cp)
        assert _answers(cluster, cp)

        # eth0 moved to another subnet with dhcp off, in try mode: cut off, then reverted.
        moved = [{"op": "replace", "path": "/machine/network/interfaces/0",
                  "value": {"interface": "eth0", "dhcp": False, "addresses": ["10.98.0.3/24"]}}]  # fmt: skip
        applied_at = time.monotonic()
        warned = _apply(cluster, worker, "worker-1", moved, "--mode", "try", "--timeout", f"{TRY_TIMEOUT:g}s")
        assert "machine.network.interfaces[0].addresses[0]" in warned and "--mode=try" in warned, warned
        lost = until("the worker is cut off", lambda: not connects(worker, 50000), TRY_TIMEOUT)
        until("the worker answers again", lambda: connects(worker, 50000), TRY_TIMEOUT + 90)
        since = time.monotonic() - applied_at
        print(
            f"\ntry mode ({TRY_TIMEOUT:g}s): lost {lost:.1f}s after apply, answering again {since:.1f}s after apply"
        )
        assert since >= TRY_TIMEOUT - 1
        assert _answers(cluster, worker)
        addresses = cluster.talosctl("-n", worker, "get", "addresses")
        assert f"eth0/{worker}/24" in addresses.stdout and "10.98.0.3" not in addresses.stdout, (
            addresses.stdout
        )
