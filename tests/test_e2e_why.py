"""``talosctl why`` on a real container cluster: six faults induced, the exact root-cause line of each.

One 1+1 container cluster (its own name and CIDR), created with three faults already in place and
given three more while it runs:

1. a registry mirror that is down while the kubelet image is pulled (``--registry-mirror
   ghcr.io=http://<gateway>:<port>``, where a socket drops every connection): ``why kubelet`` on the
   control plane follows the kubelet's pre stage to the failed pull, the mirror and
   ``machine.registries.mirrors["ghcr.io"]``;
2. a wrong ``machine.kubelet.nodeIP.validSubnets`` on the worker: ``why kubelet`` walks from the
   waiting kubelet through ``k8s.KubeletSpecController`` to ``k8s.NodeIPController`` and the key;
3. an extension service whose ``depends`` path never appears: ``why ext-waiter`` names the file;
4. an unreachable time server (patched in): ``why timestatus`` ends at ``time.SyncController``;
5. a forbidden ``cluster.apiServer.extraArgs`` entry (patched in): ``why staticpods kube-apiserver``
   names the key to remove;
6. etcd stopped (SIGSTOP) on the control plane: ``why health`` names the ``etcd to be healthy``
   stage, the node, etcd's failing health check and where to look.

Also ``-o json`` and ``-n`` with both nodes. Budget: 35-42 s measured here (create about 25 s, each
``why`` about 1 s, 4 s for ``why health`` with etcd stopped); every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, ContainerCluster, container_cluster, until

from ichor.images import busybox_rootfs

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "why-e2e"
MANIFEST = """\
version: v1alpha1
metadata:
  name: waiter
  version: 1.0.0
  author: Ichor tests
  description: a service whose dependency never appears
  compatibility:
    talos:
      version: ">= v1.7.0"
"""
WAITER = """\
name: waiter
container:
  entrypoint: ./bin/busybox
  args: [sleep, "3600"]
depends:
  - path: /var/run/never-there
