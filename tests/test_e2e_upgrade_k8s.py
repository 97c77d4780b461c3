"""End to end: ``talosctl upgrade-k8s`` from Kubernetes 1.30.2 to 1.30.3 on a 1+1 container cluster.

A cluster of its own (``upgk8s``, created at 1.30.2 from images built here: ``python -m
ichor.kubebuild --version 1.30.2``, which the fixture runs, cached after the first time) with a
Deployment of an image built here (busybox ``httpd``, two replicas, one per node) behind a NodePort
Service. The host asks it for a page every 0.25 s from before the upgrade until after it; the
failed requests are counted and printed (the figure for the report; asserted only to be a small
part of the whole, the Deployment must keep answering). Before, ``--dry-run`` prints the plan and
changes nothing; after, every static pod, kube-proxy and both kubelets run 1.30.3, the machine
configs name the new images, and a second run finds nothing to patch (resume).

The shared ``k8s_cluster`` is not used: it runs 1.30.3 and the files after it expect that version.
Time budget: 8 min (measured alone, 2 shared cores: 329 s for the file; create at 1.30.2 88 s, the
upgrade 188 s with 757 requests answered and 0 failed), plus, on a machine where 1.30.2 is not built
yet, its build (16.5 min cold at nice 19 on 2 loaded cores, once; cached after).
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, container_cluster, until
from registry_helpers import REGISTRY_TOOLS

from ichor.images import ImageSpec, build_layout, busybox_rootfs, parse_reference, push
from ichor.machinery import proc
from ichor.provision._record import ClusterRecord

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, pytest.mark.slow, CONTAINER_NODES, REGISTRY_TOOLS]

NAME = "upgk8s"
OLD, NEW = "1.30.2", "1.30.3"
IMAGE = "docker.io/library/busybox:1.36"
NODE_PORT = 30080
_MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {{matchLabels: {{app: web}}}}
            topologyKey: kubernetes.io/hostname
      tolerations:
      - {{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}}
      containers:
      - name: web
        image: busybox:1.36
        command: ["/bin/sh", "-c", "hostname > /var/www/index.html && exec httpd -f -p 80 -h /var/www"]
        ports: [{{containerPort: 80}}]
        readinessProbe: {{httpGet: {{path: /, port: 80}}, periodSeconds: 2}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  type: NodePort
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 80, nodePort: {NODE_PORT}}}]
"""


@pytest.fixture(scope="module")
def old_release() -> float:
    """Kubernetes 1.30.2's upgrade images, built once (cached beside 1.30.3); the seconds it took."""
    from ichor.kubebuild import ensure_kubernetes

    started = time.monotonic()
    ensure_kubernetes(OLD, lambda line: print(f"build-kubernetes: {line}", file=sys.stderr, flush=True))
    return time.monotonic() - started


class Prober:
    """GET / from the host through the NodePort every 0.25 s, counting what failed."""

    def __init__(self, address: str) -> None:
        self.address, self.ok, self.failed = address, 0, 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = http.client.HTTPConnection(self.address, NODE_PORT, timeout=2)
                conn.request("GET", "/")
                reply = conn.getresponse()
                body = reply.read()
                conn.close()
                if reply.status == 200 and body.strip():
                    self.ok += 1
                else:
                    self.failed += 1
                    self.failures.append(f"{time.strftime('%H:%M:%S')} HTTP {reply.status}")
            except OSError as exc:
                self.failed += 1
                self.failures.append(f"{time.strftime('%H:%M:%S')} {exc}")
            self._stop.wait(0.25)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _images(kubectl: list[str]) -> dict[str, str]:
    """k8s-app -> image of the kube-system pods (static pods, kube-proxy)."""
    done = proc.run([*kubectl, "get", "pods", "-n", "kube-system", "-o", "json"], check=False, timeout=30)
    pods = json.loads(done.stdout).get("items", []) if done.exit_code == 0 else []
    found: dict[str, str] = {}
    for pod in pods:
        app = pod["metadata"].get("labels", {}).get("k8s-app", "")
        for container in pod["spec"]["containers"]:
            if container["name"] == app:
                found[f"{app}@{pod['spec'].get('nodeName', '')}"] = container["image"]
    return found


