"""End to end: ``machine.sysctls`` on a container node (002:692-704).

One control plane (no Kubernetes) with three sysctls: ``net.ipv4.tcp_fin_timeout`` and the
slash form ``net/ipv4/tcp_keepalive_probes`` are the node's own (its network namespace's) and are
applied there; ``vm.swappiness`` is the shared host kernel's and is refused with the reason in
``get sysctls``. The host's own values of all three, and the host settings a kubelet would touch,
are unchanged afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_helpers import json_documents
from container_helpers import CONTAINER_NODES, container_cluster, host_sysctls

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "sysctl"
PATCH = """machine:
  sysctls:
    net.ipv4.tcp_fin_timeout: "33"
    net/ipv4/tcp_keepalive_probes: "7"
    vm.swappiness: "11"
"""
HOST_KEYS = ("net/ipv4/tcp_fin_timeout", "net/ipv4/tcp_keepalive_probes", "vm/swappiness")


def _host() -> dict[str, str]:
    return {key: Path("/proc/sys", key).read_text().strip() for key in HOST_KEYS} | host_sysctls()


def _statuses(text: str) -> dict[str, dict[str, object]]:
    return {item["metadata"]["id"]: item["spec"] for item in json_documents(text)}


def test_net_keys_apply_in_the_nodes_namespace_and_host_keys_are_refused(tmp_path: Path) -> None:
    host_before = _host()
    (tmp_path / "sysctls.yaml").write_text(PATCH)
    with container_cluster(tmp_path, NAME) as cluster:
        cluster.create("--workers", "0", "--config-patch", f"@{tmp_path / 'sysctls.yaml'}")
        node_name, node = f"{NAME}-controlplane-1", cluster.address(2)

        got = cluster.talosctl("-n", node, "get", "sysctls", "-o", "json")
        assert got.exit_code == 0, got.stderr
        statuses = _statuses(got.stdout)
        fin = statuses["proc.sys.net.ipv4.tcp_fin_timeout"]
        assert (fin["current"], fin["unsupported"]) == ("33", False), fin
        assert statuses["proc.sys.net/ipv4/tcp_keepalive_probes"]["current"] == "7"
        swappiness = statuses["proc.sys.vm.swappiness"]
        assert swappiness["unsupported"] is True and "container node" in str(swappiness["reason"]), swappiness
        panic = statuses["proc.sys.kernel.panic"]  # Talos's container-mode default, the host's kernel
        assert panic["unsupported"] is True, panic

        table = cluster.talosctl("-n", node, "get", "kernelparamstatuses")
        assert table.stdout.splitlines()[0].split()[-3:] == ["CURRENT", "DEFAULT", "UNSUPPORTED"], (
            table.stdout
        )

        # In the node's network namespace, seen from outside and through the API.
        inside = cluster.in_node(node_name, "cat", "/proc/sys/net/ipv4/tcp_fin_timeout", check=True)
        assert inside.stdout.strip() == "33"
        read = cluster.talosctl("-n", node, "read", "/proc/sys/net/ipv4/tcp_keepalive_probes")
        assert read.stdout.strip() == "7", read.stdout + read.stderr
        assert _host() == host_before
    assert _host() == host_before
