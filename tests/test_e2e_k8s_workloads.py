"""Workloads on the session's shared Kubernetes cluster (``k8s_cluster``), end to end: a Deployment of
an image built here (busybox ``httpd``) and pushed to the cluster's own registry is pulled by both
kubelets through the ``docker.io`` mirror and becomes Available with one replica on each node (its
pods tolerate the control plane's NoSchedule taint); then a pod on the worker reaches the control
plane's pod over flannel, the Service's ClusterIP through kube-proxy, and the Service's name through
CoreDNS. The Deployment and the Service are deleted at the end: the next file finds the cluster as
it was. Then a static pod from ``machine.pods`` on the control plane, in and out without a reboot,
and the worker's kubelet pulling an image from a registry that wants a user with the user its exec
credential provider (``machine.kubelet.credentialProviderConfig``) answers; each undoes its config.

The figures printed (image pushed to Deployment Available; pod-to-pod, ClusterIP and DNS round trips
measured inside the pod with busybox ``time``) are for the report, never asserted."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections.abc import Callable
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


_STATIC_IMAGE = "docker.io/ichor-e2e/static-ticker:1"
_STATIC_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "ichor-static-ticker", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "ticker",
                "image": _STATIC_IMAGE,
                "command": ["/bin/sh", "-c", "echo static pod up; while true; do echo tick; sleep 5; done"],
            }
        ]
    },
}


def _rows(text: str) -> list[list[str]]:
    """A talosctl table's rows (header dropped)."""
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


def test_static_pod_from_machine_pods_runs_and_goes(k8s_cluster: KubeCluster, tmp_path: Path) -> None:
    """Static Pods (001:783-862) end to end on the control plane: ``machine.pods`` patched in (no
    reboot) -> the pod of an image built here runs, its mirror pod is in ``kubectl get pods``,
    ``containers -k``, ``logs -k default/<pod>:<container>`` and ``get staticpodstatus`` show it;
    the entry patched out again -> every one of them loses it, still without a reboot.
    Budget: about 2 minutes (the kubelet polls its static pod URL every 20 s)."""
    cluster = k8s_cluster.cluster
    cp = k8s_cluster.cp
    registry = ClusterRecord.load(cluster.state, cluster.name).registry
    root = busybox_rootfs(tmp_path / "ticker-rootfs", ("sh", "echo", "sleep"))
    built = build_layout(root, tmp_path / "ticker-layout", tag="1", spec=ImageSpec(entrypoint=["/bin/sh"]))
    push(built, registry, parse_reference(_STATIC_IMAGE))
    mirror_name = f"ichor-static-ticker-{CP_NODE}"
    pod_id = f"default/{mirror_name}"

    def talosctl(*args: str) -> str:
        done = cluster.talosctl("-n", cp, *args, timeout=60)
        assert done.exit_code == 0, f"talosctl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def static_pods() -> set[str]:
        return {r[3] for r in _rows(talosctl("get", "staticpods")) if r[1:3] == ["k8s", "StaticPod"]}

    def statuses() -> dict[str, str]:
        rows = _rows(talosctl("get", "staticpodstatus"))
        return {r[3]: r[-1] for r in rows if r[1:3] == ["k8s", "StaticPodStatus"]}

    def mirror_phase() -> str:
        pod = k8s_cluster.get("pod", mirror_name, "-n", "default")
        return str(pod.get("status", {}).get("phase", "")) if isinstance(pod.get("status"), dict) else ""  # type: ignore[union-attr]

    def ticker_rows() -> list[list[str]]:
        return [r for r in _rows(talosctl("containers", "-k")) if pod_id in " ".join(r)]

    assert not {p for p in static_pods() if p.startswith("default-")}, (
        "machine.pods is not empty to begin with"
    )
    boot_id = talosctl("read", "/proc/sys/kernel/random/boot_id")
    started = time.monotonic()
    talosctl("patch", "mc", "--patch", json.dumps({"machine": {"pods": [_STATIC_POD]}}))
    patched_in = True
    try:
        assert "default-ichor-static-ticker" in static_pods()
        until("the mirror pod Running in kubectl get pods", lambda: mirror_phase() == "Running", 180, 2)
        to_running = time.monotonic() - started
        mirror = k8s_cluster.get("pod", mirror_name, "-n", "default")
        annotations = mirror["metadata"]["annotations"]  # type: ignore[index]
        assert annotations.get("kubernetes.io/config.source") == "http", annotations
        assert "kubernetes.io/config.mirror" in annotations, annotations
        until("get staticpodstatus shows it Ready", lambda: statuses().get(pod_id) == "True", 60, 3)
        rows = ticker_rows()
        sandbox = [r for r in rows if r[2] == pod_id]
        assert sandbox and sandbox[0][-1] == "SANDBOX_READY", rows
        running = [r for r in rows if r[-1] == "CONTAINER_RUNNING"]
        assert running and running[0][3].startswith(f"{pod_id}:ticker:"), rows
        assert running[0][4].endswith("ichor-e2e/static-ticker:1"), rows
        until("logs -k shows the container's output",
              lambda: "static pod up" in talosctl("logs", "-k", f"{pod_id}:ticker"), 30, 2)  # fmt: skip
        logs = talosctl("logs", "-k", f"{pod_id}:ticker", "--tail", "3").splitlines()
        assert logs and all(line.startswith(f"{cp}: ") and "stdout" in line for line in logs), logs

        removing = time.monotonic()
        talosctl("patch", "mc", "--patch", json.dumps([{"op": "remove", "path": "/machine/pods"}]))
        patched_in = False
        assert "default-ichor-static-ticker" not in static_pods()
        until("the mirror pod gone from kubectl get pods",
              lambda: k8s_cluster.run("get", "pod", mirror_name, "-n", "default").exit_code != 0, 120, 2)  # fmt: skip
        to_gone = time.monotonic() - removing
        until("its status gone from get staticpodstatus", lambda: pod_id not in statuses(), 60, 3)
        until("its containers gone from containers -k",
              lambda: not any(r[-1] in ("CONTAINER_RUNNING", "SANDBOX_READY") for r in ticker_rows()), 60, 2)  # fmt: skip
        assert talosctl("read", "/proc/sys/kernel/random/boot_id") == boot_id, "the node rebooted"
        print(f"\nstatic pod: patched in -> mirror pod Running {to_running:.1f}s; patched out -> "
              f"mirror pod gone {to_gone:.1f}s")  # fmt: skip
    finally:  # the cluster is shared: the next file finds the config as it was
        if patched_in:
            cluster.talosctl("-n", cp, "patch", "mc", "--patch",
                             json.dumps([{"op": "remove", "path": "/machine/pods"}]), timeout=60)  # fmt: skip


