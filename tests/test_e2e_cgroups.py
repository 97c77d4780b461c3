"""End to end: a container node's tasks live in the node's own cgroup subtree, which destroy removes.

One control plane with the cluster's registry: busybox is pulled through the mirror into namespace
``system`` of the CRI containerd (``talosctl image pull --namespace system``, where Talos 1.7 keeps
the etcd and kubelet images), then a task is created from the node's side
(``ctr run`` in the node's mount, network, PID and cgroup namespaces; no API creates one yet). On
the host its cgroup is ``<ctrl>/<own>/ichor/<cluster>/<node>/system/<id>`` in every v1 hierarchy,
never ``<ctrl>/system/<id>``; the node sees its own subtree as ``/``; after destroy no
``ichor/<cluster>`` is left anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster, until
from registry_helpers import REGISTRY_TOOLS, publish_busybox

from ichor.machinery import proc
from ichor.provision import _cgroups as cgroups
from ichor.provision._processes import find
from ichor.provision._registry import registry_log

pytestmark = [pytest.mark.e2e, CONTAINER_NODES, REGISTRY_TOOLS]

NAME = "cgrp"
IMAGE = "docker.io/library/busybox:1.36"


def test_node_tasks_land_in_the_nodes_own_cgroups_and_destroy_removes_them(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0", "--with-registry", "docker.io")
        node_name, node = f"{NAME}-controlplane-1", cluster.address(2)
        publish_busybox(tmp_path / "image", f"{cluster.address(1)}:5000", (IMAGE,))
        pulled = cluster.talosctl("-n", node, "image", "pull", "--namespace", "system", IMAGE)
        assert pulled.exit_code == 0, pulled.stdout + pulled.stderr
        assert registry_log(cluster.state_dir).read_text()

        hierarchies = cgroups.current()
        node_dirs = cgroups.node_dirs(hierarchies, NAME, node_name)
        machined = next(p for p in find(cluster.state_dir) if p.node == node_name and p.role == "machined")
        launcher = cluster.launcher_pid(node_name)
        # The launcher and machined are in the node's directory of every hierarchy ...
        for directory in node_dirs:
            members = (directory / "cgroup.procs").read_text().split()
            assert str(launcher) in members and str(machined.id.pid) in members, directory
        # ... which machined sees as its root.
        seen = cluster.talosctl("-n", node, "read", "/proc/1/cgroup")
        assert seen.exit_code == 0, seen.stderr
        assert {line.rsplit(":", 1)[1] for line in seen.stdout.splitlines() if line} == {"/"}, seen.stdout

        ctr = ["ctr", "--address", "/run/containerd/containerd.sock", "-n", "system"]
        enter = ["nsenter", "-t", str(machined.id.pid), "-m", "-n", "-p", "-C", "-r", "-w", "--"]
        ran = proc.run([*enter, *ctr, "run", "-d", IMAGE, "t1", "/bin/sleep", "300"], check=False, timeout=60)
        assert ran.exit_code == 0, ran.stderr
        v1 = [(h, d) for h, d in zip(hierarchies, node_dirs, strict=True) if h.version == 1]
        assert v1, "the host mounts no v1 hierarchy"
        for hierarchy, directory in v1:
            if hierarchy.options.startswith("name="):
                continue  # runc manages named hierarchies only when asked to
            task = directory / "system/t1"
            tasks = (task / "cgroup.procs").read_text().split()
            assert tasks, f"{task} holds no task"
            # `ctr run -d` returns once the task is created; its process may still be in runc's
            # exec of /bin/sleep (an empty or runc cmdline for a moment).
            until(
                f"{task}'s process to be /bin/sleep",
                lambda pid=tasks[0]: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/bin/sleep"),
                10,
                0.1,
            )
            assert not (hierarchy.base() / "system/t1").exists(), f"the task leaked into {hierarchy.base()}"

        cluster.destroy()
        for directory in cgroups.cluster_dirs(hierarchies, NAME):
            assert not directory.exists(), f"{directory} left after destroy"
        assert list(find(cluster.state_dir)) == []