restart: always
"""
NEVER = "/var/run/never-there"
_AGE = re.compile(r"\((\d+h\d+m|\d+[sm])\)")


def _extension(root: Path) -> Path:
    ext = root / "waiter"
    rootfs = ext / "rootfs/usr/local"
    (rootfs / "etc/containers").mkdir(parents=True)
    container = busybox_rootfs(rootfs / "lib/containers/waiter")
    for mount_point in ("proc", "dev", "sys", "run"):
        (container / mount_point).mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/containers/waiter.yaml").write_text(WAITER)
    (ext / "manifest.yaml").write_text(MANIFEST)
    return ext


@contextlib.contextmanager
def _dropping(address: str, port: int) -> Iterator[None]:
    """A registry mirror that is down: it takes every connection and closes it at once."""
    server = socket.create_server((address, port))
    server.settimeout(0.5)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                server.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(5)
        server.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


class _Why:
    def __init__(self, cluster: ContainerCluster) -> None:
        self.cluster = cluster
        self.last = ""

    def lines(self, node: str, *args: str) -> list[str]:
        """``talosctl -n node why args`` with every age replaced by ``(AGE)``."""
        started = time.monotonic()
        shown = self.cluster.talosctl("-n", node, "why", *args, timeout=120)
        print(f"why {' '.join(args)} on {node}: {time.monotonic() - started:.1f}s")
        self.last = shown.stdout + shown.stderr
        assert shown.exit_code == 0, self.last
        return [_AGE.sub("(AGE)", line) for line in shown.stdout.splitlines()]

    def until_root(self, node: str, args: tuple[str, ...], predicate: object, limit: float) -> list[str]:
        """Poll ``why`` until ``predicate(lines)`` holds; the lines then."""
        found: list[str] = []

        def check() -> bool:
            nonlocal found
            found = self.lines(node, *args)
            return bool(predicate(found))  # type: ignore[operator]

        try:
            until(f"why {' '.join(args)} on {node}", check, limit, 2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last output:\n{self.last}") from None
        return found


def test_why_names_the_root_cause_of_six_faults(tmp_path: Path) -> None:
    ext = _extension(tmp_path / "exts")
    with container_cluster(tmp_path, NAME) as cluster, contextlib.ExitStack() as stack:
        gateway, port = cluster.address(1), _closed_port()
        cp, worker = cluster.address(2), cluster.address(3)
        subnet_patch = json.dumps({"machine": {"kubelet": {"nodeIP": {"validSubnets": ["10.9.0.0/16"]}}}})
        cluster.create(
            "--controlplanes", "1", "--workers", "1", "--extension", str(ext),
            "--registry-mirror", f"ghcr.io=http://{gateway}:{port}",
            "--config-patch-worker", subnet_patch,
        )  # fmt: skip
        why = _Why(cluster)
        for node in (cp, worker):  # for the record: what each node waits on right after create
            print(f"--- get waits on {node}\n" + cluster.talosctl("-n", node, "get", "waits").stdout)

        # 1. The kubelet image through a mirror that is down (it drops every connection at once).
        mirror = f"{gateway}:{port}"
        stack.enter_context(_dropping(gateway, port))
        found = why.until_root(cp, ("kubelet",), lambda ls: any(f"mirror {mirror}" in x for x in ls), 180)
        assert len(found) == 3 and found[0].startswith("kubelet Preparing (AGE): "), found
        assert re.fullmatch(
            r"<- kubelet waits on image ghcr\.io/siderolabs/kubelet:v[0-9.]+ \(AGE\): failed to pull image "
            rf'"ghcr\.io/siderolabs/kubelet:v[0-9.]+": mirror {re.escape(mirror)}: .+',
            found[1],
        ), found
        fix = f'fix: bring up the registry mirror {mirror}, or fix machine.registries.mirrors["ghcr.io"]'
        assert found[2] == fix, found

        # ... which is also why `health` fails: its first failing stage is the kubelet's.
        found = why.until_root(
            cp, ("health",), lambda ls: ls[-1].startswith("fix: bring up the registry mirror"), 60
        )
        assert found[0].startswith('health stage "kubelet to be healthy" fails: '), found
        assert found[1].startswith(f"<- {cp}: kubelet "), found
        assert (
            found[-1]
            == f'fix: bring up the registry mirror {mirror}, or fix machine.registries.mirrors["ghcr.io"]'
        )

        # 2. No address of the worker in machine.kubelet.nodeIP.validSubnets.
        reason = (
            "no address of this node matches machine.kubelet.nodeIP.validSubnets ['10.9.0.0/16', "
            "'!10.244.0.0/16', '!10.96.0.0/12'] "
            f"(node addresses: {worker}) (fix machine.kubelet.nodeIP.validSubnets to include one of the "
            "node's addresses)"
        )
        found = why.until_root(worker, ("kubelet",), lambda ls: len(ls) == 4, 90)
        assert found[0].startswith("kubelet Waiting (AGE): Waiting for "), found
        assert found[1:] == [
            "<- k8s.KubeletSpecController waits on NodeIPs/kubelet (AGE)",
            f"<- k8s.NodeIPController waits on node IP (AGE): {reason}",
            "fix: fix machine.kubelet.nodeIP.validSubnets to include one of the node's addresses",
        ], found

        # -o json and -n with both nodes: one document per node, each with its root cause.
        both = cluster.talosctl("-n", f"{cp},{worker}", "why", "kubelet", "-o", "json")
        assert both.exit_code == 0, both.stdout + both.stderr
        docs = json.loads(both.stdout)
        assert [d["node"] for d in docs] == [cp, worker]
        assert docs[1]["rootCause"].startswith("k8s.NodeIPController waits on node IP (")
        assert docs[1]["rootCause"].endswith(f"): {reason}")
        assert docs[0]["fix"].startswith(f"bring up the registry mirror {mirror}")
        assert not docs[0]["ok"] and docs[1]["chain"][1]["subject"] == "k8s.KubeletSpecController"

        # 3. An extension service whose dependency never appears.
        found = why.until_root(cp, ("ext-waiter",), lambda ls: len(ls) == 3, 60)
        assert found == [
            f'ext-waiter Waiting (AGE): Waiting for file "{NEVER}" to exist',
            f'<- file "{NEVER}" never appears (AGE): nothing on this node creates it',
            f"fix: create {NEVER} on the node, or remove it from the depends of ext-waiter "
            "(its spec in /usr/local/etc/containers)",
        ], found

        # 4. The time server unreachable (a JSON patch: a strategic merge would append to the list).
        nowhere = cluster.address(250)
        patched = cluster.talosctl("-n", cp, "patch", "mc", "--mode", "no-reboot", "--patch",
                                   json.dumps([{"op": "replace", "path": "/machine/time/servers", "value": [nowhere]}]))  # fmt: skip
        assert patched.exit_code == 0, patched.stdout + patched.stderr
        found = why.until_root(cp, ("timestatus",), lambda ls: any(nowhere in x for x in ls), 90)
        assert len(found) == 2 and re.fullmatch(
            rf"time\.SyncController waits on time sync \(AGE\): {re.escape(nowhere)}: .+", found[0]
        ), found
        assert found[1] == "fix: make a time server in machine.time.servers reachable from the node"

        # 5. A forbidden extraArgs entry for the API server.
        patched = cluster.talosctl("-n", cp, "patch", "mc", "--mode", "no-reboot", "--patch",
                                   json.dumps({"cluster": {"apiServer": {"extraArgs": {"etcd-servers": "https://evil:2379"}}}}))  # fmt: skip
        assert patched.exit_code == 0, patched.stdout + patched.stderr
        found = why.until_root(
            cp, ("staticpods", "kube-apiserver"), lambda ls: "etcd-servers" in "".join(ls), 90
        )
        assert found == [
            "k8s.ControlPlaneStaticPodController waits on control plane static pods (AGE): extra arg "
            "'etcd-servers' is not allowed: remove cluster.apiServer.extraArgs.etcd-servers from the machine config",
            "fix: remove cluster.apiServer.extraArgs.etcd-servers from the machine config",
        ], found

        # 6. etcd stopped (SIGSTOP: Talos lets no API call stop etcd) on the control plane.
        etcd = _process(cluster, NAME + "-controlplane-1", b"etcd")
        os.kill(etcd, signal.SIGSTOP)
        try:
            found = why.until_root(cp, ("health",), lambda ls: "etcd Running (Fail)" in "".join(ls), 90)
        finally:
            os.kill(etcd, signal.SIGCONT)
        assert len(found) == 3, found
        assert found[0].startswith('health stage "etcd to be healthy" fails: '), found
        assert found[1].startswith(f"<- {cp}: etcd Running (Fail) (AGE): Health check failed: "), found
        assert found[2] == f"fix: etcd on {cp} fails its health check: see talosctl -n {cp} logs etcd"


def _process(cluster: ContainerCluster, node: str, name: bytes) -> int:
    """The host PID of the process ``name`` running in ``node`` (a descendant of its launcher)."""
    todo = [cluster.launcher_pid(node)]
    while todo:
        pid = todo.pop()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[0].rsplit(b"/", 1)[-1] == name:
            return pid
        todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    raise AssertionError(f"no {name.decode()} in {node}")
