"""End to end: looking inside a running node as the troubleshooting guide does.

One configured control plane node process serves every test here: ``talosctl inspect dependencies``
prints its live controller graph as Graphviz DOT (piped through ``dot`` when Graphviz is installed),
and ``talosctl logs controller-runtime`` the controller runtime's own log, one controller a line.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from booted_node import Node

from ichor.machinery import proc

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(booted_node: Node) -> Node:
    """The session's booted node (conftest.py)."""
    return booted_node


def _boxes(dot: str) -> set[str]:
    """The labels of the controller (box) nodes of a DOT graph."""
    return set(re.findall(r'\[label="([^"]+)",shape="box"\]', dot))


NODE_CONTROLLERS = {
    "config.MachineTypeController",
    "network.HostnameSpecController",
    "network.NodeAddressController",
    "secrets.RootController",
    "cluster.MemberController",
}


def test_inspect_dependencies_prints_the_live_controller_graph(node: Node, tmp_path: Path) -> None:
    graph = node.talosctl("inspect", "dependencies")
    assert graph.exit_code == 0, graph.stderr
    assert graph.stdout.startswith("digraph  {\n") and graph.stdout.endswith("}\n")
    assert _boxes(graph.stdout) >= NODE_CONTROLLERS
    # An input edge labelled with the config id it watches.
    assert 'label="HostnameStatuses.net.talos.dev",shape="note"' in graph.stdout
    assert re.search(r'->n\d+\[label="v1alpha1",style="dotted"\]', graph.stdout)

    with_resources = node.talosctl("inspect", "dependencies", "--with-resources")
    assert with_resources.exit_code == 0, with_resources.stderr
    assert 'label="network/HostnameStatuses.net.talos.dev/hostname"' in with_resources.stdout
    assert "subgraph cluster_s" in with_resources.stdout

    several = node.talosctl("inspect", "dependencies", "-n", f"{node.process.address},{node.process.address}")
    assert several.exit_code != 0
    assert "'inspect dependencies' is not supported with multiple nodes" in several.stderr

    # README: talosctl inspect dependencies | dot -Tpng > graph.png
    if shutil.which("dot") is not None:
        for dot in (graph.stdout, with_resources.stdout):
            rendered = proc.run(["dot", "-Tsvg"], input=dot, timeout=60)
            assert "network.HostnameSpecController" in rendered.stdout


def test_logs_controller_runtime_names_the_controllers(node: Node) -> None:
    logs = node.talosctl("logs", "controller-runtime")
    assert logs.exit_code == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines and all(line.startswith(f"{node.process.address}: ") for line in lines)
    started = {
        match.group(1)
        for line in lines
        if (match := re.search(r' DEBUG controller starting \{"component": "controller-runtime", '
                               r'"controller": "([^"]+)"\}$', line))
    }  # fmt: skip
    assert "network.HostnameSpecController" in started
    # Every controller the runtime started is in the graph, and the graph has no other.
    graph = node.talosctl("inspect", "dependencies")
    assert graph.exit_code == 0, graph.stderr
    assert _boxes(graph.stdout) == started

    tail = node.talosctl("logs", "controller-runtime", "--tail", "2")
    assert tail.exit_code == 0, tail.stderr
    assert len(tail.stdout.splitlines()) == 2
    assert all(
        '{"component": "controller-runtime", "controller": "' in line for line in tail.stdout.splitlines()
    )
