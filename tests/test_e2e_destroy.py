"""End to end: ``cluster destroy`` run again after an interrupted one removes whatever of a
container cluster is left, and says "destroyed" only then.

Two interruptions of a 1-node cluster (no Kubernetes images): the destroy process killed (SIGKILL:
nothing of it runs on) right after it began stopping the node, and what an older Ichor's interrupted
destroy left - the nodes gone and their records removed, cluster.yaml with them, while the cgroups,
the bridge, the nftables table and the blackhole route stayed. Either way a second destroy leaves
nothing (:meth:`ContainerCluster.leftovers`: processes, mounts, links, routes, the table, cgroups).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from cluster_helpers import cli_env
from container_helpers import CONTAINER_NODES, container_cluster, until

from ichor.machinery import proc
from ichor.provision._network import bridge_name
from ichor.provision._processes import find, signal_and_wait

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NODE = "{}-controlplane-1"


def test_a_destroy_killed_while_stopping_the_nodes_is_completed_by_a_second(tmp_path: Path) -> None:
    with container_cluster(tmp_path, "killed-destroy") as cluster:
        cluster.create("--controlplanes", "1", "--workers", "0")
        log = tmp_path / "destroy.log"
        first = proc.start(
            [sys.executable, "-m", "ichor", "cluster", "destroy", "--name", cluster.name, "--state", str(cluster.state)],
            output=log, env=cli_env(cluster.home), cwd=cluster.home,
        )  # fmt: skip
        try:
            until(
                "the first destroy stops the node", lambda: "stopping launcher" in log.read_text(), 60, 0.02
            )
        finally:
            first.signal_group(signal.SIGKILL)
            first.wait(10)
        assert "destroyed cluster" not in log.read_text()
        assert (cluster.state_dir / "cluster.yaml").exists()  # the record outlives what it names

        second = cluster.talosctl("cluster", "destroy", "--name", cluster.name, "--state", str(cluster.state))
        assert second.exit_code == 0, second.stderr
        assert second.stderr.splitlines()[-1] == f"destroyed cluster {cluster.name!r}", second.stderr
        assert cluster.leftovers([NODE.format(cluster.name)]) == []
        assert not cluster.state_dir.exists()


def test_a_destroy_whose_records_went_before_the_network_is_completed_by_a_second(tmp_path: Path) -> None:
    with container_cluster(tmp_path, "half-destroyed") as cluster:
        cluster.create("--controlplanes", "1", "--workers", "0")
        node = NODE.format(cluster.name)
        # The first step of an older destroy: every process ended and the records removed.
        signal_and_wait([p.id for p in find(cluster.state_dir)], signal.SIGKILL, 20)
        (cluster.state_dir / "cluster.yaml").unlink()
        (cluster.state_dir / f"{node}.yaml").unlink()
        left = cluster.leftovers([node])
        assert f"link {bridge_name(cluster.name)}" in left and any(x.startswith("route ") for x in left), left

        second = cluster.talosctl("cluster", "destroy", "--name", cluster.name, "--state", str(cluster.state))
        assert second.exit_code == 0, second.stderr
        lines = second.stderr.splitlines()
        assert lines[-2] == f"removed the blackhole route for {cluster.cidr}", second.stderr
        assert lines[-1] == f"destroyed cluster {cluster.name!r}", second.stderr
        assert cluster.leftovers([node]) == []
        assert not cluster.state_dir.exists()
