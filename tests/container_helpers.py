"""Container clusters for end-to-end tests (root only, as CI runs): one place that creates them on a
CIDR nothing else on the machine routes, runs commands inside a node, and removes everything.

``ContainerCluster.create(...)`` runs ``talosctl cluster create --provisioner container``; the
``container_cluster`` context manager destroys the cluster whatever happens and then removes by PID
and by name what destroy could not (processes carrying the cluster's marks, the bridge, its
nftables table, the blackhole route last). Tests address only the cluster's own hosts.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in

from ichor.machinery import proc
from ichor.provision import _cgroups as cgroups
from ichor.provision._network import (
    BLACKHOLE_METRIC,
    bridge_name,
    extra_bridge_name,
    firewall_table,
    veth_name,
)
from ichor.provision._processes import find, signal_and_wait

CONTAINER_NODES = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("dnsmasq") is None,
    reason="container nodes need root, iproute2 and dnsmasq (bash run.sh installs dnsmasq-base as root)",
)


def free_cidr(*, besides: str = "") -> str:
    """A random 10.2xx.y.0/24 that no route of this machine covers yet (nor is ``besides``), never in
    Kubernetes's default pod subnet 10.244.0.0/16 (nodes there would have no address of their own)."""
    taken = proc.run(["ip", "-4", "route", "show", "table", "all"]).stdout + besides
    while True:
        cidr = f"10.{random.choice([n for n in range(200, 251) if n != 244])}.{random.randint(0, 255)}.0/24"
        if cidr.rsplit(".", 1)[0] + "." not in taken:
            return cidr


