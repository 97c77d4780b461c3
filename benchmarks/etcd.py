"""etcd figures, each against a baseline measured in the same run.

1. ``talosctl cluster create --controlplanes 3 --workers 2`` (a ``python -m ichor`` subprocess with
   its own HOME, state dir and talosconfig) until it returns, which is when etcd is bootstrapped and
   all 3 control planes are voting members with one member list. Its last progress line, "etcd is
   healthy on 3 control plane(s) after X s (Y s since create started)", gives the etcd phase X and
   the create time Y as the CLI measured them; the wall time around the subprocess is reported too.
   ``cluster destroy`` always runs afterwards.
   Floor: three real etcd servers started by hand, all at once, with a static initial cluster
   (``initial-cluster-state=new``), mutual TLS from one etcd CA issued through :mod:`ichor.etcd`,
   and exactly the flags a node gives etcd (:func:`ichor.etcd.build_args`, no extra args, so fsync
   is on as on the nodes), timed from the first process start until a quorum read
   (:meth:`EtcdClient.health`) succeeds on all three. Certificates are issued before the clock
   starts. Ratios: create / floor and etcd phase / floor.
2. Snapshot and restore throughput against the last by-hand 3-member cluster: ``--keys`` keys of
   ``--value-size`` random bytes written with :meth:`EtcdClient.put` (``--concurrency`` in
   flight), then :func:`ichor.etcd.save_snapshot` to a file (MiB/s and keys/s, including its fsync,
   hash check and ``etcdutl snapshot status``), then :func:`ichor.etcd.restore_snapshot` into a
   fresh data dir (MiB/s, including its hash check and status call).
   Floors: :func:`shutil.copyfile` of the snapshot file (page cache warm), and ``etcdutl snapshot
   restore`` run directly. The restore is verified by starting a one-member etcd on the restored
   data dir and comparing its key count and revision with the source cluster's.

Every process runs on 127.77.x.y addresses and is stopped by PID in a ``finally``; temp dirs are
removed. Run: ``.venv/bin/python benchmarks/etcd.py [--runs N] [--keys N]``. Bytecode: says whether
``.pyc`` files were used (this machine sets PYTHONDONTWRITEBYTECODE=1, so ``python -m ichor`` starts
from source unless told otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ichor.etcd import (
    CLIENT_PORT,
    PEER_PORT,
    EtcdBinaries,
    EtcdCerts,
    EtcdClient,
    build_args,
    build_env,
    etcd_url,
    etcd_version,
    find_binaries,
    format_initial_cluster,
    issue_certs,
    restore_snapshot,
    save_snapshot,
    select_addresses,
    write_pki,
)
from ichor.machinery import proc
from ichor.machinery.pki import CertKey, new_ecdsa_ca

PY = sys.executable
NET = "127.77"
MIB = 1 << 20
HEALTHY = re.compile(
    r"etcd is healthy on (\d+) control plane\(s\) after ([\d.]+) ?s \(([\d.]+) ?s since create started\)"
)
PREFIX = "/bench/"


@dataclass
class Member:
    name: str
    address: str
    root: Path
    certs: EtcdCerts
    binaries: EtcdBinaries
    version: tuple[int, int, int]
    process: proc.Background | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def client_url(self) -> str:
        return etcd_url(self.address, CLIENT_PORT)

    @property
    def peer_url(self) -> str:
        return etcd_url(self.address, PEER_PORT)

    def start(self, initial_cluster: str | None, state: str = "new") -> None:
        """Start etcd; ``state`` "existing" joins the members ``initial_cluster`` names."""
        pki = write_pki(self.root / "pki", self.certs)
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        args = build_args(
            name=self.name,
            data_dir=self.data_dir,
            pki=pki,
            addresses=select_addresses([self.address], exclusive=True),
            initial_cluster=initial_cluster,
            initial_cluster_state=state if initial_cluster else None,
            etcd_version=self.version,
        )
        self.process = proc.start(
            [str(self.binaries.etcd), *args], output=self.root / "etcd.log", env=build_env()
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=5.0)
            self.process = None

    def log_tail(self) -> str:
        log = self.root / "etcd.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as s:
        # As etcd (Go) does, so connections in TIME_WAIT from an earlier run do not count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _members(
    base: Path,
    ca: CertKey,
    binaries: EtcdBinaries,
    version: tuple[int, int, int],
    specs: list[tuple[str, str]],
) -> list[Member]:
    members = []
    for name, address in specs:
        for port in (CLIENT_PORT, PEER_PORT):
            if not _port_free(address, port):
                raise SystemExit(f"{address}:{port} is in use: another run or test? pass another --net")
        certs = issue_certs(ca, hostname=name, addresses=[address], shared_loopback=True)
        members.append(Member(name, address, base / name, certs, binaries, version))
    return members


def _client(ca: CertKey, members: list[Member], **kwargs: float) -> EtcdClient:
    admin = members[0].certs.admin
    return EtcdClient([m.client_url for m in members], ca=ca.crt, cert=admin.crt, key=admin.key, **kwargs)


async def _wait_healthy(ca: CertKey, members: list[Member], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with _client(ca, members, timeout=1.0, connect_timeout=0.5) as client:
        while True:
            results = await asyncio.gather(*(client.health(m.client_url, timeout=1.0) for m in members))
            if all(r.healthy for r in results):
                return
            for m in members:
                if m.process is not None and m.process.poll() is not None:
                    raise RuntimeError(f"etcd {m.name} exited:\n{m.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd not healthy within {timeout}s: {[r.error for r in results]}")
            await asyncio.sleep(0.02)


def _floor(base: Path, ca: CertKey, binaries: EtcdBinaries, version: tuple[int, int, int], net: str) -> tuple[float, list[Member]]:  # fmt: skip
    """Start three members at once with a static cluster; seconds until all three pass a quorum read.

    Returns the still-running members: the caller stops them.
    """
    members = _members(base, ca, binaries, version, [(f"floor-{i}", f"{net}.{i + 1}") for i in range(3)])
    initial = format_initial_cluster((m.name, m.peer_url) for m in members)
    try:
        start = time.perf_counter()
        for m in members:
            m.start(initial)
        asyncio.run(_wait_healthy(ca, members))
        return time.perf_counter() - start, members
    except BaseException:
        for m in members:
            m.stop()
        raise


def _talosctl(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(home))
    env.pop("TALOSCONFIG", None)
    return subprocess.run(
        [PY, "-m", "ichor", "--talosconfig", str(home / "talosconfig"), *args],
        env=env, cwd=home, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _create(home: Path, name: str, cidr: str) -> tuple[float, float, float]:
    """(wall s, CLI's create s, CLI's etcd-phase s) of one 3+2 ``cluster create``; always destroys."""
    state = str(home / "clusters")
    try:
        start = time.perf_counter()
        r = _talosctl(home, "cluster", "create", "--provisioner", "process", "--name", name, "--cidr", cidr, "--state", state,
                      "--controlplanes", "3", "--workers", "2")  # fmt: skip
        wall = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(f"cluster create failed ({r.returncode}):\n{r.stderr[-3000:]}")
        lines = r.stderr.strip().splitlines()
        match = HEALTHY.search(lines[-1]) if lines else None
        if match is None or match.group(1) != "3":
            raise RuntimeError(f"unexpected last progress line: {lines[-1] if lines else '(none)'!r}")
        return wall, float(match.group(3)), float(match.group(2))
    finally:
        d = _talosctl(home, "cluster", "destroy", "--name", name, "--state", state, timeout=120)
        if d.returncode != 0 and "not found" not in d.stderr:
            print(f"warning: cluster destroy {name} failed: {d.stderr.strip()[-500:]}", file=sys.stderr)


async def _fill(client: EtcdClient, keys: int, value_size: int, concurrency: int) -> int:
    async def worker(first: int) -> None:
        for i in range(first, keys, concurrency):
            await client.put(f"{PREFIX}{i:08d}", os.urandom(value_size), timeout=30.0)

    async with asyncio.TaskGroup() as tg:
        for w in range(min(concurrency, keys)):
            tg.create_task(worker(w))
    return (await client.get(PREFIX, prefix=True)).revision


async def _count(client: EtcdClient, endpoint: str | None = None) -> tuple[int, int]:
    r = await client.get(PREFIX, prefix=True, endpoint=endpoint, timeout=60.0)
    return r.count, r.revision


async def _snapshot(client: EtcdClient, path: Path, endpoint: str) -> tuple[float, int]:
    start = time.perf_counter()
    info = await save_snapshot(client, path, endpoint=endpoint)
    return time.perf_counter() - start, info.revision


def _fsync_copy(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    with dst.open("rb+") as f:
        os.fsync(f.fileno())


def _throughput(
    base: Path, ca: CertKey, binaries: EtcdBinaries, version: tuple[int, int, int], members: list[Member],
    args: argparse.Namespace,
) -> None:  # fmt: skip
    snap = base / "snap" / "etcd.snapshot"
    leader_ep = members[0].client_url

    async def fill_and_save() -> tuple[float, int, int, float, int]:
        async with _client(ca, members, timeout=30.0) as client:
            t = time.perf_counter()
            await _fill(client, args.keys, args.value_size, args.concurrency)
            put_s = time.perf_counter() - t
            count, revision = await _count(client)
            snap_s, snap_rev = await _snapshot(client, snap, leader_ep)
            return put_s, count, revision, snap_s, snap_rev

    put_s, src_count, src_rev, snap_s, snap_rev = asyncio.run(fill_and_save())
    size = snap.stat().st_size
    payload = args.keys * args.value_size / MIB
    print(
        f"put {args.keys} keys x {args.value_size} B ({payload:.1f} MiB, {args.concurrency} in flight): "
        f"{put_s:.2f} s = {args.keys / put_s:.0f} keys/s"
    )
    print(f"source: {src_count} keys under {PREFIX}, revision {src_rev}; snapshot {size / MIB:.1f} MiB")

    t = time.perf_counter()
    shutil.copyfile(snap, base / "snap" / "copy")
    copy_s = time.perf_counter() - t
    t = time.perf_counter()
    _fsync_copy(snap, base / "snap" / "copy2")
    copy_sync_s = time.perf_counter() - t
    copy_mbs, copy_sync_mbs = size / MIB / copy_s, size / MIB / copy_sync_s

    restored = Member("restored", f"{args.net}.30.1", base / "restored", issue_certs(
        ca, hostname="restored", addresses=[f"{args.net}.30.1"], shared_loopback=True), binaries, version)  # fmt: skip
    for port in (CLIENT_PORT, PEER_PORT):
        if not _port_free(restored.address, port):
            raise SystemExit(f"{restored.address}:{port} is in use")
    t = time.perf_counter()
    restore_snapshot(
        snap, restored.data_dir, name=restored.name,
        initial_cluster=format_initial_cluster([(restored.name, restored.peer_url)]),
        initial_advertise_peer_urls=restored.peer_url, binaries=binaries,
    )  # fmt: skip
    restore_s = time.perf_counter() - t

    etcdutl = binaries.require_etcdutl()
    direct = base / "direct" / "data"
    direct.parent.mkdir()
    t = time.perf_counter()
    subprocess.run(
        [str(etcdutl), "snapshot", "restore", str(snap), f"--data-dir={direct}", "--name=direct",
         f"--initial-cluster=direct={restored.peer_url}", f"--initial-advertise-peer-urls={restored.peer_url}"],
        check=True, capture_output=True,
    )  # fmt: skip
    direct_s = time.perf_counter() - t

    snap_mbs, restore_mbs, direct_mbs = size / MIB / snap_s, size / MIB / restore_s, size / MIB / direct_s
    print(f"baseline: shutil.copyfile of the snapshot {copy_mbs:.0f} MiB/s ({copy_s * 1000:.1f} ms)")
    print(f"baseline: copyfile + fsync {copy_sync_mbs:.0f} MiB/s ({copy_sync_s * 1000:.1f} ms)")
    print(f"baseline: etcdutl snapshot restore directly {direct_mbs:.1f} MiB/s ({direct_s * 1000:.0f} ms)")
    rows = [
        ("save_snapshot (stream + fsync + hash + status)", snap_s, snap_mbs, copy_sync_mbs, "copy+fsync"),
        ("restore_snapshot (hash + status + etcdutl)", restore_s, restore_mbs, direct_mbs, "etcdutl"),
    ]
    print(f"{'operation':<48} {'time':>9} {'MiB/s':>8} {'vs copy':>8} {'vs floor':>14}")
    for label, secs, mbs, floor_mbs, floor_name in rows:
        print(
            f"{label:<48} {secs * 1000:>7.0f}ms {mbs:>8.1f} {copy_mbs / mbs:>7.1f}x "
            f"{floor_mbs / mbs:>7.2f}x {floor_name}"
        )
    print(f"save_snapshot: {args.keys / snap_s:.0f} keys/s")

    restored.start(None)
    try:
        asyncio.run(_wait_healthy(ca, [restored]))

        async def read_back() -> tuple[int, int]:
            async with _client(ca, [restored], timeout=30.0) as client:
                return await _count(client)

        count, revision = asyncio.run(read_back())
    finally:
        restored.stop()
    ok = count == src_count and revision == src_rev == snap_rev
    print(
        f"restored member: {count} keys, revision {revision} "
        f"(source {src_count}, {src_rev}; snapshot revision {snap_rev}): {'OK' if ok else 'MISMATCH'}"
    )
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1, help="cluster creates (the floor runs max(5, runs))")
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--net", default=NET, help="first two octets of every 127.x address used")
    args = parser.parse_args()
    if not args.net.startswith("127."):
        parser.error("--net must be a loopback prefix (127.x)")

    pyc = os.environ.get("PYTHONDONTWRITEBYTECODE") != "1"
    print(
        f"bytecode: {'.pyc files may be written/used' if pyc else 'PYTHONDONTWRITEBYTECODE=1, no .pyc (cold source)'}"
    )
    binaries = find_binaries()
    version = etcd_version(binaries.etcd)
    print(f"etcd {'.'.join(map(str, version))} at {binaries.etcd}")

    with tempfile.TemporaryDirectory(prefix="ichor-bench-etcd-") as tmp:
        base = Path(tmp)
        ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
        floors: list[float] = []
        last: list[Member] = []
        try:
            for i in range(max(5, args.runs)):
                for m in last:
                    m.stop()
                secs, last = _floor(base / f"floor{i}", ca, binaries, version, f"{args.net}.{20 + i}")
                floors.append(secs)
            floor = statistics.median(floors)
            print(
                f"floor: 3 etcd by hand (static cluster, mTLS) to all healthy: median {floor:.2f} s, "
                f"min {min(floors):.2f} s (runs: {', '.join(f'{f:.2f}' for f in floors)}; ratios use the median)"
            )

            home = base / "home"
            home.mkdir()
            results = [_create(home, f"bench{i}", f"{args.net}.{10 + i}.0/24") for i in range(args.runs)]
            wall = statistics.median(r[0] for r in results)
            create = statistics.median(r[1] for r in results)
            phase = statistics.median(r[2] for r in results)
            print(
                f"{'cluster create 3+2 (median of ' + str(args.runs) + ')':<44} {'seconds':>8} {'/ floor':>8}"
            )
            for label, secs in (
                ("wall, python -m ichor until it returns", wall),
                ("create (CLI's own clock)", create),
                ("etcd phase: bootstrap to 3 voters", phase),
            ):
                print(f"{label:<44} {secs:>8.2f} {secs / floor:>7.1f}x")

            _throughput(base, ca, binaries, version, last, args)
        finally:
            for m in last:
                m.stop()


if __name__ == "__main__":
    main()
