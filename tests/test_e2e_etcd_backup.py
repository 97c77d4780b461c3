"""End to end: scheduled etcd backups (Ichor's ``EtcdBackupConfig``) on a process cluster with real
etcd, and a disaster recovery from one of them.

Two control planes run ``schedule: "@every 10s"``, ``retention: 2``, ``compress: true``. Only the
etcd leader takes each slot's snapshot (no slot is taken twice across the cluster), retention holds
two, ``etcd snapshot --list`` shows them, ``talosctl cp`` fetches one, and after EPHEMERAL is wiped
on both nodes ``bootstrap --recover-from`` that ``.db.gz`` brings back the key written before it
(and not the one written after). Everything goes through ``talosctl`` as a subprocess; keys are
written with our etcd client and a control plane's admin certificate.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import json_documents
from cluster_helpers import talosctl_in as _talosctl

from ichor import etcd as etcdlib
from ichor.provision._cluster import ClusterRecord

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

NAME = "etcdbackup"
PATCH = 'apiVersion: v1alpha1\nkind: EtcdBackupConfig\nschedule: "@every 10s"\nretention: 2\ncompress: true\n'
SLOT = re.compile(r"-(\d{8}T\d{6}Z)-r\d+\.db\.gz$")


def _until(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _etcd(root: Path, address: str, work: Callable[[etcdlib.EtcdClient], Any]) -> Any:
    pki = etcdlib.PKIPaths(root / "system/secrets/etcd")

    async def main() -> Any:
        try:
            async with etcdlib.EtcdClient(
                [f"https://{address}:2379"], ca=pki.ca_crt.read_bytes(), cert=pki.admin_crt.read_bytes(),
                key=pki.admin_key.read_bytes(), timeout=10,
            ) as client:  # fmt: skip
                return await work(client)
        finally:
            await asyncio.sleep(0.1)

    return asyncio.run(main())


def _statuses(home: Path, nodes: list[str]) -> dict[str, dict[str, Any]]:
    """EtcdBackupStatus spec by node (``get -o json`` prints one JSON object per resource)."""
    out = _talosctl(home, "-n", ",".join(nodes), "get", "etcdbackupstatuses", "-o", "json")
    if out.exit_code != 0:
        return {}
    return {item["node"]: item["spec"] for item in json_documents(out.stdout)}


def _backup_files(roots: list[Path]) -> list[Path]:
    return [p for root in roots for p in (root / "var/lib/etcd-backups").glob("etcd-snapshot-*")]


def _console(root: Path) -> str:
    path = root / "var/log/console.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_scheduled_backups_leader_only_with_retention_and_recovery(tmp_path: Path) -> None:
    prefix = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    cps = [f"{prefix}.2", f"{prefix}.3"]
    home = tmp_path
    (home / "backup.yaml").write_text(PATCH)
    created = _talosctl(home, "cluster", "create", "--provisioner", "process", "--name", NAME, "--cidr", f"{prefix}.0/24",
                        "--controlplanes", "2", "--workers", "0", "--config-patch-control-plane", "@backup.yaml",
                        "--wait-timeout", "3m", timeout=300)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr[-3000:]
        record = ClusterRecord.load(home / ".talos/clusters", NAME)
        roots = [Path(n.root) for n in record.nodes]
        written = _etcd(roots[0], cps[0], lambda c: c.put("/e2e/backup", "in the snapshot"))

        # Scheduled snapshots: the leader takes them, retention keeps two, followers skip the slot.
        seen: set[str] = set()

        def three_taken_after_the_write() -> dict[str, Any] | None:
            for node, spec in _statuses(home, cps).items():
                if spec.get("lastSnapshot"):
                    seen.add(spec["lastSnapshot"])
                held = spec.get("snapshots") or []
                if len(seen) >= 3 and len(held) == 2 and held[-1]["revision"] >= written:
                    return {"node": node, **spec}
            return None

        leader_status = _until("three scheduled snapshots", three_taken_after_the_write, 120)
        leader = leader_status["node"]
        follower = next(n for n in cps if n != leader)
        assert leader_status["held"] == 2 and leader_status["schedule"] == "@every 10s"
        assert leader_status["lastRunResult"].startswith("snapshot taken: etcd-snapshot-"), leader_status
        follower_status = _statuses(home, [follower])[follower]
        assert follower_status["held"] == 0 and not follower_status.get("lastSuccess"), follower_status
        assert follower_status["lastRunResult"] == "skipped: this member is not the etcd leader"
        slots = [SLOT.search(p.name) for p in _backup_files(roots)]
        assert all(slots) and len({m[1] for m in slots if m}) == len(slots) == 2, _backup_files(roots)
        table = _talosctl(home, "get", "etcdbackupstatuses", "-n", leader)
        assert table.exit_code == 0 and "NEXT RUN" in table.stdout and "LAST SUCCESS" in table.stdout, (
            table.stdout
        )

        # What a node holds, and fetching one with cp.
        listed = _talosctl(home, "-n", ",".join(cps), "etcd", "snapshot", "--list")
        assert listed.exit_code == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split() == ["NODE", "NAME", "TAKEN", "REVISION", "SIZE"]
        rows = [line.split() for line in lines[1:]]
        assert len(rows) >= 2 and all(r[0] == leader for r in rows), listed.stdout
        newest = _statuses(home, [leader])[leader]["snapshots"][0]["path"]
        fetched = home / "fetched"
        fetched.mkdir()
        copied = _talosctl(home, "-n", leader, "cp", newest, str(fetched))
        assert copied.exit_code == 0, copied.stderr
        backup = fetched / Path(newest).name
        assert backup.exists() and backup.read_bytes()[:2] == b"\x1f\x8b", list(fetched.iterdir())

        # A change after the snapshot, then disaster: EPHEMERAL wiped on both control planes.
        _etcd(roots[0], cps[0], lambda c: c.put("/e2e/after", "not in the snapshot"))
        boots = [_console(r).count("booting as controlplane") for r in roots]
        wiped = _talosctl(home, "-n", ",".join(cps), "reset", "--graceful=false", "--reboot",
                          "--system-labels-to-wipe=EPHEMERAL", "--wait=false")  # fmt: skip
        assert wiped.exit_code == 0, wiped.stderr
        for root, boot in zip(roots, boots, strict=True):
            _until(
                f"{root.name} waiting to join etcd again",
                lambda r=root, b=boot: (
                    _console(r).count("booting as controlplane") > b
                    and "etcd is waiting to join the cluster"
                    in _console(r).rsplit("booting as controlplane", 1)[-1]
                ),
                120,
            )
        assert not _backup_files(roots), "wiping EPHEMERAL removes the backups: keep copies off the nodes"
        recovered = _talosctl(home, "-n", cps[0], "bootstrap", "--recover-from", str(backup))
        assert recovered.exit_code == 0, recovered.stderr
        assert "recovering from snapshot" in recovered.stdout, recovered.stdout

        def restored() -> Any:
            try:
                return _etcd(roots[1], cps[1], lambda c: c.get("/e2e/", prefix=True))
            except etcdlib.EtcdError:
                return None

        got = _until("the restored keys on the other member", restored, 180)
        assert [(kv.key, kv.value) for kv in got.kvs] == [(b"/e2e/backup", b"in the snapshot")]
    except BaseException:
        for root in sorted((home / ".talos/clusters" / NAME).glob("*/var/log/console.log")):
            print(f"===== {root.parent.parent.parent.name} =====")
            print("\n".join(root.read_text(errors="replace").splitlines()[-40:]))
        raise
    finally:
        destroyed = _talosctl(home, "cluster", "destroy", "--name", NAME)
    assert destroyed.exit_code == 0, destroyed.stderr