_PRIVATE_IMAGE = "private.ichor.test/ichor-e2e/credential-check:1"
_PROVIDER = "ichor-e2e-provider"
_PROVIDER_DIR = "/var/lib/ichor-e2e-credential-provider"
_PROVIDER_LOG = "/var/lib/kubelet/ichor-e2e-credential-provider.log"
_USER, _PASSWORD = "ichor-e2e", "provider-secret"
_PROVIDER_SCRIPT = f"""#!/bin/sh
# An exec credential provider (credentialprovider.kubelet.k8s.io/v1): notes each request the kubelet
# makes, answers with the user of the test's registry.
request=$(cat)
echo "$request" >> {_PROVIDER_LOG}
echo '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"1s","auth":{{"private.ichor.test":{{"username":"{_USER}","password":"{_PASSWORD}"}}}}}}'
"""
_CREDENTIAL_POD = f"""\
apiVersion: v1
kind: Namespace
metadata: {{name: ichor-e2e-credentials}}
---
apiVersion: v1
kind: Pod
metadata: {{name: credential-check, namespace: ichor-e2e-credentials}}
spec:
  nodeName: {WORKER_NODE}
  terminationGracePeriodSeconds: 1
  containers:
  - name: check
    image: {_PRIVATE_IMAGE}
    imagePullPolicy: Always
    command: ["/bin/sh", "-c", "echo pulled; exec sleep 3600"]
"""


