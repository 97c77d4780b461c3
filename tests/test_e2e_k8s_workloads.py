"""Workloads on the session's shared Kubernetes cluster (``k8s_cluster``), end to end: a Deployment of
an image built here (busybox ``httpd``) and pushed to the cluster's own registry is pulled by both
kubelets through the ``docker.io`` mirror and becomes Available with one replica on each node (its
pods tolerate the control plane's NoSchedule taint); then a pod on the worker reaches the control
plane's pod over flannel, the Service's ClusterIP through kube-proxy, and the Service's name through
CoreDNS. The Deployment and the Service are deleted at the end: the next file finds the cluster as
it was.

The figures printed (image pushed to Deployment Available; pod-to-pod, ClusterIP and DNS round trips
measured inside the pod with busybox ``time``) are for the report, never asserted."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, KubeCluster, until
from registry_helpers import REGISTRY_TOOLS, requests_for

from ichor.images import ImageSpec, build_layout, busybox_rootfs, parse_reference, push
from ichor.machinery import proc
from ichor.provision._record import ClusterRecord

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES, REGISTRY_TOOLS]

CP_NODE, WORKER_NODE = f"{KUBE_NAME}-controlplane-1", f"{KUBE_NAME}-worker-1"

IMAGE = "docker.io/library/busybox:1.36"
_APPLETS = ("sh", "httpd", "wget", "hostname", "nslookup", "time", "seq", "cat", "echo", "sleep")
_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      tolerations:
      - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
      containers:
      - name: web
        image: busybox:1.36
        command: ["/bin/sh", "-c", "hostname > /var/www/index.html && exec httpd -f -p 80 -h /var/www"]
        ports: [{containerPort: 80}]
        readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
"""


def _publish(work: Path, registry: str) -> None:
    """busybox (``httpd``, ``wget``, ``nslookup``) built here, pushed as :data:`IMAGE`."""
    root = busybox_rootfs(work / "web-rootfs", _APPLETS)
    built = build_layout(root, work / "web-layout", tag="1.36", spec=ImageSpec(entrypoint=["/bin/sh"]))
    push(built, registry, parse_reference(IMAGE))


def _per_request_ms(timed: proc.Completed, count: int) -> float:
    """busybox ``time``'s ``real 0m 1.23s`` (on stderr) over ``count`` requests, in milliseconds."""
    found = re.search(r"real\s+(\d+)m\s+([\d.]+)s", timed.stderr)
    assert found, timed.stdout + timed.stderr
    return (int(found[1]) * 60 + float(found[2])) * 1000 / count


