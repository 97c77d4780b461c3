"""Faults on the session's shared Kubernetes cluster (``k8s_cluster``), end to end, in this order, as the
last file on it (``tiers.K8S_ORDER``):

1. ``cluster.extraManifests`` (patched into the running control plane) names a URL nothing serves (the cluster's gateway on a closed port):
   the node and its API stay fine, every bootstrap manifest is applied, the extra manifest's
   controller retries with the reason in ``talosctl get waits`` and ``logs controller-runtime``;
   once the URL is served the retry fetches it and its ConfigMap reaches the API server.
2. ``talosctl reboot`` of the worker: it comes back Ready and its kube-proxy pod runs again.
3. Disaster recovery as the seeds tell it: a Deployment, ``etcd snapshot``, ``reset
   --system-labels-to-wipe=EPHEMERAL`` of the control plane, ``bootstrap --recover-from``: every
   stage of ``health`` passes and the Deployment is there again.

Every wait is bounded; a failed one prints the nodes, the pods, the services and the nodes' logs.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, ContainerCluster, KubeCluster, connects, until

from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]

CP_NODE, WORKER_NODE = f"{KUBE_NAME}-controlplane-1", f"{KUBE_NAME}-worker-1"
_EXTRA = (
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched-late, namespace: default}\ndata: {a: b}\n"
)
_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: before-disaster, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: before-disaster}}
  template:
    metadata: {labels: {app: before-disaster}}
    spec:
      containers: [{name: pause, image: "registry.k8s.io/pause:3.8"}]
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _serving(address: str, port: int, path: str, body: bytes) -> Iterator[None]:
    """``body`` at ``http://address:port/path`` (the cluster's gateway: only its nodes reach it)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == path
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(body if found else b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class _Kube:
    """kubectl against the cluster, and what a failed wait prints."""

    def __init__(self, cluster: ContainerCluster, kubectl: Path, kubeconfig: Path) -> None:
        self.cluster, self.kubectl, self.kubeconfig = cluster, kubectl, kubeconfig
        self.cp, self.worker = cluster.address(2), cluster.address(3)

    def run(self, *args: str, timeout: float = 30) -> proc.Completed:
        command = [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), "--request-timeout", "20s", *args]
        return proc.run(command, check=False, timeout=timeout)

    def get(self, *args: str) -> dict[str, Any]:
        done = self.run("get", *args, "-o", "json")
        return json.loads(done.stdout) if done.exit_code == 0 else {}

    def ready_nodes(self) -> set[str]:
        return {
            n["metadata"]["name"]
            for n in self.get("nodes").get("items", [])
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
        }

    def diagnosis(self) -> str:
        shown = [
            self.run("get", "nodes", "-o", "wide").stdout,
            self.run("get", "pods", "-A", "-o", "wide").stdout,
        ]
        for node in (self.cp, self.worker):
            for command in (("service",), ("service", "etcd"), ("service", "kubelet"), ("dmesg",)):
                done = self.cluster.talosctl("-n", node, *command, timeout=60)
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
                shown.append(f"--- talosctl -n {node} {' '.join(command)}\n{tail}")
        return "\n".join(shown)

    def wait(self, what: str, check: Callable[[], object], limit: float, interval: float = 3) -> None:
        """``until``, and on failure the cluster's state in the message."""
        try:
            print(f"{what}: {until(what, lambda: bool(check()), limit, interval):.1f}s")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnosis()}") from None


