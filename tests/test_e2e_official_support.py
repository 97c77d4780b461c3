"""End to end: the official talosctl v1.7.6's ``support`` and Ichor's against one container control
plane (no Kubernetes images, so no API server) write the same files, Ichor adding only its two
(``machineconfig-redacted.yaml``, ``etcd-members``); ``devices`` is byte for byte the same and ``io``
has the same header. Both say they could not create a Kubernetes client and exit 0 (``pytest -m
official``; run.sh builds the official talosctl first). Time budget: 60 s
(measured: 13 s once the lock is held).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from cluster_helpers import cli_env
from container_helpers import CONTAINER_NODES, container_cluster

from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.official, CONTAINER_NODES]

OFFICIAL = Path.home() / ".cache" / "ichor" / "talosctl-official" / "talosctl"
NAME = "smofs"

if not OFFICIAL.exists():
    pytest.skip(
        "build it first: python scripts/build_official_talosctl.py (bash run.sh test does)",
        allow_module_level=True,
    )


def test_official_and_ichor_bundles_hold_the_same_files(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0")
        cp = cluster.address(2)
        theirs, ours = tmp_path / "official.zip", tmp_path / "ichor.zip"
        official = proc.run([str(OFFICIAL), "-n", cp, "support", "-O", str(theirs), "-w", "4"],
                            env=cli_env(cluster.home), cwd=cluster.home, check=False, timeout=120)  # fmt: skip
        ichor = cluster.talosctl("-n", cp, "support", "-O", str(ours), "-w", "4", timeout=120)
    assert official.exit_code == 0 and ichor.exit_code == 0, official.stderr + ichor.stderr
    assert "Failed to create kubernetes client" in official.stderr
    assert "Failed to create kubernetes client" in ichor.stderr
    with zipfile.ZipFile(theirs) as a, zipfile.ZipFile(ours) as b:
        official_names, ichor_names = set(a.namelist()), set(b.namelist())
        assert official_names <= ichor_names, sorted(official_names - ichor_names)
        assert ichor_names - official_names == {f"{cp}/machineconfig-redacted.yaml", f"{cp}/etcd-members"}
        assert a.read(f"{cp}/devices") == b.read(f"{cp}/devices")
        assert a.read(f"{cp}/io").split(b"\n")[0] == b.read(f"{cp}/io").split(b"\n")[0]
