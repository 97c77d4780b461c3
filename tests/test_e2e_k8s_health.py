"""``talosctl health`` against the session's shared 1+1 container cluster running Kubernetes
(``k8s_cluster``): ``cluster create``
waits for every stage, as Talos's does; ``health`` (on the client and on the node) passes every
stage in Talos 1.7's order; a stopped etcd fails it naming the etcd stage; a killed kube-apiserver
is restarted by the kubelet and ``health`` passes again (so the cluster is whole for the next file)."""

from __future__ import annotations

import os
import signal

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, ContainerCluster, KubeCluster, until

from ichor.client.health import CHECK_NAMES, ETCD_CHECKS, KUBERNETES_CHECKS, NODE_CHECKS
from ichor.machinery import proc
from ichor.provision._processes import find

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]


def _passed(stderr: str) -> list[str]:
    return [line.removeprefix("waiting for ").removesuffix(": OK") for line in stderr.splitlines()
            if line.startswith("waiting for ") and line.endswith(": OK")]  # fmt: skip


def _host_pid(cluster: ContainerCluster, role: str, node: str) -> int:
    for process in find(cluster.state_dir):
        if process.role == role and process.node == node:
            return process.id.pid
    raise AssertionError(f"no {role} of {node} under {cluster.state_dir}")


def _apiserver_pid(cluster: ContainerCluster, cp: str) -> int:
    """The running kube-apiserver's PID in the node (``talosctl containers -k``), 0 if none runs."""
    listing = cluster.talosctl("-n", cp, "containers", "-k").stdout.splitlines()
    # Container rows: NODE NAMESPACE └─ kube-system/kube-apiserver-<node>:kube-apiserver:<id> IMAGE PID STATUS
    running = [
        line.split()
        for line in listing[1:]
        if ":kube-apiserver:" in line and line.endswith("CONTAINER_RUNNING")
    ]
    return int(running[0][-2]) if running else 0


def test_health_passes_every_stage_and_names_the_stage_a_fault_breaks(k8s_cluster: KubeCluster) -> None:
    cluster, created = k8s_cluster.cluster, k8s_cluster.created
    assert _passed(created.stderr)[-len(CHECK_NAMES) + 1 :] == [
        *ETCD_CHECKS,
        *NODE_CHECKS,
        *KUBERNETES_CHECKS,
    ]
    assert "every stage of `talosctl health` passed on 2 nodes" in created.stderr
    cp, worker = cluster.address(2), cluster.address(3)

    for where in ("--server=false", "--server=true"):
        healthy = cluster.talosctl("-n", cp, "health", where, "--wait-timeout", "3m", timeout=240)
        assert healthy.exit_code == 0, healthy.stderr
        assert f'discovered nodes: ["{cp}" "{worker}"]' in healthy.stderr
        assert _passed(healthy.stderr) == list(CHECK_NAMES), healthy.stderr

    # etcd stopped (SIGSTOP: alive, answering nothing) fails the first etcd stage, by name
    etcd = _host_pid(cluster, "etcd", f"{KUBE_NAME}-controlplane-1")
    os.kill(etcd, signal.SIGSTOP)
    try:
        broken = cluster.talosctl("-n", cp, "health", "--server=false", "--wait-timeout", "30s", timeout=120)
    finally:
        os.kill(etcd, signal.SIGCONT)
    assert broken.exit_code == 1, broken.stderr
    assert "error: timed out waiting for etcd to be healthy: " in broken.stderr
    assert "waiting for etcd to be healthy: OK" not in broken.stderr

    # kube-apiserver killed by PID inside the node: the kubelet starts a new one
    killed = _apiserver_pid(cluster, cp)
    assert killed > 0
    machined = _host_pid(cluster, "machined", f"{KUBE_NAME}-controlplane-1")
    proc.run(["nsenter", f"--pid=/proc/{machined}/ns/pid", "kill", "-9", str(killed)], check=True)
    until("a new kube-apiserver running", lambda: _apiserver_pid(cluster, cp) not in (0, killed), 180, 2)
    again = cluster.talosctl("-n", cp, "health", "--server=false", "--wait-timeout", "3m", timeout=240)
    assert again.exit_code == 0, again.stderr
    assert _passed(again.stderr) == list(CHECK_NAMES), again.stderr
