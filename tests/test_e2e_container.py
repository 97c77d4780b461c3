"""End to end: ``talosctl cluster create --provisioner container`` (root only, as CI runs).

A 1+1 cluster on a random 10.2xx.y.0/24 nothing else on the machine uses: the blackhole route for it
must be there before the test sends anything, the nodes answer on their eth0 addresses, a rebooted
node comes back in the same namespaces, and after destroy nothing is left: no process carrying the
cluster's marks, no network namespace, no mount under the state directory, no bridge or veth, no
route (the blackhole included), no nftables table. Whatever happens, the fixture removes all of it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_helpers import cli_env
from cluster_helpers import talosctl_in as _talosctl
from container_helpers import CONTAINER_NODES, ContainerCluster, free_cidr, routes_to

from ichor.machinery import proc
from ichor.provision._network import BLACKHOLE_METRIC, bridge_name, firewall_table, veth_name
from ichor.provision._processes import find

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

NAME = "ctr"


@dataclass
class Cluster:
    home: Path
    state: Path
    cidr: str
    cp: str
    worker: str

    @property
    def state_dir(self) -> Path:
        return (self.state / NAME).resolve()


def _links() -> str:
    return proc.run(["ip", "-br", "link"]).stdout


def _leftovers(cluster: Cluster) -> list[str]:
    """Everything of the cluster still on the machine, described."""
    left = [f"process {p.describe()}" for p in find(cluster.state_dir)]
    mounts = Path("/proc/self/mountinfo").read_text()
    left += [f"mount {line.split()[4]}" for line in mounts.splitlines() if str(cluster.state_dir) in line]
    links = _links()
    names = [
        bridge_name(NAME),
        veth_name(NAME, f"{NAME}-controlplane-1"),
        veth_name(NAME, f"{NAME}-worker-1"),
    ]
    left += [f"link {name}" for name in names if name in links]
    left += [f"route {r}" for r in routes_to(cluster.cidr)]
    table = firewall_table(bridge_name(NAME))
    if proc.run(["nft", "list", "table", "inet", table], check=False).exit_code == 0:
        left.append(f"nftables table inet {table}")
    return left


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cidr = free_cidr()
    prefix = cidr.rsplit(".", 1)[0]
    made = Cluster(tmp_path / "home", tmp_path / "clusters", cidr, f"{prefix}.2", f"{prefix}.3")
    made.home.mkdir()
    try:
        yield made
    finally:
        ContainerCluster(NAME, made.home, made.state, cidr).destroy()


def _namespaces(pid: int) -> dict[str, int]:
    return {ns: os.stat(f"/proc/{pid}/ns/{ns}").st_ino for ns in ("net", "mnt", "uts", "ipc")}


def test_container_cluster_create_reboot_destroy_leaves_nothing(cluster: Cluster) -> None:
    # Without Kubernetes images (create waits for etcd): create waiting for every stage of `talosctl
    # health` with the default local images is what the shared k8s_cluster's create asserts.
    created = _talosctl(cluster.home, "cluster", "create", "--provisioner", "container", "--name", NAME,
                        "--state", str(cluster.state), "--cidr", cluster.cidr, "--wait-timeout", "5m",
                        "--kubernetes-images", "upstream", timeout=360)  # fmt: skip
    assert created.exit_code == 0, created.stderr
    # The blackhole is there before this test sends anything, and went in before the bridge.
    blackholes = [r for r in routes_to(cluster.cidr) if r.get("type") == "blackhole"]
    assert blackholes and blackholes[0].get("metric") == BLACKHOLE_METRIC, routes_to(cluster.cidr)
    lines = created.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if "blackhole" in line)
    assert first < next(i for i, line in enumerate(lines) if "creating bridge" in line)
    assert "provisioner container (as asked with --provisioner)" in created.stderr
    assert "etcd is healthy on 1 control plane(s)" in created.stderr
    assert bridge_name(NAME) in _links()
    tables = proc.run(["nft", "list", "tables"]).stdout
    assert f"table inet {firewall_table(bridge_name(NAME))}" in tables, tables

    addresses = _talosctl(cluster.home, "-n", cluster.worker, "get", "addresses")
    assert f"eth0/{cluster.worker}/24" in addresses.stdout, addresses.stdout + addresses.stderr
    # machined is PID 1 of the node, and the node's own localhost is its own.
    processes = _talosctl(cluster.home, "-n", cluster.cp, "processes")
    assert any(
        line.split()[1] == "1" and "ichor.machined" in line for line in processes.stdout.splitlines()[1:]
    )
    links = _talosctl(cluster.home, "-n", cluster.cp, "get", "links")
    assert " eth0 " in links.stdout and " lo " in links.stdout, links.stdout
    members = _talosctl(cluster.home, "-n", cluster.cp, "etcd", "members")
    assert f"https://{cluster.cp}:2380" in members.stdout, members.stdout + members.stderr
    # Talos 1.7's types of issue 25 §3 (~1 s): the node's disks bound at its partitions' paths, with
    # Talos's columns; the etcd PKI on disk; host-wide memory figures.
    mounts = _talosctl(cluster.home, "-n", cluster.cp, "get", "mounts")
    rows = {tuple(line.split()[2:4]): line.split()[5:] for line in mounts.stdout.splitlines()[1:]}
    assert mounts.stdout.split()[:9] == ["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "SOURCE", "TARGET",
                                         "FILESYSTEM", "TYPE"], mounts.stdout + mounts.stderr  # fmt: skip
    assert rows.keys() == {("MountStatus", "EPHEMERAL"), ("MountStatus", "STATE")}, mounts.stdout
    assert (
        rows["MountStatus", "STATE"][1] == "/system/state" and rows["MountStatus", "EPHEMERAL"][1] == "/var"
    )
    pki_status = _talosctl(cluster.home, "-n", cluster.cp, "get", "pkistatuses")
    pki_row = pki_status.stdout.splitlines()[1].split()
    assert (pki_row[3], pki_row[5]) == ("etcd", "true"), pki_status.stdout
    memory = _talosctl(
        cluster.home, "-n", cluster.worker, "get", "memorystats", "-o", "jsonpath={.spec.total}"
    )
    assert int(memory.stdout) > 0, memory.stdout + memory.stderr

    launchers = [p for p in find(cluster.state_dir) if p.role == "launcher"]
    worker_launcher = next(p for p in launchers if p.node == f"{NAME}-worker-1")
    before = _namespaces(worker_launcher.id.pid)
    rebooted = _talosctl(cluster.home, "-n", cluster.worker, "reboot", timeout=120)
    assert rebooted.exit_code == 0 and "back up" in rebooted.stdout + rebooted.stderr, rebooted.stderr
    assert _namespaces(worker_launcher.id.pid) == before
    again = _talosctl(cluster.home, "-n", cluster.worker, "get", "addresses")
    assert f"eth0/{cluster.worker}/24" in again.stdout, again.stdout + again.stderr

    node_namespaces = {ns for p in launchers for ns in _namespaces(p.id.pid).values()}
    before_destroy = _uptime_ticks()
    destroyed = _talosctl(cluster.home, "cluster", "destroy", "--name", NAME, "--state", str(cluster.state),
                          timeout=120)  # fmt: skip
    assert destroyed.exit_code == 0, destroyed.stderr
    removals = [line for line in destroyed.stderr.splitlines() if line.startswith("removed ")]
    assert removals[-1].startswith("removed the blackhole route"), destroyed.stderr  # the route goes last
    assert _leftovers(cluster) == []
    assert _still_held(node_namespaces, since=before_destroy) == []


def _uptime_ticks() -> float:
    return float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")


def _still_held(namespaces: set[int], since: float) -> list[str]:
    """The namespaces of ``namespaces`` some process still holds (lsns). A namespace inode is reused
    at once by the kernel: one held only by processes started after ``since`` (destroy began) (clock ticks since
    boot, /proc/<pid>/stat's start time) is a new namespace of somebody else's, not a leftover."""
    held = []
    for line in proc.run(["lsns", "-n", "-o", "NS,PID"]).stdout.splitlines():
        ns, pid = (int(field) for field in line.split())
        if ns not in namespaces:
            continue
        try:
            started = float(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            continue  # gone since lsns looked
        if started <= since:
            held.append(f"namespace {ns} held by PID {pid}")
    return held


def test_a_failed_create_removes_the_network_and_keeps_the_logs(cluster: Cluster) -> None:
    failed = _talosctl(cluster.home, "cluster", "create", "--provisioner", "container", "--name", NAME,
                       "--state", str(cluster.state), "--cidr", cluster.cidr, "--wait-timeout", "1s")  # fmt: skip
    assert failed.exit_code != 0 and "hint: raise --wait-timeout" in failed.stderr, failed.stderr
    assert f"removed the blackhole route for {cluster.cidr}" in failed.stderr
    assert _leftovers(cluster) == []
    assert (cluster.state_dir / f"{NAME}-controlplane-1.log").exists()


def test_ctrl_c_during_create_removes_everything(cluster: Cluster) -> None:
    output = cluster.home / "create.log"
    create = proc.start([sys.executable, "-m", "ichor", "cluster", "create", "--provisioner", "container",
                         "--name", NAME, "--state", str(cluster.state), "--cidr", cluster.cidr],
                        output=output, env=cli_env(cluster.home), cwd=cluster.home)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "in its own namespaces" not in (output.read_text() if output.exists() else ""):
            assert time.monotonic() < deadline and create.poll() is None, output.read_text()
            time.sleep(0.05)
        os.kill(create.pid, signal.SIGINT)
        assert create.wait(timeout=90) != 0
    finally:
        create.stop(timeout=5)
    text = output.read_text()
    assert "interrupted: removing what create started" in text and "removed the blackhole route" in text, text
    assert _leftovers(cluster) == []
    assert not cluster.state_dir.exists()