def until(what: str, check: Callable[[], bool], limit: float, interval: float = 0.25) -> float:
    """Seconds until ``check()`` holds; fails naming ``what`` after ``limit`` seconds."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < limit, f"{what}: not within {limit:g}s"
        time.sleep(interval)
    return time.monotonic() - start


def connects(ip: str, port: int, timeout: float = 1.0) -> bool:
    """A TCP connection to ``ip:port`` is accepted within ``timeout`` seconds."""
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


def routes_to(cidr: str) -> list[dict[str, object]]:
    shown = proc.run(["ip", "-j", "route", "show", "table", "all", "to", "match", cidr.replace("0/24", "9")])
    return [r for r in json.loads(shown.stdout or "[]") if r.get("dst") == cidr]


@dataclass
class ContainerCluster:
    name: str
    home: Path
    state: Path
    cidr: str
    extra_cidr: str = ""
    """``--extra-cidr`` (every node's eth1), passed by :meth:`create` when set."""

    @property
    def state_dir(self) -> Path:
        return (self.state / self.name).resolve()

    def address(self, host: int, *, extra: bool = False) -> str:
        """``host`` within the CIDR (``extra``: the extra CIDR): 1 is the gateway, 2 the first
        control plane, and so on."""
        return f"{(self.extra_cidr if extra else self.cidr).rsplit('.', 1)[0]}.{host}"

    def talosctl(self, *args: str, timeout: float = 180) -> proc.Completed:
        return talosctl_in(self.home, *args, timeout=timeout)

    def create(self, *args: str, timeout: float = 300, kubernetes: bool = False) -> proc.Completed:
        """``cluster create --provisioner container`` with this cluster's name, state and CIDR plus
        ``args``; asserts it succeeded. Without ``kubernetes`` the nodes get no Kubernetes images
        (``--kubernetes-images upstream``: their kubelets fail to pull and stay down, and create waits
        for etcd only), which keeps the tests that are about something else light; with ``kubernetes``
        create waits for every stage of ``talosctl health``."""
        created = self.talosctl(
            "cluster", "create", "--provisioner", "container", "--name", self.name, "--state", str(self.state),
            "--cidr", self.cidr, "--wait-timeout", "10m" if kubernetes else "3m",
            "--kubernetes-images", "local" if kubernetes else "upstream",
            *(["--extra-cidr", self.extra_cidr] if self.extra_cidr else []), *args, timeout=timeout,
        )  # fmt: skip
        assert created.exit_code == 0, created.stdout + created.stderr
        return created

    def launcher_pid(self, node: str) -> int:
        """The PID (in the root namespace) of ``node``'s launcher, whose namespaces are the node's."""
        for process in find(self.state_dir):
            if process.role == "launcher" and process.node == node:
                return process.id.pid
        raise AssertionError(f"no launcher for {node} under {self.state_dir}")

    def in_node(self, node: str, *command: str, timeout: float = 30, check: bool = False) -> proc.Completed:
        """``command`` run in ``node``'s network namespace (nsenter; the host's filesystem)."""
        pid = self.launcher_pid(node)
        return proc.run(["nsenter", f"--net=/proc/{pid}/ns/net", *command], check=check, timeout=timeout)

    def destroy(self) -> None:
        """Destroy, then remove by PID and by name whatever destroy left, the blackhole route last."""
        self.talosctl("cluster", "destroy", "--name", self.name, "--state", str(self.state), "--force",
                      timeout=120)  # fmt: skip
        signal_and_wait([p.id for p in find(self.state_dir)], signal.SIGKILL, 10)
        proc.run(["ip", "link", "del", bridge_name(self.name)], check=False)
        proc.run(["nft", "delete", "table", "inet", firewall_table(bridge_name(self.name))], check=False)
        if self.extra_cidr:
            proc.run(["ip", "link", "del", extra_bridge_name(self.name)], check=False)
            proc.run(["ip", "route", "del", "blackhole", self.extra_cidr, "metric", str(BLACKHOLE_METRIC)],
                     check=False)  # fmt: skip
        proc.run(["ip", "route", "del", "blackhole", self.cidr, "metric", str(BLACKHOLE_METRIC)], check=False)

    def leftovers(self, nodes: list[str]) -> list[str]:
        """Everything of the cluster still on the machine, described: processes, mounts, the
        bridges and ``nodes``' veths on either network, any route to either CIDR, its nftables
        table and its cgroups."""
        left = [f"process {p.describe()}" for p in find(self.state_dir)]
        mounts = Path("/proc/self/mountinfo").read_text()
        left += [f"mount {line.split()[4]}" for line in mounts.splitlines() if str(self.state_dir) in line]
        links = proc.run(["ip", "-br", "link"]).stdout
        names = [bridge_name(self.name), extra_bridge_name(self.name)]
        names += [veth_name(self.name, node, network) for node in nodes for network in (1, 2)]
        left += [f"link {name}" for name in names if f"{name} " in links or f"{name}@" in links]
        left += [f"route {r}" for cidr in (self.cidr, self.extra_cidr) if cidr for r in routes_to(cidr)]
        table = firewall_table(bridge_name(self.name))
        if proc.run(["nft", "list", "table", "inet", table], check=False).exit_code == 0:
            left.append(f"nftables table inet {table}")
        left += [f"cgroup {d}" for d in cgroups.cluster_dirs(cgroups.current(), self.name) if d.exists()]
        return left


@contextmanager
def container_cluster(
    tmp_path: Path, name: str, *, extra_network: bool = False
) -> Iterator[ContainerCluster]:
    """A not-yet-created cluster named ``name`` on a free CIDR (and, with ``extra_network``, a second
    free CIDR for ``--extra-cidr``); destroyed on exit whatever happened."""
    cidr = free_cidr()
    extra = free_cidr(besides=cidr) if extra_network else ""
    made = ContainerCluster(name, tmp_path / "home", tmp_path / "clusters", cidr, extra)
    made.home.mkdir(parents=True)
    try:
        yield made
    finally:
        made.destroy()


KUBE_NAME = "k8s"
"""The shared Kubernetes cluster's name: its nodes are ``k8s-controlplane-1`` and ``k8s-worker-1``."""

HOST_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops")
"""Host kernel settings a kubelet would change on a host it owned: no node may touch them here."""


def host_sysctls() -> dict[str, str]:
    return {name: Path("/proc/sys", name).read_text().strip() for name in HOST_SYSCTLS}


@dataclass
class KubeCluster:
    """The session's one 1+1 container cluster with Kubernetes (``k8s_cluster`` in conftest.py):
    its own registry as the ``docker.io`` mirror (besides the Kubernetes images), the control plane
    labelled ``topology.kubernetes.io/zone=rack-1`` and the worker ``rack-2`` by config patches."""

    cluster: ContainerCluster
    created: proc.Completed
    """``cluster create``'s own output (every health stage it waited for)."""
    kubectl: Path
    kubeconfig: Path
    sysctls_before: dict[str, str]
    """:func:`host_sysctls` before the cluster was created."""

    @property
    def cp(self) -> str:
        return self.cluster.address(2)

    @property
    def worker(self) -> str:
        return self.cluster.address(3)

    def run(self, *args: str, timeout: float = 60) -> proc.Completed:
        """``kubectl --kubeconfig <admin> ARGS``."""
        command = [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args]
        return proc.run(command, check=False, timeout=timeout)

    def get(self, *args: str) -> dict[str, object]:
        """``kubectl get ARGS -o json``, parsed; ``{}`` when kubectl fails."""
        done = self.run("get", *args, "-o", "json", timeout=30)
        return json.loads(done.stdout) if done.exit_code == 0 else {}


@contextmanager
def kube_cluster(tmp_path: Path) -> Iterator[KubeCluster]:
    """Create the shared Kubernetes cluster (every ``talosctl health`` stage passed) and destroy it,
    with everything destroy might leave, on exit."""
    from ichor.kubebuild import ensure_built

    kubectl = ensure_built().kubectl
    assert kubectl is not None, "kubectl was not built (bash run.sh builds it)"
    before = host_sysctls()
    zone = '{"machine": {"nodeLabels": {"topology.kubernetes.io/zone": "%s"}}}'
    with container_cluster(tmp_path, KUBE_NAME) as cluster:
        created = cluster.create(
            "--workers", "1", "--with-registry", "docker.io", "--config-patch-control-plane", zone % "rack-1",
            "--config-patch-worker", zone % "rack-2", kubernetes=True, timeout=900,
        )  # fmt: skip
        kubeconfig = tmp_path / "kubeconfig"
        fetched = cluster.talosctl("-n", cluster.address(2), "kubeconfig", str(kubeconfig), "--force")
        assert fetched.exit_code == 0, fetched.stdout + fetched.stderr
        yield KubeCluster(cluster, created, kubectl, kubeconfig, before)
