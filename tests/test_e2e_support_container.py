"""End to end: ``talosctl support`` of a container control plane (no Kubernetes images, so no API
server) has Talos 1.7.6's ``devices`` (the node's ``/proc/bus/pci/devices``: on a shared kernel the
host's PCI list, as on Talos's docker nodes) and ``io`` files, and says, as Talos does, that it
could not create a Kubernetes client, writing no ``kubernetesResources/``. Time budget: 90 s (create
waits for etcd; measured: 12 s).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "smsup"


def test_container_node_bundle_has_devices_and_io(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0")
        cp = cluster.address(2)
        bundle = tmp_path / "bundle.zip"
        done = cluster.talosctl("-n", cp, "support", "-O", str(bundle), "-w", "4", timeout=120)
        with zipfile.ZipFile(bundle) as archive:
            names = set(archive.namelist())
            files = {name: archive.read(name) for name in names}
    assert "Failed to create kubernetes client" in done.stderr
    assert not any(name.startswith("kubernetesResources/") for name in names)
    host_pci = Path("/proc/bus/pci/devices")
    if host_pci.exists():
        assert files[f"{cp}/devices"] == host_pci.read_bytes()
    io = files[f"{cp}/io"].decode().splitlines()
    assert io[0].split() == ["NAME", "IO_TIME", "IO_TIME_WEIGHTED", "DISK_WRITE_SECTORS", "DISK_READ_SECTORS"]
    assert f"{cp}/dmesg.log" in names and f"{cp}/resources/machinestatuses.runtime.talos.dev.yaml" in names
    assert done.exit_code == 0, done.stderr
