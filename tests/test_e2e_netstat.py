"""End to end: ``talosctl netstat``, ``stats`` and ``cgroups`` against a running process node.

netstat shows the sockets the node's own processes hold (apid's port among them, with its program);
stats and cgroups say what the node lacks (containers, a cgroup tree of its own) instead of
printing an empty table.
"""

from __future__ import annotations

import pytest
from booted_node import Node

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(booted_node: Node) -> Node:
    """The session's booted node (conftest.py)."""
    return booted_node


def test_netstat_lists_the_nodes_listening_sockets(node: Node) -> None:
    address = node.process.address
    listening = node.talosctl("netstat", "-l", "-p", "-x")
    assert listening.exit_code == 0, listening.stderr
    lines = listening.stdout.splitlines()
    assert lines[0].split() == ["NODE", "Proto", "Recv-Q", "Send-Q", "Local", "Address", "Foreign", "Address",
                                "State", "Uid", "Inode", "PID/Program", "name"]  # fmt: skip
    apid = [line.split() for line in lines if f"{address}:50000" in line]
    assert apid, listening.stdout
    assert apid[0][0] == address and apid[0][1] == "tcp" and apid[0][6] == "LISTEN"
    assert "/" in apid[0][-1] and apid[0][-1] != "-"  # PID/program
    # Only this node's sockets: none on another node's address.
    assert all(f"{address}:" in line or "127.0.0.1:" in line or "[" in line or "::" in line
               for line in lines[1:]), listening.stdout  # fmt: skip

    only_udp = node.talosctl("netstat", "-a", "-u")
    assert only_udp.exit_code == 0, only_udp.stderr
    assert all(line.split()[1] in ("udp", "udp6") for line in only_udp.stdout.splitlines()[1:])
    assert node.talosctl("netstat", "-o").exit_code == 0  # connected sockets with timers
    pod = node.talosctl("netstat", "kube-system/coredns")
    assert pod.exit_code == 1 and "Ichor does not show a pod's connections yet" in pod.stderr
    both = node.talosctl("netstat", "-k", "kube-system/coredns")
    assert both.exit_code == 2 and "cannot use --pods and specify a pod" in both.stderr


def test_stats_and_cgroups_name_what_a_process_node_lacks(node: Node) -> None:
    stats = node.talosctl("stats")
    assert stats.exit_code == 1
    assert "runs no containerd or CRI yet" in stats.stderr and "talosctl processes" in stats.stderr
    cgroups = node.talosctl("cgroups", "--preset", "memory")
    assert cgroups.exit_code == 1
    assert "has no cgroup tree of its own" in cgroups.stderr
    no_preset = node.talosctl("cgroups")
    assert no_preset.exit_code == 2 and "either schema file or preset must be specified" in no_preset.stderr
    bad = node.talosctl("cgroups", "--preset", "gpu")
    assert bad.exit_code == 2 and "'gpu' is not one of" in bad.stderr