class _AuthProxy:
    """A registry that wants a user: HTTP Basic auth in front of the cluster's registry (GET/HEAD
    forwarded), on the cluster's bridge; every request noted as (client, path, status)."""

    def __init__(self, address: str, registry: str) -> None:
        import base64
        import http.client
        import http.server
        import threading

        expected = "Basic " + base64.b64encode(f"{_USER}:{_PASSWORD}".encode()).decode()
        self.seen: list[tuple[str, str, int]] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def _forward(self, method: str) -> None:
                if self.headers.get("Authorization") != expected:
                    seen.append((self.client_address[0], self.path, 401))
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="ichor-e2e"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = http.client.HTTPConnection(registry, timeout=30)
                try:
                    accept = {"Accept": self.headers.get("Accept", "*/*")}
                    upstream.request(method, self.path, headers=accept)
                    reply = upstream.getresponse()
                    body = reply.read()
                finally:
                    upstream.close()
                seen.append((self.client_address[0], self.path, reply.status))
                self.send_response(reply.status)
                for name in (
                    "Content-Type",
                    "Docker-Content-Digest",
                    "Docker-Distribution-Api-Version",
                    "Location",
                ):
                    if reply.getheader(name):
                        self.send_header(name, str(reply.getheader(name)))
                self.send_header("Content-Length", reply.getheader("Content-Length") or str(len(body)))
                self.end_headers()
                if method == "GET":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_HEAD(self) -> None:
                self._forward("HEAD")

        self._server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://{address}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def test_kubelet_pulls_with_credentials_from_its_credential_provider(
    k8s_cluster: KubeCluster, tmp_path: Path
) -> None:
    """``machine.kubelet.credentialProviderConfig`` (002:684-686) on the worker: the kubelet runs with
    Talos's two flags and the file Talos writes, calls an exec credential provider (a shell script in
    the credential providers' directory, bound there by ``machine.kubelet.extraMounts`` as a system
    extension would ship it) for an image of a registry that wants a user, and the pull succeeds with
    the user the provider answered. Patched out again (no reboot): no flags, no file.
    Budget: about 2 minutes (two kubelet restarts)."""
    cluster = k8s_cluster.cluster
    worker = k8s_cluster.worker
    record = ClusterRecord.load(cluster.state, cluster.name)
    node_root = Path(next(n.root for n in record.nodes if n.name == WORKER_NODE))
    provider_dir = node_root / _PROVIDER_DIR.lstrip("/")
    manifest = tmp_path / "credential-check.yaml"
    manifest.write_text(_CREDENTIAL_POD)

    def talosctl(*args: str) -> str:
        done = cluster.talosctl("-n", worker, *args, timeout=60)
        assert done.exit_code == 0, f"talosctl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def kubelet_args() -> str:
        return talosctl("get", "kubeletspecs", "kubelet", "-o", "yaml")

    def node_ready() -> bool:
        node = k8s_cluster.get("node", WORKER_NODE)
        status = node.get("status")
        conditions = status.get("conditions", []) if isinstance(status, dict) else []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def kubelet_task() -> tuple[str, bool]:
        """The PID of the kubelet's newest task (``talosctl service kubelet``'s newest ``Started
        task`` event) and whether the service is Running and healthy."""
        shown = talosctl("service", "kubelet")
        started = re.search(r"Started task kubelet \(PID (\d+)\)", shown)
        return (started[1] if started else "", "STATE    Running" in shown and "HEALTH   OK" in shown)

    def restarted(before: str) -> Callable[[], bool]:
        return lambda: kubelet_task()[0] not in ("", before) and kubelet_task()[1]

    def running() -> bool:
        pod = k8s_cluster.get("pod", "credential-check", "-n", "ichor-e2e-credentials")
        status = pod.get("status")
        return isinstance(status, dict) and status.get("phase") == "Running"

    unpatch = json.dumps([{"op": "remove", "path": "/machine/kubelet/credentialProviderConfig"},
                          {"op": "remove", "path": "/machine/kubelet/extraMounts"},
                          {"op": "remove", "path": "/machine/registries/mirrors/private.ichor.test"}])  # fmt: skip
    patched = False

    def restore() -> None:  # the cluster is shared: the next file finds it as it was
        if patched:
            cluster.talosctl("-n", worker, "patch", "mc", "--patch", unpatch, timeout=60)
            until("the worker Ready again", node_ready, 180, 3)

    assert "image-credential-provider" not in kubelet_args()
    with contextlib.ExitStack() as undo:  # run last to first, each whatever the others did
        provider_dir.mkdir(parents=True, exist_ok=True)
        undo.callback(shutil.rmtree, provider_dir, ignore_errors=True)
        undo.callback((node_root / _PROVIDER_LOG.lstrip("/")).unlink, missing_ok=True)
        (provider_dir / _PROVIDER).write_text(_PROVIDER_SCRIPT)
        (provider_dir / _PROVIDER).chmod(0o755)
        root = busybox_rootfs(tmp_path / "check-rootfs", ("sh", "echo", "sleep"))
        built = build_layout(root, tmp_path / "check-layout", tag="1", spec=ImageSpec(entrypoint=["/bin/sh"]))
        push(built, record.registry, parse_reference(_PRIVATE_IMAGE))
        proxy = _AuthProxy(cluster.address(1), record.registry)
        undo.callback(proxy.close)
        undo.callback(restore)
        patch = {"machine": {
            "registries": {"mirrors": {"private.ichor.test": {"endpoints": [proxy.endpoint]}}},
            "kubelet": {
                "extraMounts": [{"destination": "/usr/local/lib/kubelet/credentialproviders", "type": "bind",
                                 "source": _PROVIDER_DIR, "options": ["bind", "ro"]}],
                "credentialProviderConfig": {
                    "apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
                    "providers": [{"name": _PROVIDER, "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                                   "matchImages": ["private.ichor.test"], "defaultCacheDuration": "1m"}],
                },
            },
        }}  # fmt: skip
        boot_id = talosctl("read", "/proc/sys/kernel/random/boot_id")
        task = kubelet_task()[0]
        started = time.monotonic()
        talosctl("patch", "mc", "--patch", json.dumps(patch))
        patched = True
        until("the kubelet spec carries Talos's credential provider flags",
              lambda: "--image-credential-provider-config=/etc/kubernetes/kubelet-credentialproviderconfig.yaml"
              in kubelet_args(), 60, 2)  # fmt: skip
        assert (
            "--image-credential-provider-bin-dir=/usr/local/lib/kubelet/credentialproviders" in kubelet_args()
        )
        written = talosctl("read", "/etc/kubernetes/kubelet-credentialproviderconfig.yaml")
        assert "defaultCacheDuration: 1m0s\n" in written and f"name: {_PROVIDER}\n" in written, written
        until("the kubelet restarted with them, healthy", restarted(task), 120, 2)
        until("the worker Ready", node_ready, 180, 3)
        to_ready = time.monotonic() - started

        undo.callback(
            k8s_cluster.run, "delete", "-f", str(manifest), "--ignore-not-found", "--wait=true", timeout=120
        )
        applied = k8s_cluster.run("apply", "-f", str(manifest))
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        pulling = time.monotonic()
        try:
            until("the pod of the private image Running", running, 180, 2)
        except AssertionError as exc:
            described = k8s_cluster.run("describe", "pod", "credential-check", "-n", "ichor-e2e-credentials")
            raise AssertionError(f"{exc}\n{described.stdout}\nproxy saw {proxy.seen}") from None
        to_running = time.monotonic() - pulling
        calls = talosctl("read", _PROVIDER_LOG)
        # The kubelet asks for the image without its tag.
        asked = f'"image":"{_PRIVATE_IMAGE.rsplit(":", 1)[0]}"'
        assert '"kind":"CredentialProviderRequest"' in calls and asked in calls, calls
        # The registry wanted a user (a 401 without one) and served the manifest to the worker with it.
        assert any(status == 401 for _, _, status in proxy.seen), proxy.seen
        served = [(c, p) for c, p, s in proxy.seen if s == 200 and "/manifests/" in p]
        assert served and all(c == worker for c, _ in served), proxy.seen

        # The key removed without a reboot: no flags, no file, the kubelet back.
        deleted = k8s_cluster.run("delete", "-f", str(manifest), "--wait=true", timeout=120)
        assert deleted.exit_code == 0, deleted.stdout + deleted.stderr
        removing = time.monotonic()
        task = kubelet_task()[0]
        talosctl("patch", "mc", "--patch", unpatch)
        patched = False
        until(
            "the kubelet spec without the flags",
            lambda: "image-credential-provider" not in kubelet_args(),
            60,
            2,
        )
        gone = cluster.talosctl("-n", worker, "read", "/etc/kubernetes/kubelet-credentialproviderconfig.yaml")
        assert gone.exit_code != 0, "the credential provider config stays after the key was removed"
        until("the kubelet restarted without them, healthy", restarted(task), 120, 2)
        until("the worker Ready", node_ready, 180, 3)
        to_removed = time.monotonic() - removing
        assert talosctl("read", "/proc/sys/kernel/random/boot_id") == boot_id, "the worker rebooted"
        print(f"\ncredential provider: patched in -> kubelet restarted, worker Ready {to_ready:.1f}s; pod of the "
              f"private image Running {to_running:.1f}s after it was applied; patched out -> kubelet restarted, "
              f"worker Ready {to_removed:.1f}s")  # fmt: skip
