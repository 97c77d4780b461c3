"""Kubernetes on container nodes, end to end, on the session's shared 1+1 cluster (``k8s_cluster``),
whose images are built here and served by its own registry (``--kubernetes-images local``), as the
Getting Started guide ends: ``talosctl kubeconfig`` and ``kubectl get nodes`` with every node Ready;
the control plane's static pods and the DaemonSets running, the control plane labelled and tainted
as Talos does (ROLES control-plane, ``machine.nodeLabels`` applied), and the host's kernel settings
untouched by the kubelets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, KubeCluster, host_sysctls, until

from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]

CP_NODE, WORKER_NODE = f"{KUBE_NAME}-controlplane-1", f"{KUBE_NAME}-worker-1"


def test_getting_started_ends_with_every_node_ready(k8s_cluster: KubeCluster, tmp_path: Path) -> None:
    cluster, kubectl = k8s_cluster.cluster, k8s_cluster.kubectl
    cp, worker = cluster.address(2), cluster.address(3)
    kubeconfig = tmp_path / "kubeconfig"
    assert cluster.talosctl("-n", cp, "kubeconfig", str(kubeconfig), "--force").exit_code == 0

    def kubectl_json(*args: str) -> dict[str, object]:
        done = proc.run([str(kubectl), "--kubeconfig", str(kubeconfig), *args, "-o", "json"],
                        check=False, timeout=30)  # fmt: skip
        return json.loads(done.stdout) if done.exit_code == 0 else {}

    def ready_nodes() -> set[str]:
        items = kubectl_json("get", "nodes").get("items", [])
        return {
            n["metadata"]["name"] for n in items  # type: ignore[index]
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])  # type: ignore[index]
        }  # fmt: skip

    until(
        "both nodes Ready in kubectl get nodes",
        lambda: ready_nodes() == {CP_NODE, WORKER_NODE},
        300,
        3,
    )

    # Talos's node labels and taints: the role label and NoSchedule taint on the control plane,
    # machine.nodeLabels on both (the worker's written with its kubelet's own credentials).
    def node(name: str) -> dict[str, Any]:
        return kubectl_json("get", "node", name)

    def labelled(name: str, zone: str, *, control_plane: bool) -> bool:
        meta = node(name).get("metadata", {})
        labels = meta.get("labels", {}) if isinstance(meta, dict) else {}
        return labels.get("topology.kubernetes.io/zone") == zone and (
            labels.get("node-role.kubernetes.io/control-plane") == "" if control_plane else True
        )

    until(
        "control plane labelled",
        lambda: labelled(CP_NODE, "rack-1", control_plane=True),
        120,
        3,
    )
    until("worker labelled", lambda: labelled(WORKER_NODE, "rack-2", control_plane=False), 120, 3)
    taints = node(CP_NODE)["spec"].get("taints", [])  # type: ignore[index]
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in taints, taints
    assert "node-role.kubernetes.io/control-plane" not in node(WORKER_NODE)["metadata"]["labels"]  # type: ignore[index]
    table = proc.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "get", "nodes"], check=False, timeout=30
    ).stdout
    roles = {line.split()[0]: line.split()[2] for line in table.splitlines()[1:]}
    assert roles == {CP_NODE: "control-plane", WORKER_NODE: "<none>"}, table
    specs = cluster.talosctl("-n", cp, "get", "nodelabelspecs").stdout
    assert "node-role.kubernetes.io/control-plane" in specs and "rack-1" in specs, specs
    assert "NoSchedule" in cluster.talosctl("-n", cp, "get", "nodetaintspecs").stdout

    def running(selector: str) -> int:
        pods = kubectl_json("-n", "kube-system", "get", "pods", "-l", selector).get("items", [])
        # Ready, not just phase Running (which a pod in CrashLoopBackOff keeps).
        return sum(
            1 for p in pods  # type: ignore[union-attr]
            if p["status"].get("phase") == "Running"  # type: ignore[index]
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))  # type: ignore[index]
        )  # fmt: skip

    def explained(what: str, check: Callable[[], bool], limit: float) -> None:
        """``until``, and on failure the pods and the kubelets' last words in the message."""
        try:
            print(f"{what}: {until(what, check, limit, 3):.1f}s")
        except AssertionError as exc:
            pods = proc.run([str(kubectl), "--kubeconfig", str(kubeconfig), "get", "pods", "-A", "-o", "wide"],
                            check=False, timeout=30).stdout  # fmt: skip
            logs = {
                n: cluster.talosctl("-n", n, "logs", "kubelet", "--tail", "30").stdout for n in (cp, worker)
            }
            raise AssertionError(
                f"{exc}\n{pods}\n" + "\n".join(f"--- kubelet {n}\n{t}" for n, t in logs.items())
            ) from None

    explained(
        "kube-apiserver's mirror pod Running and Ready",
        lambda: running("k8s-app=kube-apiserver") == 1,
        180,
    )
    explained("flannel Running on both nodes", lambda: running("k8s-app=flannel") == 2, 180)
    explained("kube-proxy Running on both nodes", lambda: running("k8s-app=kube-proxy") == 2, 180)
    explained("CoreDNS Running (pods on flannel's network)", lambda: running("k8s-app=kube-dns") == 2, 180)

    for node in (cp, worker):
        shown = cluster.talosctl("-n", node, "service", "kubelet").stdout
        assert "Running" in shown, shown
    static = cluster.talosctl("-n", cp, "get", "staticpods").stdout
    for pod in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert pod in static, static
    # Every pull was served by the cluster's own registry: its access log has the kubelet image.
    log = (cluster.state_dir / "registry.log").read_text()
    assert "/v2/siderolabs/kubelet/manifests/v1.30.3" in log
    assert host_sysctls() == k8s_cluster.sysctls_before, "a kubelet changed the host's kernel settings"
