"""End to end: each container node runs two real containerd processes (system and CRI) as Talos does.

One control plane, no worker: ``talosctl services`` shows ``containerd`` and ``cri`` Running and
healthy, ``image ls`` prints empty tables with Talos's headers for both namespaces, ``containers``
answers for both, ``logs cri`` holds containerd's own output, and after destroy no process, mount or
of the cluster is left (containerd and its shims carry the node's marks).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster

from ichor.provision._processes import find

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "ctrd"


def _services_up(cluster, node: str, deadline: float) -> str:
    while True:
        out = cluster.talosctl("-n", node, "services").stdout
        rows = {line.split()[1]: line.split() for line in out.splitlines()[1:] if len(line.split()) > 3}
        if all(rows.get(s, [])[2:4] == ["Running", "OK"] for s in ("containerd", "cri")):
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"containerd services not healthy:\n{out}")
        time.sleep(1)


def test_containerd_services_images_containers_and_cleanup(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0")
        node = cluster.address(2)
        services = _services_up(cluster, node, time.monotonic() + 120)
        assert "containerd" in services and "cri" in services

        for namespace in ("system", "cri"):
            listed = cluster.talosctl("-n", node, "image", "ls", "--namespace", namespace)
            assert listed.exit_code == 0, listed.stderr
            assert listed.stdout.split() == ["NODE", "IMAGE", "DIGEST", "SIZE", "CREATED"], listed.stdout

        system = cluster.talosctl("-n", node, "containers")
        assert system.exit_code == 0, system.stderr
        assert system.stdout.split() == ["NODE", "NAMESPACE", "ID", "IMAGE", "PID", "STATUS"]
        cri = cluster.talosctl("-n", node, "containers", "-k")
        assert cri.exit_code == 0, cri.stderr

        logs = cluster.talosctl("-n", node, "logs", "cri")
        assert "containerd successfully booted" in logs.stdout, logs.stdout[-2000:]
        assert "/run/containerd/containerd.sock" in logs.stdout
        system_logs = cluster.talosctl("-n", node, "logs", "containerd")
        assert "/system/run/containerd/containerd.sock" in system_logs.stdout

        state_dir = cluster.state_dir
        cluster.destroy()
        assert list(find(state_dir)) == []
        mounts = Path("/proc/self/mountinfo").read_text()
        assert str(state_dir) not in mounts