def test_unfetchable_manifest_worker_reboot_and_disaster_recovery(
    k8s_cluster: KubeCluster, tmp_path: Path
) -> None:
    cluster, kubectl = k8s_cluster.cluster, k8s_cluster.kubectl
    gateway, port = cluster.address(1), _free_port()
    url = f"http://{gateway}:{port}/late.yaml"
    manifest_id = f"99-{url}"
    kubeconfig = k8s_cluster.kubeconfig
    kube = _Kube(cluster, kubectl, kubeconfig)
    cp, worker = kube.cp, kube.worker
    kube.wait("both nodes Ready", lambda: kube.ready_nodes() == {CP_NODE, WORKER_NODE}, 300)
    assert not connects(gateway, port), f"something serves {gateway}:{port}; the test needs it closed"
    patch = json.dumps({"cluster": {"extraManifests": [url]}})
    patched = cluster.talosctl("-n", cp, "patch", "mc", "--patch", patch)
    assert patched.exit_code == 0, patched.stdout + patched.stderr

    def retried() -> bool:
        logged = cluster.talosctl("-n", cp, "logs", "controller-runtime").stdout
        return len([x for x in logged.splitlines() if "failed to load manifest" in x and url in x]) >= 2

    kube.wait("the unfetchable manifest retried", retried, 120, 2)

    # 1. The URL cannot be fetched: retried, the reason shown, everything else fine.
    waits = cluster.talosctl("-n", cp, "get", "waits")
    line = next((x for x in waits.stdout.splitlines() if "k8s.ExtraManifestController" in x), "")
    assert url in line and "refused" in line.lower(), waits.stdout + waits.stderr
    logged = cluster.talosctl("-n", cp, "logs", "controller-runtime").stdout
    failures = [x for x in logged.splitlines() if "failed to load manifest" in x and url in x]
    assert len(failures) >= 2, "the fetch is retried and each failure logged:\n" + logged[-3000:]
    shown = cluster.talosctl("-n", cp, "get", "manifests").stdout
    assert "00-kubelet-bootstrapping-token" in shown and manifest_id not in shown, shown
    assert kube.get("-n", "kube-system", "daemonset", "kube-proxy"), kube.diagnosis()
    version = cluster.talosctl("-n", cp, "version")
    assert version.exit_code == 0 and "Server:" in version.stdout, version.stdout + version.stderr

    # ... until the URL is served: a retry (backoff at most 60 s) fetches and applies it.
    with _serving(gateway, port, "/late.yaml", _EXTRA):
        kube.wait(
            "the extra manifest fetched and applied once served",
            lambda: kube.get("configmap", "fetched-late").get("data") == {"a": "b"},
            180,
        )
    assert manifest_id in cluster.talosctl("-n", cp, "get", "manifests").stdout
    waits = cluster.talosctl("-n", cp, "get", "waits").stdout
    assert "k8s.ExtraManifestController" not in waits, waits

    # 2. The worker reboots: Ready again, its kube-proxy pod started again after the reboot.
    rebooted_at = time.time()
    rebooted = cluster.talosctl("-n", worker, "reboot", timeout=240)
    assert rebooted.exit_code == 0, rebooted.stdout + rebooted.stderr + kube.diagnosis()

    def kube_proxy_back() -> bool:
        pods = kube.get("-n", "kube-system", "pods", "-l", "k8s-app=kube-proxy").get("items", [])
        mine = [p for p in pods if p["spec"].get("nodeName") == WORKER_NODE]
        statuses = mine[0]["status"].get("containerStatuses", []) if mine else []
        started = [s["state"].get("running", {}).get("startedAt", "") for s in statuses if s.get("ready")]
        return bool(started) and all(
            datetime.fromisoformat(s).timestamp() >= rebooted_at - 1 for s in started
        )

    kube.wait("the rebooted worker Ready", lambda: WORKER_NODE in kube.ready_nodes(), 300)
    kube.wait("kube-proxy running again on the rebooted worker", kube_proxy_back, 300)

    # 3. Disaster recovery: Deployment, snapshot, wipe EPHEMERAL, recover, the Deployment is back.
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(_DEPLOYMENT)
    applied = kube.run("apply", "-f", str(deployment))
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    kube.wait(
        "Deployment before-disaster Available",
        lambda: kube.get("deployment", "before-disaster").get("status", {}).get("availableReplicas") == 1,
        300,
    )
    snapshot = tmp_path / "db.snapshot"
    saved = cluster.talosctl("-n", cp, "etcd", "snapshot", str(snapshot))
    assert saved.exit_code == 0 and snapshot.stat().st_size > 0, saved.stdout + saved.stderr
    # Deleted after the snapshot: only the recovery can bring it back.
    deleted = kube.run("delete", "deployment", "before-disaster", "--wait=true", timeout=60)
    assert deleted.exit_code == 0, deleted.stdout + deleted.stderr
    assert not kube.get("deployment", "before-disaster"), "the Deployment is still there"

    wiped = cluster.talosctl("-n", cp, "reset", "--graceful=false", "--reboot",
                             "--system-labels-to-wipe=EPHEMERAL", "--wait=false")  # fmt: skip
    assert wiped.exit_code == 0, wiped.stdout + wiped.stderr

    def etcd_preparing() -> bool:
        shown = cluster.talosctl("-n", cp, "service", "etcd", timeout=30).stdout
        return any(line.split()[:2] == ["STATE", "Preparing"] for line in shown.splitlines())

    kube.wait("etcd Preparing on the wiped control plane", etcd_preparing, 300)
    recovered = cluster.talosctl("-n", cp, "bootstrap", f"--recover-from={snapshot}")
    assert recovered.exit_code == 0, recovered.stdout + recovered.stderr + kube.diagnosis()
    assert "recovering from snapshot" in recovered.stdout + recovered.stderr, recovered.stderr
    healthy = cluster.talosctl("-n", cp, "health", "--wait-timeout", "8m", timeout=600)
    assert healthy.exit_code == 0, healthy.stderr + kube.diagnosis()
    kube.wait(
        "the Deployment from before the snapshot back in kubectl",
        lambda: kube.get("deployment", "before-disaster").get("metadata", {}).get("name"),
        120,
    )
    kube.wait("both nodes Ready after recovery", lambda: kube.ready_nodes() == {CP_NODE, WORKER_NODE}, 300)
