"""A real etcd 3.5 snapshot through the CLI: ``talosctl etcd snapshot`` saves and reports it like Talos's
client, and ``bootstrap --recover-from`` uploads it, both against a test double of the node API (the
snapshot itself from a throwaway etcd on 127.77.4.9)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.server import Stream
from test_cli_bootstrap import _bootstrap
from test_cli_etcd import _snapshot_handler
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode

from ichor.api.gen.machine import machine_pb2
from ichor.cli._etcd import etcdutl_path
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.4.10")
    with fake.serving():
        yield fake


@pytest.fixture(scope="module")
def real_snapshot(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real etcd 3.5 snapshot (one put), taken from a throwaway etcd on 127.77.4.9."""
    work = tmp_path_factory.mktemp("etcd")
    bindir = etcdutl_path().parent
    client, peer = "http://127.77.4.9:23791", "http://127.77.4.9:23801"
    child = proc.start(
        [
            bindir / "etcd", "--data-dir", work / "data", "--listen-client-urls", client,
            "--advertise-client-urls", client, "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer, "--initial-cluster", f"default={peer}",
        ],
        output=work / "etcd.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            done = proc.run(
                [bindir / "etcdctl", "--endpoints", client, "put", "talos", "ichor"], check=False, timeout=10
            )
            if done.exit_code == 0:
                break
            assert time.monotonic() < deadline, (work / "etcd.log").read_text()
            time.sleep(0.2)
        proc.run(
            [bindir / "etcdctl", "--endpoints", client, "snapshot", "save", work / "snap.db"], timeout=30
        )
    finally:
        child.stop(timeout=10)
    return (work / "snap.db").read_bytes()


def test_snapshot_saves_and_reports_like_talosctl(
    node: FakeNode, talosctl: Any, tmp_path: Path, real_snapshot: bytes
) -> None:
    assert len(real_snapshot) % 512 == 32
    node.handlers["EtcdSnapshot"] = _snapshot_handler(real_snapshot)
    r = talosctl(*node.args("10.5.0.2"), "etcd", "snapshot", "db.snapshot", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    saved = tmp_path / "db.snapshot"
    assert saved.read_bytes() == real_snapshot
    assert (saved.stat().st_mode & 0o777) == 0o600
    assert not (tmp_path / "db.snapshot.part").exists()
    first, second = r.stdout.splitlines()
    assert first == f'etcd snapshot saved to "db.snapshot" ({len(real_snapshot)} bytes)'
    status = proc.run([etcdutl_path(), "snapshot", "status", "-w", "json", saved]).stdout
    import json

    info = json.loads(status)
    assert second == (
        f"snapshot info: hash {info['hash']:08x}, revision {info['revision']}, "
        f"total keys {info['totalKey']}, total size {info['totalSize']}"
    )


def test_bootstrap_recovers_from_a_snapshot(
    node: FakeNode,
    talosctl: Any,
    tmp_path: Path,
    real_snapshot: bytes,
) -> None:
    uploaded = bytearray()
    sizes: list[int] = []

    async def recover(stream: Stream[Any, Any]) -> None:
        async for data in stream:
            uploaded.extend(data.bytes)
            sizes.append(len(data.bytes))
        reply = machine_pb2.EtcdRecoverResponse()
        reply.messages.add()
        await stream.send_message(reply)

    seen: list[Any] = []
    node.handlers["EtcdRecover"] = recover
    _bootstrap(node, seen)
    snap = tmp_path / "db.snapshot"
    snap.write_bytes(real_snapshot)
    r = talosctl(
        *node.args("10.5.0.2"),
        "bootstrap",
        "--recover-from=./db.snapshot",
        "--recover-skip-hash-check",
        cwd=tmp_path,
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith('recovering from snapshot "./db.snapshot": hash ')
    assert bytes(uploaded) == real_snapshot and max(sizes) == 4096
    assert seen[0].recover_etcd and seen[0].recover_skip_hash_check
    assert node.calls == ["EtcdRecover", "Bootstrap"]
