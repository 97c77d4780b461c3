"""``talosctl upgrade-k8s`` wall time and the requests a Deployment failed during it (issue 23 §5-6).

``python benchmarks/upgrade_k8s.py [--controlplanes 1] [--workers 1] [--from 1.30.2] [--to 1.30.3]``
(root): a container cluster created at ``--from`` from images built here (``python -m
ichor.kubebuild --version <from>`` first, cached), a Deployment of busybox ``httpd`` (one replica
per node) behind a NodePort Service, asked for a page from the host every 0.25 s while
``upgrade-k8s --from --to`` runs; then the wall times, the answered and failed request counts and
when the failures were. The cluster is destroyed at the end, also on Ctrl-C or SIGTERM.
``tests/test_e2e_upgrade_k8s.py`` is the 1+1 case as a test.

Measured (2 CPUs shared with the lead's and other helpers' work; one run each):

    3+1, 1.30.2 -> 1.30.3 (this script, 2026-11-27): create 146 s; upgrade-k8s 518 s; requests
        2066 answered, 0 failed; each control plane's kube-apiserver, kube-controller-manager and
        kube-scheduler in turn, the next node only once the last one's pod was Ready.
    1+1 (tests/test_e2e_upgrade_k8s.py, same day): create 88 s; upgrade-k8s 188 s; requests 757
        answered, 0 failed.
    Kubernetes 1.30.2's images built cold (python -m ichor.kubebuild --version 1.30.2, nice -n 19,
    load 6-8 from other work): 16 min 35 s (kube-apiserver 11 min 18 s, controller-manager 3 min
    16 s, kubelet 50 s, kube-proxy 15 s, scheduler 9 s: the third-party packages came from the Go
    build cache of the 1.30.3 build, whose go.mod requires the same versions).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NoReturn

from kubernetes import sweep
from provisioners import _env, _free_cidr

from ichor.images import ImageSpec, build_layout, busybox_rootfs, parse_reference, push
from ichor.kubebuild import ensure_built, ensure_kubernetes
from ichor.provision._record import ClusterRecord

PY = sys.executable
NAME = f"upgbench{os.getpid() % 10000}"
NODE_PORT = 30080
IMAGE = "docker.io/library/busybox:1.36"
WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: %(replicas)d
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
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 80, nodePort: %(port)d}]
"""


def _run(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), env=_env(home), cwd=home, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip


def _must(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        sys.exit(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


class Prober:
    """GET / through the NodePort every 0.25 s; counts and the time of each failure."""

    def __init__(self, address: str) -> None:
        self.address, self.ok, self.failures = address, 0, list[str]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def once(self) -> bool:
        try:
            conn = http.client.HTTPConnection(self.address, NODE_PORT, timeout=2)
            conn.request("GET", "/")
            reply = conn.getresponse()
            good = reply.status == 200 and bool(reply.read().strip())
            conn.close()
            return good
        except OSError:
            return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.once():
                self.ok += 1
            else:
                self.failures.append(time.strftime("%H:%M:%S"))
            self._stop.wait(0.25)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def destroy(home: Path, state: Path, cidr: str) -> None:
    """Destroy the cluster, then whatever destroy left (by PID, then by name), the route last."""
    done = _run(home, PY, "-m", "ichor", "cluster", "destroy", "--name", NAME, "--state", str(state), "--force",
                timeout=300)  # fmt: skip
    if done.returncode != 0 and "not found" not in done.stderr:
        print(f"warning: cluster destroy failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
    sweep(NAME, state, cidr)


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--controlplanes", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--from", dest="from_version", default="1.30.2")
    parser.add_argument("--to", dest="to_version", default="1.30.3")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/upgrade_k8s.py: container nodes need root")
    signal.signal(signal.SIGTERM, _interrupt)
    say = lambda line: print(f"build-kubernetes: {line}", file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    ensure_kubernetes(args.from_version, say)
    kubectl = ensure_built(say, only=["kubernetes"]).kubectl
    built = time.perf_counter() - started
    cidr = _free_cidr("container", 0)
    nodes = args.controlplanes + args.workers
    with tempfile.TemporaryDirectory(prefix="upgbench-") as tmp:
        home, state = Path(tmp) / "home", Path(tmp) / "state"
        home.mkdir()
        try:
            t0 = time.perf_counter()
            _must(_run(home, PY, "-m", "ichor", "cluster", "create", "--provisioner", "container", "--name", NAME,
                       "--state", str(state), "--cidr", cidr, "--controlplanes", str(args.controlplanes),
                       "--workers", str(args.workers), "--kubernetes-images", "local", "--kubernetes-version",
                       args.from_version, "--with-registry", "docker.io", "--wait-timeout", "20m", timeout=1800),
                  "cluster create")  # fmt: skip
            created = time.perf_counter() - t0
            cp = cidr.rsplit(".", 1)[0] + ".2"
            target = cidr.rsplit(".", 1)[0] + f".{2 + args.controlplanes}" if args.workers else cp
            kubeconfig = home / "kubeconfig"
            _must(
                _run(home, PY, "-m", "ichor", "-n", cp, "kubeconfig", str(kubeconfig), "--force"),
                "kubeconfig",
            )
            record = ClusterRecord.load(state, NAME)
            root = busybox_rootfs(Path(tmp) / "web-rootfs", ("sh", "httpd", "hostname"))
            image = build_layout(
                root, Path(tmp) / "web-layout", tag="1.36", spec=ImageSpec(entrypoint=["/bin/sh"])
            )
            push(image, record.registry, parse_reference(IMAGE))
            (home / "web.yaml").write_text(WEB % {"replicas": nodes, "port": NODE_PORT})
            k = [str(kubectl), "--kubeconfig", str(kubeconfig)]
            _must(_run(home, *k, "apply", "-f", str(home / "web.yaml")), "kubectl apply")
            _must(
                _run(home, *k, "rollout", "status", "deployment/web", "--timeout=300s", timeout=320),
                "rollout",
            )
            probe = Prober(target)
            deadline = time.monotonic() + 60
            while not probe.once() and time.monotonic() < deadline:
                time.sleep(1)
            probe.start()
            time.sleep(3)
            t0 = time.perf_counter()
            upgraded = _run(home, PY, "-m", "ichor", "-n", cp, "upgrade-k8s", "--from", args.from_version, "--to",
                            args.to_version, timeout=3600)  # fmt: skip
            took = time.perf_counter() - t0
            time.sleep(3)
            probe.stop()
            print(upgraded.stdout)
            _must(upgraded, "upgrade-k8s")
            versions = json.loads(_must(_run(home, *k, "get", "nodes", "-o", "json"), "get nodes"))["items"]
            kubelets = sorted({n["status"]["nodeInfo"]["kubeletVersion"] for n in versions})
            print(f"{args.controlplanes}+{args.workers} upgrade-k8s {args.from_version} -> {args.to_version}: "
                  f"{took:.0f} s; requests {probe.ok} answered, {len(probe.failures)} failed "
                  f"({', '.join(probe.failures[:20])}); kubelets now {kubelets}; create {created:.0f} s; "
                  f"images ready in {built:.0f} s")  # fmt: skip
        finally:
            destroy(home, state, cidr)


if __name__ == "__main__":
    main()
