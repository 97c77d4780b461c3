"""End to end: a 3+2 cluster of node processes forms a real 3-member etcd cluster, survives faults,
refuses bad input, and comes back from a snapshot with the seeds' disaster-recovery procedure.

Everything goes through ``talosctl`` as a subprocess, as a user types it; keys are written and read
with our etcd client using a control plane's own etcd admin certificate (as ``etcdctl`` on the node
would). Processes are killed by PID; ``cluster destroy`` in ``finally`` ends whatever is left.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in as _talosctl

from ichor import etcd as etcdlib
from ichor.machinery import proc
from ichor.provision._cluster import ClusterRecord, NodeRecord, start_launcher

# The test's own etcd client may leave a TLS transport to the garbage collector when a node is
# killed under it (the point of this test); that is not the product's behaviour under test.
pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

NAME = "etcde2e"


def _until(what: str, check, timeout: float = 90):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


class Etcd:
    """Our etcd client with the admin certificate of a control plane (what etcdctl on it would use)."""

    def __init__(self, node_root: Path) -> None:
        pki = etcdlib.PKIPaths(node_root / "system/secrets/etcd")
        self.ca, self.crt, self.key = (
            pki.ca_crt.read_bytes(),
            pki.admin_crt.read_bytes(),
            pki.admin_key.read_bytes(),
        )

    def run(self, endpoints: list[str], work, timeout: float = 10):  # type: ignore[no-untyped-def]
        async def main():  # type: ignore[no-untyped-def]
            try:
                async with etcdlib.EtcdClient(
                    endpoints, ca=self.ca, cert=self.crt, key=self.key, timeout=timeout
                ) as c:
                    return await work(c)
            finally:
                await asyncio.sleep(0.1)  # let the closed TLS transports finish before the loop goes

        return asyncio.run(main())


def _url(address: str) -> str:
    return f"https://{address}:2379"


def _kill_node(record: ClusterRecord, index: int) -> None:
    """kill -9 a node: its launcher, its machined, and its etcd."""
    node = record.nodes[index]
    children = Path(f"/proc/{node.launcher_pid}/task/{node.launcher_pid}/children")
    machined = [int(p) for p in children.read_text().split()] if children.exists() else []
    pid_file = Path(node.root) / "system/run/etcd.pid"
    etcd_pid = int(pid_file.read_text()) if pid_file.exists() else 0
    for pid in (node.launcher_pid, *machined, etcd_pid):
        if pid and proc.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    for pid in (node.launcher_pid, *machined, etcd_pid):
        _until(f"PID {pid} gone", lambda p=pid: not p or not proc.pid_alive(p), 10)


def _restart_node(record: ClusterRecord, index: int) -> None:
    node = record.nodes[index]
    start_launcher(node, Path(record.state_dir))
    record.save()


def _voting_members(home: Path, node: str) -> list[str]:
    out = _talosctl(home, "-n", node, "etcd", "members")
    if out.exit_code != 0:
        return []
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    return sorted(r[2] for r in rows if r[-1] == "false")


def test_three_control_planes_form_etcd_survive_faults_and_recover(tmp_path: Path) -> None:
    prefix = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    cps = [f"{prefix}.{i}" for i in (2, 3, 4)]
    workers = [f"{prefix}.{i}" for i in (5, 6)]
    home = tmp_path
    created = _talosctl(home, "cluster", "create", "--provisioner", "process", "--name", NAME, "--cidr", f"{prefix}.0/24",
                        "--controlplanes", "3", "--workers", "2", "--wait-timeout", "3m", timeout=300)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr[-3000:]
        assert "etcd is healthy on 3 control plane(s)" in created.stderr
        # create returned only once every member is Running, healthy and voting (no learner left).
        assert "Unavailable" not in created.stderr and "StatusCode" not in created.stderr, created.stderr
        for cp in cps:
            etcd_service = _talosctl(home, "-n", cp, "service", "etcd")
            assert "STATE    Running" in etcd_service.stdout and "HEALTH   OK" in etcd_service.stdout, (
                cp,
                etcd_service.stdout,
            )
        record = ClusterRecord.load(home / ".talos/clusters", NAME)
        roots = [Path(n.root) for n in record.nodes]
        etcd = Etcd(roots[0])
        names = [f"{NAME}-controlplane-{i}" for i in (1, 2, 3)]

        # One bootstrap (by create), three voting members, the same view on every control plane.
        assert _voting_members(home, cps[0]) == names
        members = _talosctl(home, "-n", ",".join(cps), "etcd", "members")
        assert members.exit_code == 0 and members.stdout.count("false") == 9, members.stdout
        listing = {n: _talosctl(home, "-n", n, "get", "members").stdout for n in [*cps, *workers]}
        views = {
            tuple(sorted((line.split()[3], *line.split()[5:]) for line in text.splitlines()[1:]))
            for text in listing.values()
        }
        assert len(views) == 1 and len(next(iter(views))) == 5, listing

        # Keys written through one member read back (linearizable) through each of the others.
        revision = etcd.run([_url(cps[0])], lambda c: c.put("/e2e/one", "1"))
        for cp in cps[1:]:
            got = etcd.run([_url(cp)], lambda c, cp=cp: c.get("/e2e/one", endpoint=_url(cp)))
            assert [(kv.key, kv.value) for kv in got.kvs] == [
                (b"/e2e/one", b"1")
            ] and got.revision >= revision

        # health (nodes from discovery, the default): API, etcd and node stages pass (process nodes are
        # container-mode: their memory and disks are the host's, not measured); the Kubernetes stage
        # says truthfully there is none.
        health = _talosctl(home, "health", "--wait-timeout", "30s")
        discovered = " ".join(f'"{n}"' for n in [*cps, *workers])
        assert f"discovered nodes: [{discovered}]" in health.stderr, health.stderr
        for stage in ("all nodes' APIs to be reachable: OK", "etcd to be healthy: OK",
                      "etcd members to be consistent across nodes: OK", "etcd members to be control plane nodes: OK",
                      "apid to be ready: OK", "all nodes memory sizes: OK", "all nodes disk sizes: OK"):  # fmt: skip
            assert stage in health.stdout + health.stderr, health.stdout + health.stderr
        assert health.exit_code != 0 and "the nodes run no Kubernetes" in health.stderr
        kubeconfig = _talosctl(home, "-n", cps[0], "kubeconfig", str(home / "kube"))
        assert kubeconfig.exit_code == 0, kubeconfig.stderr
        assert f"admin@{NAME}" in (home / "kube").read_text()

        # Bad input: bootstrap on a worker, a second bootstrap, an unknown member id.
        on_worker = _talosctl(home, "-n", workers[0], "bootstrap")
        assert (
            on_worker.exit_code == 1
            and "bootstrap can only be performed on a control plane node" in on_worker.stderr
        )
        again = _talosctl(home, "-n", cps[1], "bootstrap")
        assert again.exit_code == 1 and "AlreadyExists" in again.stderr, again.stderr
        unknown = _talosctl(home, "-n", cps[0], "etcd", "remove-member", "1234abcd")
        assert (
            unknown.exit_code == 1 and "NotFound" in unknown.stderr and "member not found" in unknown.stderr
        )
        assert _voting_members(home, cps[0]) == names

        # kill -9 one control plane (launcher, machined and etcd): quorum holds, talosctl with all
        # three endpoints keeps working, and the node comes back and rejoins with nothing lost.
        _kill_node(record, 2)
        all_endpoints = ("-e", ",".join(cps))
        still = _talosctl(home, *all_endpoints, "-n", cps[0], "etcd", "members")
        assert still.exit_code == 0 and names[2] in still.stdout, still.stderr
        etcd.run([_url(cps[0]), _url(cps[1])], lambda c: c.put("/e2e/during-outage", "2"))
        _restart_node(record, 2)
        back = _until(
            "the killed control plane to serve the key written while it was down",
            lambda: _serves(etcd, cps[2], b"/e2e/during-outage"),
        )
        assert back == b"2"
        assert _until("three voting members again", lambda: _voting_members(home, cps[2]) == names)

        # Kill two: the survivor says clearly that etcd lost quorum; then both come back.
        _kill_node(record, 1)
        _kill_node(record, 2)
        lost = _until(
            "the survivor to report lost quorum",
            lambda: (r := _talosctl(home, "-n", cps[0], "etcd", "members", timeout=60)).exit_code != 0 and r,
        )
        assert "quorum" in lost.stderr, lost.stderr
        _restart_node(record, 1)
        _restart_node(record, 2)
        assert _until("quorum back", lambda: _voting_members(home, cps[0]) == names, 120)

        # Disaster recovery as the seeds tell it: snapshot, wipe EPHEMERAL on every control plane,
        # bootstrap --recover-from the snapshot; every key comes back with the same revisions.
        etcd.run([_url(cps[0])], lambda c: c.put("/e2e/last", "3"))
        before = etcd.run([_url(cps[0])], lambda c: c.get("/e2e/", prefix=True))
        snapshot = home / "db.snapshot"
        saved = _talosctl(home, "-n", cps[0], "etcd", "snapshot", str(snapshot))
        assert saved.exit_code == 0 and "etcd snapshot saved" in saved.stdout + saved.stderr, saved.stderr
        truncated = home / "truncated.snapshot"
        truncated.write_bytes(snapshot.read_bytes()[: snapshot.stat().st_size // 2])

        boots = [_console(r).count("booting as controlplane") for r in roots[:3]]
        wiped = _talosctl(home, "-n", ",".join(cps), "reset", "--graceful=false", "--reboot",
                          "--system-labels-to-wipe=EPHEMERAL", "--wait=false")  # fmt: skip
        assert wiped.exit_code == 0, wiped.stderr
        for root, boot in zip(roots[:3], boots, strict=True):
            _until(
                f"{root.name} waiting to join etcd again", lambda r=root, b=boot: _waiting_to_join(r, b), 120
            )
        refused = _talosctl(home, "-n", cps[0], "bootstrap", "--recover-from", str(truncated))
        assert refused.exit_code != 0 and "snapshot" in refused.stderr, refused.stderr
        assert not any((roots[0] / "var/lib/etcd").glob("*")), "a refused snapshot must change nothing"
        recovered = _talosctl(home, "-n", cps[0], "bootstrap", "--recover-from", str(snapshot))
        assert recovered.exit_code == 0, recovered.stderr
        assert _until(
            "three voting members after recovery", lambda: _voting_members(home, cps[0]) == names, 120
        )
        after = _until(
            "the recovered keys readable on another member", lambda: _read_prefix(etcd, cps[1], "/e2e/")
        )
        assert [(kv.key, kv.value, kv.mod_revision) for kv in after.kvs] == [
            (kv.key, kv.value, kv.mod_revision) for kv in before.kvs
        ]

        # Reset of a control plane leaves etcd first (member removed before its data is wiped) and
        # removes it from discovery; applying its config again makes it join again ("remove first,
        # then add").
        entered = _console(roots[2]).count("entering maintenance service")
        left = _talosctl(home, "-n", cps[2], "reset", "--reboot", "--wait=false")
        assert left.exit_code == 0, left.stderr
        assert _until(
            "two members after a graceful reset", lambda: _voting_members(home, cps[0]) == names[:2]
        )
        _until(
            "maintenance mode after reset",
            lambda: _console(roots[2]).count("entering maintenance service") > entered,
            60,
        )
        assert _until(
            "the reset node gone from discovery",
            lambda: names[2] not in _talosctl(home, "-n", cps[0], "get", "members").stdout,
            60,
        )
        config = Path(record.state_dir) / f"{names[2]}.yaml"
        rejoin = _talosctl(home, "apply-config", "--insecure", "-n", cps[2], "-f", str(config))
        assert rejoin.exit_code == 0, rejoin.stderr
        assert _until(
            "three members again after re-adding", lambda: _voting_members(home, cps[0]) == names, 120
        )

        # "Add first, then remove": a fourth control plane joins by itself, then the second one is
        # reset gracefully and leaves; etcd ends with the three that remain.
        extra = NodeRecord(f"{NAME}-controlplane-4", "controlplane", f"{prefix}.7",
                           str(Path(record.state_dir) / f"{NAME}-controlplane-4"))  # fmt: skip
        record.nodes.append(extra)
        record.save()
        extra_config = home / "controlplane-4.yaml"
        extra_config.write_text(config.read_text().replace(names[2], extra.name))
        _restart_node(record, len(record.nodes) - 1)
        _until("the fourth node in maintenance mode",
               lambda: "entering maintenance service" in _console(Path(extra.root)), 60)  # fmt: skip
        added = _talosctl(home, "apply-config", "--insecure", "-n", extra.address, "-f", str(extra_config))
        assert added.exit_code == 0, added.stderr
        assert _until(
            "four voting members", lambda: _voting_members(home, cps[0]) == [*names, extra.name], 120
        )
        removed = _talosctl(home, "-n", cps[1], "reset", "--reboot", "--wait=false")
        assert removed.exit_code == 0, removed.stderr
        remaining = [names[0], names[2], extra.name]
        assert _until(
            "the second node gone from etcd", lambda: _voting_members(home, cps[0]) == remaining, 120
        )
    except BaseException:
        _print_consoles(home)  # pytest shows it with the failure: what each node said last
        raise
    finally:
        destroyed = _talosctl(home, "cluster", "destroy", "--name", NAME)
    assert destroyed.exit_code == 0, destroyed.stderr


def _serves(etcd: Etcd, address: str, key: bytes) -> bytes | None:
    try:
        got = etcd.run(
            [_url(address)], lambda c: c.get(key, endpoint=_url(address), serializable=True), timeout=3
        )
    except etcdlib.EtcdError:
        return None
    return got.kvs[0].value if got.kvs else None


def _read_prefix(etcd: Etcd, address: str, prefix: str):  # type: ignore[no-untyped-def]
    try:
        return etcd.run([_url(address)], lambda c: c.get(prefix, prefix=True), timeout=5)
    except etcdlib.EtcdError:
        return None


def _console(root: Path) -> str:
    path = root / "var/log/console.log"
    return path.read_text() if path.exists() else ""


def _print_consoles(home: Path) -> None:
    for console in sorted((home / ".talos/clusters" / NAME).glob("*/var/log/console.log")):
        print(f"===== {console.parent.parent.parent.name}: last lines of its console =====")
        print("\n".join(console.read_text(errors="replace").splitlines()[-40:]))


def _waiting_to_join(root: Path, boots_before: int) -> bool:
    text = _console(root)
    return text.count("booting as controlplane") > boots_before and (
        "etcd is waiting to join the cluster" in text.rsplit("booting as controlplane", 1)[-1]
    )
