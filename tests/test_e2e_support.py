"""End to end: ``talosctl support`` against a bootstrapped control plane node (etcd running).

The bundle is unzipped and read as a support engineer would: Talos's layout, one folder per node,
and not one of the node's secrets anywhere in it.
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from booted_node import Node

from ichor.machinery.redact import REDACTED, secret_values

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def etcd_node(booted_node: Node) -> Iterator[Node]:
    node = booted_node
    done = node.talosctl("bootstrap")
    assert done.exit_code == 0, done.stderr
    deadline = time.monotonic() + 90
    while True:
        members = node.talosctl("etcd", "members")
        if members.exit_code == 0 and members.stdout.count("\n") >= 2:
            break
        assert time.monotonic() < deadline, f"etcd did not come up: {members.stderr}"
        time.sleep(1)
    yield node


def test_support_bundle_has_talos_layout_and_no_secrets(etcd_node: Node, tmp_path: Path) -> None:
    n = etcd_node
    address = n.process.address
    bundle = tmp_path / "bundle.zip"
    done = n.talosctl("support", "-O", str(bundle), "-w", "4")
    assert done.exit_code == 0, done.stderr
    assert f"Support bundle is written to {bundle}" in done.stderr
    assert not bundle.with_name("bundle.zip.part").exists()
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        files = {name: archive.read(name) for name in names}
    for expected in ("dmesg.log", "controller-runtime.log", "dependencies.dot", "mounts", "io", "processes", "summary",
                     "machineconfig-redacted.yaml", "etcd-members", "service-logs/etcd.log",
                     "service-logs/etcd.state", "service-logs/apid.log",
                     "resources/machinestatuses.runtime.talos.dev.yaml",
                     "resources/machineconfigs.config.talos.dev.yaml",
                     "resources/members.cluster.talos.dev.yaml"):  # fmt: skip
        assert f"{address}/{expected}" in names, (expected, sorted(names))
    assert all(name.startswith(f"{address}/") for name in names)
    # A process node: no /proc/bus/pci of its own, no API server (Talos's line, no cluster files).
    assert f"{address}/devices" not in names and "Failed to create kubernetes client" in done.stderr

    def text(path: str) -> str:
        return files[f"{address}/{path}"].decode()

    assert "booting as controlplane" in text("dmesg.log")
    assert text("io").split("\n")[0].split() == ["NAME", "IO_TIME", "IO_TIME_WEIGHTED", "DISK_WRITE_SECTORS",
                                                 "DISK_READ_SECTORS"]  # fmt: skip
    assert text("dependencies.dot").startswith("digraph  {")
    assert "Server:\n\tTag:         v1.7.6" in text("summary")
    assert text("etcd-members").split("\n")[0].split() == ["ID", "HOSTNAME", "PEER", "URLS", "CLIENT", "URLS",
                                                           "LEARNER"]  # fmt: skip
    assert f"https://{address}:2379" in text("etcd-members")
    assert text("service-logs/etcd.state").startswith("ID       etcd\nSTATE    Running\n")
    status = text("resources/machinestatuses.runtime.talos.dev.yaml")
    assert "    type: MachineStatuses.runtime.talos.dev" in status and "spec:\n" in status
    # A sensitive type shows its resources, not their spec.
    config_resource = text("resources/machineconfigs.config.talos.dev.yaml")
    assert "    id: v1alpha1" in config_resource and "spec:\n    <REDACTED>" in config_resource
    redacted = text("machineconfig-redacted.yaml")
    assert f"token: '{REDACTED}'" in redacted and "clusterName: inspect" in redacted

    # No secret of the node's config in any file, in any form the node could print it.
    config = n.talosctl("read", "/system/state/config.yaml").stdout
    secrets = secret_values(config)
    assert len(secrets) >= 8, secrets
    for name, data in files.items():
        for secret in secrets:
            assert secret.encode() not in data, f"{secret[:12]}... leaked into {name}"


def test_support_refuses_without_nodes_and_keeps_an_existing_file(etcd_node: Node, tmp_path: Path) -> None:
    from cluster_helpers import talosctl_in

    no_nodes = talosctl_in(etcd_node.home, "--talosconfig", str(etcd_node.home / "talosconfig"), "-e",
                           etcd_node.process.address, "support", "-O", str(tmp_path / "x.zip"))  # fmt: skip
    assert no_nodes.exit_code == 2
    assert "please provide at least a single node to gather the debug information from" in no_nodes.stderr
    existing = tmp_path / "support.zip"
    existing.write_text("keep me")
    refused = etcd_node.talosctl("support", "-O", str(existing))
    assert refused.exit_code == 1
    assert "already exists, overwrite? [y/N]" in refused.stdout
    assert "operation aborted" in refused.stderr and existing.read_text() == "keep me"
    workers = etcd_node.talosctl("support", "-O", str(tmp_path / "w.zip"), "-w", "0")
    assert workers.exit_code == 2 and "--num-workers" in workers.stderr


def test_an_unreachable_node_is_reported_and_the_rest_is_written(etcd_node: Node, tmp_path: Path) -> None:
    bundle = tmp_path / "partial.zip"
    both = f"{etcd_node.process.address},127.254.0.1"
    done = etcd_node.talosctl("support", "-O", str(bundle), "-n", both, "-v")
    assert done.exit_code == 1
    assert f"{etcd_node.process.address}: collect dmesg.log" in done.stderr  # -v: a line per file
    assert "Processed with errors:" in done.stderr and "127.254.0.1" in done.stderr
    with zipfile.ZipFile(bundle) as archive:
        assert f"{etcd_node.process.address}/dmesg.log" in archive.namelist()