def test_upgrade_k8s_one_plus_one_with_a_deployment_answering(old_release: float, tmp_path: Path) -> None:
    from ichor.kubebuild import ensure_built

    kubectl_bin = ensure_built(only=["kubernetes"]).kubectl
    assert kubectl_bin is not None
    with container_cluster(tmp_path, NAME) as cluster:
        started = time.monotonic()
        cluster.create("--workers", "1", "--with-registry", "docker.io", "--kubernetes-version", OLD,
                       kubernetes=True, timeout=900)  # fmt: skip
        created = time.monotonic() - started
        cp, worker = cluster.address(2), cluster.address(3)
        kubeconfig = tmp_path / "kubeconfig"
        fetched = cluster.talosctl("-n", cp, "kubeconfig", str(kubeconfig), "--force")
        assert fetched.exit_code == 0, fetched.stderr
        kubectl = [str(kubectl_bin), "--kubeconfig", str(kubeconfig)]
        nodes = json.loads(proc.run([*kubectl, "get", "nodes", "-o", "json"], timeout=30).stdout)["items"]
        assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes} == {f"v{OLD}"}
        assert set(_images(kubectl).values()) >= {f"registry.k8s.io/kube-apiserver:v{OLD}"}

        registry = ClusterRecord.load(cluster.state, cluster.name).registry
        root = busybox_rootfs(tmp_path / "web-rootfs", ("sh", "httpd", "hostname"))
        built = build_layout(
            root, tmp_path / "web-layout", tag="1.36", spec=ImageSpec(entrypoint=["/bin/sh"])
        )
        push(built, registry, parse_reference(IMAGE))
        (tmp_path / "web.yaml").write_text(_MANIFEST)
        applied = proc.run([*kubectl, "apply", "-f", str(tmp_path / "web.yaml")], check=False, timeout=60)
        assert applied.exit_code == 0, applied.stderr
        rolled = proc.run([*kubectl, "rollout", "status", "deployment/web", "--timeout=180s"], check=False,
                          timeout=200)  # fmt: skip
        assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
        probe = Prober(worker)
        until("the Deployment answering through the NodePort", lambda: probe_once(worker), 60, 1)
        # upgrade-k8s finds control planes by their label, as Talos's: machined puts it on the Node
        # once the kubelet registered it (NodeStatus polls every 10 s)
        labelled = [*kubectl, "get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name"]
        until("the control plane labelled node-role.kubernetes.io/control-plane",
              lambda: proc.run(labelled, check=False, timeout=30).stdout.strip() != "", 60, 1)  # fmt: skip

        # --dry-run: the plan, and nothing changes.
        config_before = cluster.talosctl("-n", cp, "get", "machineconfig", "-o", "yaml").stdout
        dry = cluster.talosctl("-n", cp, "upgrade-k8s", "--from", OLD, "--to", NEW, "--dry-run", timeout=300)
        assert dry.exit_code == 0, dry.stdout + dry.stderr
        assert f" > update kube-apiserver: v{OLD} -> {NEW}" in dry.stdout, dry.stdout
        assert f" > update kubelet: {OLD} -> {NEW}" in dry.stdout
        # The manifests are read as the node has them: kube-proxy's image is not patched in a dry run.
        assert "updating manifests" in dry.stdout and "machine configuration patched" not in dry.stdout
        assert "waiting for all manifests to be applied" not in dry.stdout
        after_dry = cluster.talosctl("-n", cp, "get", "machineconfig", "-o", "yaml").stdout
        assert _spec(after_dry) == _spec(config_before)

        with probe:
            time.sleep(3)
            started = time.monotonic()
            upgraded = cluster.talosctl("-n", cp, "upgrade-k8s", "--from", OLD, "--to", NEW, timeout=1500)
            took = time.monotonic() - started
            time.sleep(3)
        assert upgraded.exit_code == 0, upgraded.stdout + upgraded.stderr
        out = upgraded.stdout
        print(f"\nupgrade-k8s 1+1 {OLD} -> {NEW}: {took:.0f} s; requests: {probe.ok} answered, {probe.failed} failed "
              f"({', '.join(probe.failures[:10])}); create at {OLD}: {created:.0f} s; "
              f"{OLD} images ready in {old_release:.0f} s", file=sys.stderr)  # fmt: skip
        # One control plane at a time, each pod back before the next component (talos#14227).
        order = [
            line for line in out.splitlines() if "successfully updated" in line or line.startswith("updating")
        ]
        assert order[:4] == [f'updating "kube-apiserver" to version "{NEW}"', f' < "{cp}": successfully updated',
                             f'updating "kube-controller-manager" to version "{NEW}"',
                             f' < "{cp}": successfully updated'], out  # fmt: skip
        assert (
            f' < "{worker}": successfully updated' in out and "waiting for all manifests to be applied" in out
        )
        assert "apps/v1.DaemonSet/kube-system/kube-proxy" in out

        nodes = json.loads(proc.run([*kubectl, "get", "nodes", "-o", "json"], timeout=30).stdout)["items"]
        assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes} == {f"v{NEW}"}
        images = _images(kubectl)
        for app in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
            versions = {v.rsplit(":", 1)[1] for k, v in images.items() if k.startswith(f"{app}@")}
            assert versions == {f"v{NEW}"}, images
        config = cluster.talosctl("-n", worker, "get", "machineconfig", "-o", "yaml").stdout
        assert f"ghcr.io/siderolabs/kubelet:v{NEW}" in config
        assert probe.ok > 0 and probe.failed <= max(5, probe.ok // 20), probe.failures

        # A second run (a resume after a failure looks the same) patches nothing.
        again = cluster.talosctl("-n", cp, "upgrade-k8s", "--from", OLD, "--to", NEW, "--pre-pull-images=false",
                                 timeout=600)  # fmt: skip
        assert again.exit_code == 0, again.stdout + again.stderr
        assert " > update " not in again.stdout, again.stdout
        assert probe_once(worker)


def _spec(yaml_text: str) -> str:
    """The machine config part of ``get machineconfig -o yaml`` (its metadata has times)."""
    return yaml_text.split("spec:", 1)[-1]


def probe_once(address: str) -> bool:
    try:
        conn = http.client.HTTPConnection(address, NODE_PORT, timeout=2)
        conn.request("GET", "/")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False
