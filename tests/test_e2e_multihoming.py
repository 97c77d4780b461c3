"""Multihoming end to end: container nodes on two networks, etcd advertised and listening on the one
asked for.

A 2-control-plane cluster with ``--extra-cidr`` (Ichor's own flag): every node has eth0 on the
cluster's bridge and eth1 on a second bridge, each addressed by DHCP, the default route on eth0
only. ``cluster.etcd.advertisedSubnets`` and ``listenSubnets`` name the EXTRA network, so both the
bootstrapped member and the control plane that joins it advertise their eth1 address, as ``talosctl
etcd members`` shows, and etcd listens there (and on loopback for the node itself) only. Destroy leaves nothing of either network behind, each blackhole route removed last.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster, routes_to

from ichor.provision._network import BLACKHOLE_METRIC, extra_bridge_name

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "ichor-multihome"
NODES = [f"{NAME}-controlplane-1", f"{NAME}-controlplane-2"]


def test_etcd_advertises_the_subnet_asked_for_on_two_networks(tmp_path: Path) -> None:
    with container_cluster(tmp_path, NAME, extra_network=True) as cluster:
        patch = (
            f"cluster:\n  etcd:\n    advertisedSubnets: [{cluster.extra_cidr}]\n"
            f"    listenSubnets: [{cluster.extra_cidr}]\n"
        )
        created = cluster.create(
            "--controlplanes", "2", "--workers", "0", "--config-patch-control-plane", patch
        )
        assert "etcd is healthy on 2 control plane(s)" in created.stderr, created.stderr
        # Both blackholes went in before either bridge.
        lines = created.stderr.splitlines()
        bridge_line = next(i for i, line in enumerate(lines) if "creating bridge" in line)
        assert any(cluster.extra_cidr in line and "blackhole" in line for line in lines[:bridge_line]), lines
        for cidr in (cluster.cidr, cluster.extra_cidr):
            holes = [r for r in routes_to(cidr) if r.get("type") == "blackhole"]
            assert holes and holes[0].get("metric") == BLACKHOLE_METRIC, routes_to(cidr)

        cp1, cp2 = cluster.address(2), cluster.address(3)
        extra1, extra2 = cluster.address(2, extra=True), cluster.address(3, extra=True)
        addresses = cluster.talosctl("-n", cp1, "get", "addresses")
        assert f"eth0/{cp1}/24" in addresses.stdout and f"eth1/{extra1}/24" in addresses.stdout, (
            addresses.stdout
        )
        # The extra network's DHCP server hands out no default route: it stays on eth0.
        defaults = json.loads(
            cluster.in_node(NODES[1], "ip", "-j", "route", "show", "default").stdout or "[]"
        )
        assert defaults and {r["dev"] for r in defaults} == {"eth0"}, defaults

        members = cluster.talosctl("-n", cp1, "etcd", "members")
        assert members.exit_code == 0, members.stderr
        assert f"https://{extra1}:2380" in members.stdout, members.stdout  # the bootstrapped member
        assert f"https://{extra2}:2380" in members.stdout, members.stdout  # the one that joined
        assert f"{cp1}:2380" not in members.stdout and f"{cp2}:2380" not in members.stdout, members.stdout
        spec = cluster.talosctl("-n", cp2, "get", "etcdspec", "-o", "yaml")
        assert f"- {extra2}" in spec.stdout, spec.stdout
        # listenSubnets: peers on eth1's address only; clients there and on the node's loopback.
        listening = cluster.in_node(NODES[1], "ss", "-Hltn").stdout.split()
        assert f"{extra2}:2380" in listening and f"{extra2}:2379" in listening, listening
        assert "127.0.0.1:2379" in listening, listening
        assert not [a for a in listening if a.startswith(f"{cp2}:23") or a.startswith("0.0.0.0:23")], (
            listening
        )

        destroyed = cluster.talosctl("cluster", "destroy", "--name", NAME, "--state", str(cluster.state))
        assert destroyed.exit_code == 0, destroyed.stderr
        removals = [line for line in destroyed.stderr.splitlines() if line.startswith("removed ")]
        assert removals[-2:] == [
            f"removed the blackhole route for {cluster.extra_cidr} (--extra-cidr)",
            f"removed the blackhole route for {cluster.cidr}",
        ], destroyed.stderr
        assert f"removed bridge {extra_bridge_name(NAME)}" in removals, destroyed.stderr
        assert cluster.leftovers(NODES) == []
