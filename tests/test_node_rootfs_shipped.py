"""What Talos's root filesystem ships empty exists on every node: ``/etc/kubernetes/manifests`` (the
kubelet's static pod directory, which ``talosctl ls`` replays of the docs list), on a container node's
disks and a process node's root; no node started."""

from __future__ import annotations

from pathlib import Path

from ichor.provision._rootfs import SHIPPED_EMPTY, disk_dirs, ship_empty_dirs


def test_etc_kubernetes_manifests_exists_empty_on_every_node_root(tmp_path: Path) -> None:
    assert SHIPPED_EMPTY == ("etc/kubernetes/manifests",)
    container = tmp_path / "container-node"
    disk_dirs(container)
    assert (container / "etc/kubernetes/manifests").is_dir()
    assert list((container / "etc/kubernetes/manifests").iterdir()) == []
    process = tmp_path / "process-node"
    ship_empty_dirs(process)
    assert list((process / "etc/kubernetes/manifests").iterdir()) == []
    (process / "etc/kubernetes/manifests/x.yaml").write_text("kept\n")
    ship_empty_dirs(process)  # a reboot keeps what a user put there
    assert (process / "etc/kubernetes/manifests/x.yaml").read_text() == "kept\n"