def test_deployment_of_a_local_image_serves_across_nodes(k8s_cluster: KubeCluster, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(_MANIFEST)
    try:
        _serve_across_nodes(k8s_cluster, k8s_cluster.kubectl, manifest, tmp_path)
    finally:  # the cluster is shared: the next file finds it as it was
        k8s_cluster.run("delete", "-f", str(manifest), "--ignore-not-found", "--wait=true", timeout=120)


def _serve_across_nodes(k8s_cluster: KubeCluster, kubectl: Path, manifest: Path, tmp_path: Path) -> None:
    cluster = k8s_cluster.cluster
    registry = ClusterRecord.load(cluster.state, cluster.name).registry
    _publish(tmp_path, registry)
    started = time.monotonic()
    cp = cluster.address(2)
    kubeconfig = k8s_cluster.kubeconfig

    def run(*args: str, timeout: float = 60) -> proc.Completed:
        return proc.run([str(kubectl), "--kubeconfig", str(kubeconfig), *args], check=False, timeout=timeout)

    def get(*args: str) -> dict[str, Any]:
        done = run("get", *args, "-o", "json", timeout=30)
        return json.loads(done.stdout) if done.exit_code == 0 else {}

    def diagnosis() -> str:
        shown = [
            run("get", "pods", "-A", "-o", "wide").stdout,
            run("describe", "pods", "-l", "app=web").stdout,
        ]
        return "\n".join(shown)

    def available() -> bool:
        status = get("deployment", "web").get("status", {})
        return bool(status.get("availableReplicas") == 2)

    applied = until(
        "the API server takes the Deployment",
        lambda: run("apply", "-f", str(manifest)).exit_code == 0,
        300,
        3,
    )
    try:
        until("Deployment web Available (2 replicas)", available, 300, 2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis()}") from None
    to_available = time.monotonic() - started

    pods = {p["spec"]["nodeName"]: p for p in get("pods", "-l", "app=web")["items"]}
    assert set(pods) == {CP_NODE, WORKER_NODE}, diagnosis()
    on_cp, on_worker = pods[CP_NODE], pods[WORKER_NODE]
    # Both kubelets pulled the image through the mirror from the cluster's registry.
    clients = {
        e.client for e in requests_for(cluster.state_dir / "registry.log", IMAGE) if "/manifests/" in e.path
    }
    assert {cp, cluster.address(3)} <= clients, clients

    def from_worker(*command: str) -> proc.Completed:
        return run("exec", on_worker["metadata"]["name"], "--", *command)

    # kubectl exec lands in the pod: its name, its image's root (no /usr there), CoreDNS as resolver.
    inside = from_worker("sh", "-c", "hostname; test -e /usr || echo no-usr; cat /etc/resolv.conf")
    assert inside.stdout.startswith(f"{on_worker['metadata']['name']}\nno-usr\n"), (
        inside.stdout + inside.stderr
    )
    assert "nameserver 10.96.0.10" in inside.stdout, inside.stdout

    def fetch(url: str) -> str:
        done = from_worker("wget", "-qO-", url)
        assert done.exit_code == 0, f"wget {url} from the worker's pod: {done.stdout}{done.stderr}"
        return done.stdout.strip()

    def timed(url: str, count: int = 20) -> float:
        loop = f"for i in $(seq {count}); do wget -qO- {url} >/dev/null || exit 1; done"
        done = from_worker("time", "sh", "-c", loop)
        assert done.exit_code == 0, done.stdout + done.stderr
        return _per_request_ms(done, count)

    # Pod to pod across nodes (flannel's VXLAN): the control plane's pod answers with its name.
    pod_url = f"http://{on_cp['status']['podIP']}/"
    assert fetch(pod_url) == on_cp["metadata"]["name"]
    # The ClusterIP (kube-proxy): every answer is one of the two pods, and both answer in time.
    cluster_ip = get("service", "web")["spec"]["clusterIP"]
    names = {p["metadata"]["name"] for p in pods.values()}
    seen: set[str] = set()

    def both_answer() -> bool:
        answer = fetch(f"http://{cluster_ip}/")
        assert answer in names, answer
        seen.add(answer)
        return seen == names

    until("both pods answer through the ClusterIP", both_answer, 60, 0)

    # The Service's name (CoreDNS): it resolves to the ClusterIP and answers.
    def dns_ready() -> bool:
        subsets = get("-n", "kube-system", "endpoints", "kube-dns").get("subsets") or []
        return any(s.get("addresses") for s in subsets)

    try:
        until("CoreDNS Ready behind the kube-dns Service", dns_ready, 180, 3)
    except AssertionError as exc:
        logs = run("-n", "kube-system", "logs", "-l", "k8s-app=kube-dns", "--tail", "20").stdout
        described = run("-n", "kube-system", "describe", "pods", "-l", "k8s-app=kube-dns").stdout
        raise AssertionError(f"{exc}\n{logs}\n{described}") from None
    name = "web.default.svc.cluster.local"
    looked_up = from_worker("nslookup", name)
    assert looked_up.exit_code == 0 and cluster_ip in looked_up.stdout, looked_up.stdout + looked_up.stderr
    assert fetch(f"http://{name}/") in names

    dns = from_worker(
        "time", "sh", "-c", f"for i in $(seq 20); do nslookup {name} >/dev/null || exit 1; done"
    )
    assert dns.exit_code == 0, dns.stdout + dns.stderr
    print(
        f"\nDeployment taken by the API server in {applied:.1f}s, Available {to_available:.1f}s after the "
        f"image was pushed\nper request from the worker's pod: pod-to-pod {timed(pod_url):.1f} ms, "
        f"ClusterIP {timed(f'http://{cluster_ip}/'):.1f} ms, by name {timed(f'http://{name}/'):.1f} ms, "
        f"DNS lookup {_per_request_ms(dns, 20):.1f} ms"
    )
