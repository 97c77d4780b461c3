"""End to end: one control plane of three cut off while a client writes to etcd (root only, as CI runs).

A 3+0 container cluster. A client with an admin certificate of the cluster's etcd CA writes keys
continuously through the two members that stay connected, recording every acknowledged key; the
third control plane's host-side veth goes down for a few seconds and comes back. Quorum holds (writes
keep being acknowledged while the node is cut off), every acknowledged key is then readable from
every member's own store (serializable reads) including the rejoined one, ``talosctl etcd status``
answers on the cut node again and its member list shows three voting members. The figures (writes
acknowledged during the cut, time to rejoin) are printed, not asserted against a clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from container_helpers import CONTAINER_NODES, ContainerCluster, connects, container_cluster, until

from ichor.etcd import EtcdClient, EtcdError
from ichor.machinery import proc
from ichor.machinery.pki import new_keypair
from ichor.machinery.secrets import SecretsBundle
from ichor.provision._network import veth_name

pytestmark = [pytest.mark.e2e, CONTAINER_NODES]

CUT_FOR = 6.0
"""Seconds the control plane stays cut off (longer than etcd's election timeout of 1 s)."""


@dataclass
class Writer:
    """Writes ``fault/<n>`` through ``endpoints`` until stopped; keeps what etcd acknowledged, and when."""

    endpoints: list[str]
    tls: tuple[bytes, bytes, bytes]
    acked: list[tuple[float, str]] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        async def main() -> None:
            ca, crt, key = self.tls
            async with EtcdClient(self.endpoints, ca=ca, cert=crt, key=key, timeout=3) as client:
                n = 0
                while not self.stop.is_set():
                    name = f"fault/{n:06d}"
                    try:
                        await client.put(name, str(n))
                    except EtcdError as err:
                        self.failed.append((time.monotonic(), f"{name}: {err}"))
                    else:
                        self.acked.append((time.monotonic(), name))
                    n += 1
                    await asyncio.sleep(0.02)

        asyncio.run(main())

    def between(self, start: float, end: float) -> int:
        return sum(1 for at, _ in self.acked if start <= at < end)


def _admin(cluster: ContainerCluster) -> tuple[bytes, bytes, bytes]:
    """The etcd CA and a fresh admin client pair signed by it (what etcdctl on a node uses)."""
    ca = SecretsBundle.load(cluster.state_dir / "secrets.yaml").etcd
    pair = new_keypair(ca, common_name="talos", ttl=timedelta(hours=1), server=False, client=True)
    return ca.crt, pair.crt, pair.key


def _missing(endpoint: str, tls: tuple[bytes, bytes, bytes], keys: set[str]) -> set[str]:
    """``keys`` absent from ``endpoint``'s own store (a serializable read of the prefix)."""

    async def main() -> set[str]:
        ca, crt, key = tls
        async with EtcdClient([endpoint], ca=ca, cert=crt, key=key, timeout=5) as client:
            found = await client.get("fault/", prefix=True, serializable=True, endpoint=endpoint)
        return keys - {kv.key.decode() for kv in found.kvs}

    try:
        return asyncio.run(main())
    except EtcdError:
        return set(keys)


def test_quorum_holds_while_a_control_plane_is_cut_off_and_it_rejoins(tmp_path: Path) -> None:
    with container_cluster(tmp_path, "epart") as cluster:
        cluster.create("--controlplanes", "3", "--workers", "0", timeout=420)
        nodes = [cluster.address(2 + i) for i in range(3)]
        cut, others = nodes[2], nodes[:2]
        veth = veth_name(cluster.name, f"{cluster.name}-controlplane-3")
        tls = _admin(cluster)
        writer = Writer([f"https://{ip}:2379" for ip in others], tls)
        thread = threading.Thread(target=writer.run, daemon=True)
        thread.start()
        try:
            until("the first writes are acknowledged", lambda: len(writer.acked) >= 10, 60)
            time.sleep(1)
            proc.run(["ip", "link", "set", veth, "down"], check=True)
            cut_at = time.monotonic()
            time.sleep(CUT_FOR / 2)
            assert not connects(cut, 2379), f"{cut} still answers with {veth} down"
            time.sleep(CUT_FOR / 2)
            proc.run(["ip", "link", "set", veth, "up"], check=True)
            up_at = time.monotonic()
            time.sleep(2)
        finally:
            proc.run(["ip", "link", "set", veth, "up"], check=False)
            writer.stop.set()
            thread.join(timeout=30)
        during = writer.between(cut_at, up_at)
        # Quorum held: writes kept being acknowledged through the two connected members.
        assert writer.between(cut_at + CUT_FOR / 2, up_at) > 0, writer.failed[-5:]

        def rejoined() -> bool:
            status = cluster.talosctl("-n", cut, "etcd", "status", timeout=30)
            return status.exit_code == 0 and cut in status.stdout

        until("etcd status answers on the cut node", rejoined, 120)
        answered = time.monotonic() - up_at
        keys = {name for _, name in writer.acked}
        for ip in nodes:
            until(f"every acknowledged key is in {ip}'s store",
                   lambda ip=ip: not _missing(f"https://{ip}:2379", tls, keys), 60)  # type: ignore[misc]  # fmt: skip
        members = cluster.talosctl("-n", cut, "etcd", "members")
        assert members.exit_code == 0, members.stderr
        rows = [line.split() for line in members.stdout.splitlines()[1:] if line.strip()]
        assert len(rows) == 3 and all(row[-1] == "false" for row in rows), members.stdout  # LEARNER column

        def healthy() -> bool:  # the service's own health check runs every 5 s
            service = cluster.talosctl("-n", cut, "service", "etcd", timeout=30).stdout
            return "Running" in service and "HEALTH   OK" in service

        until("service etcd is healthy on the cut node", healthy, 120)
        took = time.monotonic() - up_at
        print(
            f"\netcd partition: {len(keys)} writes acknowledged, {during} of them during the {CUT_FOR:g}s cut, "
            f"{len(writer.failed)} refused or timed out; after the link was back the cut node's etcd answered in "
            f"{answered:.1f}s and its service was healthy in {took:.1f}s"
        )
