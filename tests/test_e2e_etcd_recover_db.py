"""End to end: the Disaster Recovery guide with a ``db`` copied out of the data directory (001:517,
542-550, 582) on a process cluster with real etcd.

One control plane: a key is written; ``get machinetype`` shows no ``init`` node (the guide's
check); ``talosctl cp /var/lib/etcd/member/snap/db .`` copies the live database; EPHEMERAL is wiped
(``reset --graceful=false --reboot --system-labels-to-wipe=EPHEMERAL``); ``bootstrap
--recover-from=./db`` is refused for the missing integrity hash, naming the flag, and
``--recover-skip-hash-check`` recovers it: the key is back.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cluster_helpers import talosctl_in
from test_e2e_etcd_backup import _console, _etcd, _until

from ichor import etcd as etcdlib
from ichor.provision._cluster import ClusterRecord

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

NAME = "recoverdb"


def test_bootstrap_recovers_from_a_copied_db_with_skip_hash_check(tmp_path: Path) -> None:
    prefix = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    cp, home = f"{prefix}.2", tmp_path
    created = talosctl_in(home, "cluster", "create", "--provisioner", "process", "--name", NAME,
                          "--cidr", f"{prefix}.0/24", "--workers", "0", "--wait-timeout", "3m", timeout=300)  # fmt: skip
    try:
        assert created.exit_code == 0, created.stderr[-3000:]
        root = Path(ClusterRecord.load(home / ".talos/clusters", NAME).nodes[0].root)
        _etcd(root, cp, lambda c: c.put("/e2e/db", "copied with talosctl cp"))

        types = talosctl_in(home, "-n", cp, "get", "machinetype")
        assert types.exit_code == 0, types.stderr
        header, row = types.stdout.splitlines()[:2]
        assert header.split() == ["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "TYPE"], types.stdout
        assert row.split()[-1] == "controlplane", types.stdout

        fetched = home / "fetched"
        fetched.mkdir()
        copied = talosctl_in(home, "-n", cp, "cp", "/var/lib/etcd/member/snap/db", str(fetched))
        assert copied.exit_code == 0, copied.stderr
        db = fetched / "db"
        assert db.is_file() and db.stat().st_size % 4096 == 0, list(fetched.iterdir())

        boots = _console(root).count("booting as controlplane")
        wiped = talosctl_in(home, "-n", cp, "reset", "--graceful=false", "--reboot",
                            "--system-labels-to-wipe=EPHEMERAL", "--wait=false")  # fmt: skip
        assert wiped.exit_code == 0, wiped.stderr
        _until(
            "etcd waiting for a bootstrap after the wipe",
            lambda: (
                _console(root).count("booting as controlplane") > boots
                and "etcd is waiting to join the cluster"
                in _console(root).rsplit("booting as controlplane", 1)[-1]
            ),
            120,
        )

        # etcd's waiting line can come before apid listens again on a loaded host: retry while the
        # node refuses the connection, as a user would.
        attempt = [talosctl_in(home, "-n", cp, "bootstrap", f"--recover-from={db}")]

        def answered() -> bool:
            if "connection refused" not in attempt[0].stderr:
                return True
            attempt[0] = talosctl_in(home, "-n", cp, "bootstrap", f"--recover-from={db}")
            return "connection refused" not in attempt[0].stderr

        _until("apid to answer after the reboot", answered, 60)
        refused = attempt[0]
        assert refused.exit_code != 0
        assert "skip-hash-check" in refused.stderr, refused.stderr

        recovered = talosctl_in(
            home, "-n", cp, "bootstrap", f"--recover-from={db}", "--recover-skip-hash-check"
        )
        assert recovered.exit_code == 0, recovered.stderr
        assert f'recovering from snapshot "{db}"' in recovered.stdout, recovered.stdout

        def restored() -> object:
            try:
                return _etcd(root, cp, lambda c: c.get("/e2e/", prefix=True))
            except etcdlib.EtcdError:
                return None

        got = _until("the key back after recovery", restored, 180)
        assert [(kv.key, kv.value) for kv in got.kvs] == [(b"/e2e/db", b"copied with talosctl cp")]
    except BaseException:
        for console in sorted((home / ".talos/clusters" / NAME).glob("*/var/log/console.log")):
            print("\n".join(console.read_text(errors="replace").splitlines()[-40:]))
        raise
    finally:
        destroyed = talosctl_in(home, "cluster", "destroy", "--name", NAME)
    assert destroyed.exit_code == 0, destroyed.stderr
