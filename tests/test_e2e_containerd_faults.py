"""End to end: kill -9 a node's ``cri`` or ``containerd`` process and the supervisor brings it back.

One control plane with the cluster's registry: busybox is pulled into both containerd instances,
then each containerd process (found on the host by the node's marks and its config file) is killed
with SIGKILL. ``talosctl service <id>`` then shows the crash ("going to restart forever: signal:
killed"), a new process started, and Running with a successful health check again; the images
pulled before are still listed (containerd's root is on the node's EPHEMERAL) and a pull works.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster
from registry_helpers import REGISTRY_TOOLS, publish_busybox

from ichor.provision._processes import find

pytestmark = [pytest.mark.e2e, CONTAINER_NODES, REGISTRY_TOOLS]

NAME = "ctrdkill"
IMAGE = "docker.io/library/busybox:1.36"
CONFIGS = {"cri": "/etc/cri/containerd.toml", "containerd": "/etc/containerd/config.toml"}
NAMESPACES = {"cri": "cri", "containerd": "system"}
RECOVERY = 90.0
"""How long a restarted containerd may take to be Running and healthy on this loaded machine."""


def _containerd_pid(state_dir: Path, node: str, service: str) -> int:
    found = [p for p in find(state_dir) if p.node == node and p.role == "containerd"
             and CONFIGS[service] in p.command]  # fmt: skip
    assert len(found) == 1, found
    return found[0].id.pid


def _service(cluster, node: str, service: str) -> dict[str, str | list[str]]:  # type: ignore[no-untyped-def]
    out = cluster.talosctl("-n", node, "service", service)
    assert out.exit_code == 0, out.stderr
    shown: dict[str, str | list[str]] = {"EVENTS": []}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("NODE", "ID", "STATE", "HEALTH"):
            shown[key] = value.strip()
        elif key == "EVENTS" or not key:
            shown["EVENTS"].append(line.removeprefix("EVENTS").strip())  # type: ignore[union-attr]
    return shown


def test_a_killed_containerd_is_restarted_and_healthy_again(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0", "--with-registry", "docker.io")
        node_name, node = f"{NAME}-controlplane-1", cluster.address(2)
        publish_busybox(tmp_path / "image", f"{cluster.address(1)}:5000", (IMAGE,))
        for service in ("cri", "containerd"):
            pulled = cluster.talosctl("-n", node, "image", "pull", "--namespace", NAMESPACES[service], IMAGE)
            assert pulled.exit_code == 0, pulled.stdout + pulled.stderr

        for service in ("cri", "containerd"):
            before = _containerd_pid(cluster.state_dir, node_name, service)
            os.kill(before, signal.SIGKILL)
            deadline = time.monotonic() + RECOVERY
            while True:
                shown = _service(cluster, node, service)
                events = shown["EVENTS"]
                if shown.get("STATE") == "Running" and shown.get("HEALTH") == "OK" and any(
                    "going to restart forever: signal: killed" in e for e in events
                ) and _containerd_pid(cluster.state_dir, node_name, service) != before:  # fmt: skip
                    break
                assert time.monotonic() < deadline, f"{service} not back after SIGKILL: {shown}"
                time.sleep(1)
            # Newest first: the health check after the new process, after the crash.
            crash = next(i for i, e in enumerate(events) if "signal: killed" in e)
            assert crash > 0 and any("started with PID" in e for e in events[:crash]), events
            assert events[0].startswith("[Running]: Health check successful"), events

            listed = cluster.talosctl("-n", node, "image", "ls", "--namespace", NAMESPACES[service])
            assert IMAGE in listed.stdout, listed.stdout + listed.stderr
            again = cluster.talosctl("-n", node, "image", "pull", "--namespace", NAMESPACES[service], IMAGE)
            assert again.exit_code == 0, again.stdout + again.stderr
