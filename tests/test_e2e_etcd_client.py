"""ichor.etcd against real etcd processes over mutual TLS on 127.42.x.y (Talos's ports).

Every member is started through ``tests/etcd_helpers.py`` and stopped by PID when its cluster
context exits, also when a test fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_helpers import EtcdCluster, etcd_cluster, new_etcd_ca

from ichor.etcd import (
    EtcdClient,
    EtcdLearnerNotReadyError,
    EtcdNotFoundError,
    EtcdSnapshotError,
    EtcdTLSError,
    EtcdTooManyLearnersError,
    EtcdUnavailableError,
    format_initial_cluster,
    issue_certs,
    restore_snapshot,
    save_snapshot,
    snapshot_info,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with etcd_cluster(tmp_path_factory.mktemp("etcd1"), [("solo", "127.42.1.1")]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    specs = [("cp-1", "127.42.3.1"), ("cp-2", "127.42.3.2"), ("cp-3", "127.42.3.3")]
    with etcd_cluster(tmp_path_factory.mktemp("etcd3"), specs) as cluster:
        yield cluster


def test_kv_roundtrip_and_prefix(single: EtcdCluster) -> None:
    async def main() -> None:
        async with single.client() as client:
            rev1 = await client.put("/ichor/a", "1")
            rev2 = await client.put(b"/ichor/b", b"2")
            await client.put("/ichorx", "outside the prefix")
            assert rev2 == rev1 + 1
            one = await client.get("/ichor/a")
            assert [(kv.key, kv.value, kv.version) for kv in one.kvs] == [(b"/ichor/a", b"1", 1)]
            assert one.kvs[0].create_revision == one.kvs[0].mod_revision == rev1
            await client.put("/ichor/a", "1b")
            both = await client.get("/ichor/", prefix=True, serializable=True)
            assert [kv.key for kv in both.kvs] == [b"/ichor/a", b"/ichor/b"] and both.count == 2
            assert both.kvs[0].version == 2
            assert await client.delete("/ichor/", prefix=True) == 2
            assert (await client.get("/ichor/", prefix=True)).count == 0
            assert (await client.get("/ichorx")).count == 1
            assert await client.delete("/nothing") == 0

    asyncio.run(main())


def test_lease_create_if_absent_and_waiting_for_deletion(single: EtcdCluster) -> None:
    async def main() -> None:
        async with single.client() as client:
            lease = await client.lease_grant(5)
            created = await client.create("/ichor/vip/a", "cp-1", lease=lease)
            assert created is not None
            assert await client.create("/ichor/vip/a", "cp-2") is None  # already there: untouched
            got = (await client.get("/ichor/vip/a")).kvs[0]
            assert (got.value, got.lease, got.create_revision) == (b"cp-1", lease, created)
            assert await client.lease_keepalive(lease) == 5
            waiter = asyncio.create_task(client.wait_deleted("/ichor/vip/a", after=created, timeout=10))
            await asyncio.sleep(0.2)
            assert not waiter.done()
            await client.lease_revoke(lease)  # deletes every key written with the lease
            deleted_at = await waiter
            assert deleted_at > created and (await client.get("/ichor/vip/a")).count == 0
            assert await client.lease_keepalive(lease) == 0  # gone: nothing to renew
            # A deletion that already happened is replayed from history.
            assert await client.wait_deleted("/ichor/vip/a", after=created, timeout=5) == deleted_at

    asyncio.run(main())


def test_status_alarms_defragment_health(single: EtcdCluster) -> None:
    member = single.members[0]

    async def main() -> None:
        async with single.client() as client:
            [m] = await client.member_list()
            assert m.name == "solo" and m.peer_urls == (member.peer_url,) and not m.is_learner
            st = await client.status(member.client_url)
            assert st.member_id == m.id == st.leader
            assert st.version.startswith("3.5.") and st.db_size > 0 and st.raft_term >= 1
            assert await client.alarm_list() == []
            assert await client.alarm_disarm() == []
            await client.defragment(member.client_url)
            health = await client.health(member.client_url)
            assert health.healthy and health.error is None

    asyncio.run(main())


def test_unknown_member_id_keeps_etcds_text(single: EtcdCluster) -> None:
    async def main() -> None:
        async with single.client() as client:
            with pytest.raises(EtcdNotFoundError, match="member not found") as err:
                await client.member_remove(0xDEADBEEF)
            assert "member list" in (err.value.hint or "")
            with pytest.raises(EtcdNotFoundError, match="member not found"):
                await client.member_promote(0xDEADBEEF)

    asyncio.run(main())


def test_client_certificate_from_another_ca_is_refused(single: EtcdCluster) -> None:
    foreign = issue_certs(new_etcd_ca(), hostname="intruder", addresses=["127.42.1.9"])
    member = single.members[0]

    async def main() -> None:
        async with EtcdClient(
            [member.client_url], ca=single.ca.crt, cert=foreign.admin.crt, key=foreign.admin.key
        ) as client:
            with pytest.raises(EtcdTLSError) as err:
                await client.get("x")
        assert member.client_url in str(err.value)
        assert "cluster.etcd.ca" in (err.value.hint or "")
        # ... and a server whose certificate another CA signed is not trusted either.
        async with EtcdClient(
            [member.client_url], ca=foreign.ca.crt, cert=foreign.admin.crt, key=foreign.admin.key
        ) as client:
            with pytest.raises(EtcdTLSError, match="not trusted"):
                await client.get("x")

    asyncio.run(main())


def test_failover_when_the_first_endpoint_is_dead(single: EtcdCluster) -> None:
    member = single.members[0]
    admin = member.certs.admin

    async def main() -> None:
        endpoints = ["https://127.42.1.200:2379", member.client_url]
        async with EtcdClient(endpoints, ca=single.ca.crt, cert=admin.crt, key=admin.key) as client:
            await client.put("failover", "ok")
            assert (await client.get("failover")).kvs[0].value == b"ok"
        async with EtcdClient(
            ["https://127.42.1.200:2379", "https://127.42.1.201:2379"],
            ca=single.ca.crt, cert=admin.crt, key=admin.key, connect_timeout=1.0,
        ) as client:  # fmt: skip
            with pytest.raises(EtcdUnavailableError, match="no etcd endpoint is reachable") as err:
                await client.get("x")
            assert "127.42.1.200" in str(err.value) and "127.42.1.201" in str(err.value)
            health = await client.health("https://127.42.1.200:2379")
            assert not health.healthy and "127.42.1.200" in (health.error or "")

    asyncio.run(main())


def test_three_members_learner_join_promote_move_leader_remove(trio: EtcdCluster, tmp_path: Path) -> None:
    async def main() -> None:
        async with trio.client() as client:
            members = await client.member_list()
            assert sorted(m.name for m in members) == ["cp-1", "cp-2", "cp-3"]

            # A fourth node joins Talos's way: added as a learner, started with state=existing.
            newcomer = trio.prepare("cp-4", "127.42.3.4")
            # etcd refuses membership changes until every member has been connected for 5 s.
            deadline = time.monotonic() + 15
            while True:
                try:
                    added = await client.member_add([newcomer.peer_url], learner=True)
                    break
                except EtcdUnavailableError as exc:
                    assert "unhealthy cluster" in str(exc)
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.25)
            assert added.is_learner and added.peer_urls == (newcomer.peer_url,)
            with pytest.raises(EtcdTooManyLearnersError, match="too many learner members"):
                await client.member_add(["https://127.42.3.5:2380"], learner=True)
            # Not started yet, so certainly not in sync with the leader: etcd's text is kept.
            with pytest.raises(EtcdLearnerNotReadyError, match="in sync with leader") as not_ready:
                await client.member_promote(added.id)
            assert "retry" in (not_ready.value.hint or "")
            listed = await client.member_list()
            initial = format_initial_cluster(
                (m.name or newcomer.name, url) for m in listed for url in m.peer_urls
            )
            trio.start(newcomer, initial_cluster=initial, state="existing")

            deadline = time.monotonic() + 20
            while True:  # Talos's way: retry the promotion until the learner has caught up
                try:
                    await client.member_promote(added.id)
                    break
                except EtcdLearnerNotReadyError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            promoted = {m.id: m for m in await client.member_list()}[added.id]
            assert promoted.name == "cp-4" and not promoted.is_learner

            # Leadership moves to the newcomer, asked of whichever member leads now.
            await client.move_leader(added.id)
            st = await client.status(newcomer.client_url)
            assert st.leader == added.id

            # Hand leadership back (removing the leader would force an election), then remove it
            # and stop its process: three members remain and still serve.
            first = {m.name: m.id for m in await client.member_list()}["cp-1"]
            await client.move_leader(first)
            assert (await client.status(trio.members[0].client_url)).leader == first
            await client.member_remove(added.id)
            trio.stop(newcomer)
            assert sorted(m.name for m in await client.member_list()) == ["cp-1", "cp-2", "cp-3"]
            await client.put("after-remove", "ok")
            statuses = [await client.status(m.client_url) for m in trio.running()]
            assert len({s.leader for s in statuses}) == 1

    asyncio.run(main())


def test_snapshot_save_restore_start(single: EtcdCluster, tmp_path: Path) -> None:
    keys = {f"/snap/{i:03d}".encode(): f"value-{i}".encode() for i in range(50)}

    async def fill_and_save() -> tuple[int, object]:
        async with single.client() as client:
            for k, v in keys.items():
                await client.put(k, v)
            revision = (await client.get("/snap/", prefix=True)).revision
            return revision, await save_snapshot(client, tmp_path / "backups" / "etcd.snapshot")

    revision, info = asyncio.run(fill_and_save())
    snap = tmp_path / "backups" / "etcd.snapshot"
    assert info == snapshot_info(snap)
    assert info.revision == revision and info.total_keys >= len(keys)  # type: ignore[attr-defined]
    assert [p.name for p in snap.parent.iterdir()] == ["etcd.snapshot"], "no temporary file left behind"
    assert oct(snap.stat().st_mode & 0o777) == "0o600"

    # Restore into a fresh node's data dir and start a new one-member cluster from it.
    restored = EtcdCluster(tmp_path / "restored", ca=single.ca)
    try:
        member = restored.prepare("phoenix", "127.42.2.1")
        member.data_dir.rmdir()
        got = restore_snapshot(
            snap,
            member.data_dir,
            name=member.name,
            initial_cluster=format_initial_cluster([(member.name, member.peer_url)]),
            initial_advertise_peer_urls=member.peer_url,
        )
        assert got.revision == revision
        assert oct(member.data_dir.stat().st_mode & 0o777) == "0o700"
        assert [p.name for p in member.data_dir.parent.iterdir()] == ["etcd"]
        restored.start(member, initial_cluster=None, state=None)
        restored.wait_healthy([member])

        async def check() -> None:
            async with restored.client([member]) as client:
                back = await client.get("/snap/", prefix=True)
                assert {kv.key: kv.value for kv in back.kvs} == keys
                assert back.revision >= revision
                [m] = await client.member_list()
                assert m.name == "phoenix"

        asyncio.run(check())
    finally:
        restored.close()


def test_truncated_snapshot_is_refused_and_nothing_written(single: EtcdCluster, tmp_path: Path) -> None:
    async def save() -> None:
        async with single.client() as client:
            await client.put("/t", "x")
            await save_snapshot(client, tmp_path / "full.snapshot")

    asyncio.run(save())
    data = (tmp_path / "full.snapshot").read_bytes()
    target = tmp_path / "node" / "var" / "lib" / "etcd"
    for name, blob in [
        ("cut.snapshot", data[: len(data) // 2]),
        ("flipped.snapshot", data[:4100] + bytes([data[4100] ^ 0xFF]) + data[4101:]),
    ]:
        broken = tmp_path / name
        broken.write_bytes(blob)
        with pytest.raises(EtcdSnapshotError) as err:
            restore_snapshot(broken, target, name="n", initial_cluster="n=https://127.42.2.9:2380",
                             initial_advertise_peer_urls="https://127.42.2.9:2380")  # fmt: skip
        assert "truncated or damaged" in str(err.value) or "integrity check" in str(err.value)
        assert err.value.hint
        assert not target.exists(), "a refused restore leaves the data directory alone"
        assert not target.parent.exists() or list(target.parent.iterdir()) == []

    # A sound snapshot whose restore etcdutl refuses (this member is not in the initial cluster)
    # also leaves no data directory and no staging directory behind.
    target.parent.mkdir(parents=True, exist_ok=True)
    with pytest.raises(EtcdSnapshotError, match="restoring snapshot") as failed:
        restore_snapshot(tmp_path / "full.snapshot", target, name="n",
                         initial_cluster="other=https://127.42.2.9:2380",
                         initial_advertise_peer_urls="https://127.42.2.9:2380")  # fmt: skip
    assert failed.value.hint
    assert list(target.parent.iterdir()) == []
