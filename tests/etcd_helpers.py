"""Real etcd members on loopback addresses for tests, over mutual TLS, the way a node runs them.

``EtcdCluster`` issues one etcd CA, gives each member its own 127.a.b.c address (Talos's ports
2379/2380/2381 on that address only), its Talos PKI layout and arguments from :mod:`ichor.etcd`,
and starts it through :mod:`ichor.machinery.proc`. Every member is stopped by PID in
:meth:`EtcdCluster.close` (use :func:`etcd_cluster` as a context manager so that happens even
when a test fails). Members run with ``--unsafe-no-fsync`` to keep tests fast: never in production.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from ichor.etcd import (
    CLIENT_PORT,
    EtcdBinaries,
    EtcdCerts,
    EtcdClient,
    EtcdError,
    PKIPaths,
    build_args,
    build_env,
    etcd_url,
    etcd_version,
    find_binaries,
    format_initial_cluster,
    issue_certs,
    select_addresses,
    write_pki,
)
from ichor.machinery import proc
from ichor.machinery.pki import CertKey, new_ecdsa_ca

START_TIMEOUT = 15.0
TEST_FLAGS = {"unsafe-no-fsync": "true", "log-level": "warn"}


@dataclass
class EtcdMember:
    name: str
    address: str
    root: Path
    certs: EtcdCerts
    pki: PKIPaths
    log: Path
    process: proc.Background | None = None
    args: list[str] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.root / "var" / "lib" / "etcd"

    @property
    def client_url(self) -> str:
        return etcd_url(self.address, CLIENT_PORT)

    @property
    def peer_url(self) -> str:
        return etcd_url(self.address, 2380)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def new_etcd_ca() -> CertKey:
    """An ECDSA etcd CA, as ``talosctl gen secrets`` makes one (organization ``etcd``)."""
    return new_ecdsa_ca(organization="etcd", ttl=timedelta(days=3650))


def _port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


class EtcdCluster:
    """Members of one etcd cluster under ``base``; call :meth:`close` (or use :func:`etcd_cluster`)."""

    def __init__(
        self, base: Path, *, ca: CertKey | None = None, binaries: EtcdBinaries | None = None
    ) -> None:
        self.base = base
        self.ca = ca or new_etcd_ca()
        self.binaries = binaries or find_binaries()
        self.version = etcd_version(self.binaries.etcd)
        self.members: list[EtcdMember] = []

    def prepare(self, name: str, address: str) -> EtcdMember:
        """A member's directories and PKI (not started)."""
        root = self.base / name
        certs = issue_certs(self.ca, hostname=name, addresses=[address], shared_loopback=True)
        pki = write_pki(root / "system" / "secrets" / "etcd", certs)
        member = EtcdMember(name, address, root, certs, pki, root / "var" / "log" / "etcd.log")
        member.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return member

    def start(
        self,
        member: EtcdMember,
        *,
        initial_cluster: str | None,
        state: str | None,
        wait: bool = True,
        extra_args: dict[str, str] | None = None,
    ) -> EtcdMember:
        addresses = select_addresses([member.address], exclusive=True)
        member.args = build_args(
            name=member.name,
            data_dir=member.data_dir,
            pki=member.pki,
            addresses=addresses,
            initial_cluster=initial_cluster,
            initial_cluster_state=state,
            extra_args={**TEST_FLAGS, **(extra_args or {})},
            etcd_version=self.version,
        )
        member.process = proc.start(
            [str(self.binaries.etcd), *member.args], output=member.log, env=build_env()
        )
        if member not in self.members:
            self.members.append(member)
        if wait:
            self.wait_listening(member)
        return member

    def wait_listening(self, member: EtcdMember, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert member.process is not None
            if member.process.poll() is not None:
                raise RuntimeError(f"etcd {member.name} exited early:\n{member.log_text()[-3000:]}")
            if _port_open(member.address, CLIENT_PORT):
                return
            time.sleep(0.05)
        raise RuntimeError(
            f"etcd {member.name} did not listen within {timeout}s:\n{member.log_text()[-3000:]}"
        )

    def start_new(self, specs: Sequence[tuple[str, str]]) -> list[EtcdMember]:
        """Bootstrap a new cluster of ``(name, address)`` members and wait until it has a leader."""
        members = [self.prepare(name, address) for name, address in specs]
        initial = format_initial_cluster((m.name, m.peer_url) for m in members)
        for m in members:
            self.start(m, initial_cluster=initial, state="new", wait=False)
        for m in members:
            self.wait_listening(m)
        self.wait_healthy(members)
        return members

    def client(self, members: Sequence[EtcdMember] | None = None, **kwargs: float) -> EtcdClient:
        chosen = members if members is not None else self.running()
        admin = chosen[0].certs.admin
        return EtcdClient(
            [m.client_url for m in chosen], ca=self.ca.crt, cert=admin.crt, key=admin.key, **kwargs
        )

    def running(self) -> list[EtcdMember]:
        return [m for m in self.members if m.process is not None and m.process.poll() is None]

    def wait_healthy(self, members: Sequence[EtcdMember], timeout: float = START_TIMEOUT) -> None:
        async def check() -> None:
            deadline = time.monotonic() + timeout
            async with self.client(members, timeout=2.0) as client:
                while True:
                    results = [await client.health(m.client_url, timeout=2.0) for m in members]
                    if all(r.healthy for r in results):
                        return
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"etcd not healthy: {[r.error for r in results]}")
                    await asyncio.sleep(0.1)

        asyncio.run(check())

    def stop(self, member: EtcdMember) -> None:
        if member.process is not None:
            member.process.stop(timeout=5.0)

    def close(self) -> None:
        for member in self.members:
            self.stop(member)


@contextmanager
def etcd_cluster(base: Path, specs: Sequence[tuple[str, str]] = ()) -> Iterator[EtcdCluster]:
    """A cluster bootstrapped from ``specs`` (may be empty); every member is stopped on exit."""
    cluster = EtcdCluster(base)
    try:
        if specs:
            cluster.start_new(specs)
        yield cluster
    finally:
        cluster.close()


__all__ = ["EtcdCluster", "EtcdError", "EtcdMember", "etcd_cluster", "new_etcd_ca"]
