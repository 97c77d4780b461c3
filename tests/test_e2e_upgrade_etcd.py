"""The etcd side of ``talosctl upgrade`` on a control plane against real etcd members (loopback
addresses, ``etcd_helpers``): the checks pass on three healthy members and refuse, with Talos 1.7.6's
texts, a member stopped (named by its 16-digit hex id), a member added but never started, two
members, a single member without ``--preserve``; the upgrade mutex ``talos:v1:etcdUpgradeMutex`` held
by another session fails the checks at once (two control planes asked at once: the second fails) and
is free again after every check; leaving for an
upgrade without ``--preserve`` removes the member, stops etcd and clears its data directory, and the
only voting member is refused (its data kept).

Budget: 25 s for the file on 2 cores (measured 15 s for the three-member cluster, 1 s for the single member).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from etcd_helpers import EtcdCluster, EtcdMember, etcd_cluster
from grpclib.exceptions import GRPCError
from test_node_etcd import _etcd, _Node, _prefix, _voting

from ichor.etcd import EtcdUnavailableError
from ichor.machined.server._etcd_ops import EtcdOperations
from ichor.machined.server._etcd_upgrade import (
    ETCD_SINGLE_MEMBER,
    MUTEX_LOCKED,
    UPGRADE_MUTEX_PREFIX,
    upgrade_mutex,
)

pytestmark = pytest.mark.e2e


class _Supervisor:
    """The node's service list as the etcd operations read it; stopping etcd stops the real member."""

    def __init__(self, cluster: EtcdCluster, member: EtcdMember) -> None:
        self.cluster, self.member, self.stopped = cluster, member, False

    def list(self) -> list[Any]:
        running = not self.stopped
        info = type("Info", (), {"id": "etcd", "running": running})()
        info.state = type("State", (), {"value": "Running" if running else "Finished"})()
        return [info]

    async def stop(self, *service_ids: str, reason: str | None = None) -> None:
        assert service_ids == ("etcd",)
        await asyncio.to_thread(self.cluster.stop, self.member)
        self.stopped = True


def _node(cluster: EtcdCluster, member: EtcdMember, endpoint_host: str) -> tuple[EtcdOperations, _Node, _Supervisor]:  # fmt: skip
    node = _Node(cluster, member.name, member.address, endpoint_host=endpoint_host)
    supervisor = _Supervisor(cluster, member)
    node.supervisor = supervisor  # type: ignore[assignment]
    return _etcd(node), node, supervisor


def _validate(ops: EtcdOperations, *, preserve: bool) -> str | None:
    async def main() -> str | None:
        try:
            await ops.validate_for_upgrade(preserve=preserve)
        except GRPCError as err:
            return str(err.message)
        return None

    return asyncio.run(main())


def _mutex_keys(cluster: EtcdCluster, members: list[EtcdMember]) -> list[bytes]:
    async def main() -> list[bytes]:
        async with cluster.client(members, timeout=5.0) as client:
            return [kv.key for kv in (await client.get(f"{UPGRADE_MUTEX_PREFIX}/", prefix=True)).kvs]

    return asyncio.run(main())


def test_checks_mutex_and_leaving_on_three_members(tmp_path: Path) -> None:
    prefix = _prefix()
    with etcd_cluster(tmp_path, [(f"cp-{i}", f"{prefix}.{i}") for i in (1, 2, 3)]) as cluster:
        one, two, three = cluster.members
        ops, _node_one, _ = _node(cluster, one, endpoint_host=two.address)

        started = time.monotonic()
        assert _validate(ops, preserve=False) is None  # three healthy members: an upgrade may go
        assert time.monotonic() - started < 5
        assert _mutex_keys(cluster, [one, two]) == []  # released when the checks end

        # Another control plane is in its checks: this one fails at once, as Talos's TryLock does.
        async def held_elsewhere() -> tuple[str | None, bytes]:
            async with cluster.client([two], timeout=5.0) as client, upgrade_mutex(client) as key:
                return await asyncio.to_thread(_validate, ops, preserve=False), key.encode()

        problem, key = asyncio.run(held_elsewhere())
        assert (
            problem
            == f"failed to acquire upgrade mutex: error trying to lock etcd upgrade mutex: {MUTEX_LOCKED}"
        )
        assert key.startswith(b"talos:v1:etcdUpgradeMutex/")
        assert _mutex_keys(cluster, [one, two]) == []
        assert _validate(ops, preserve=True) is None

        # Two control planes asked at once: the one whose checks start while the other's run fails.
        other, _node_two, _ = _node(cluster, two, endpoint_host=one.address)
        slow_probe = ops._quorum_probe

        async def slow(member: Any) -> str | None:
            await asyncio.sleep(1.0)  # the first one's checks take a while
            return await slow_probe(member)

        ops._quorum_probe = slow  # type: ignore[method-assign]

        async def both() -> list[BaseException | None]:
            first = asyncio.ensure_future(ops.validate_for_upgrade(preserve=False))
            async with cluster.client([one, two], timeout=5.0) as client:  # until the first holds it
                while not (await client.get(f"{UPGRADE_MUTEX_PREFIX}/", prefix=True)).kvs:
                    assert not first.done(), first
                    await asyncio.sleep(0.05)
            second = asyncio.ensure_future(other.validate_for_upgrade(preserve=False))
            done = await asyncio.gather(first, second, return_exceptions=True)
            return [d if isinstance(d, BaseException) else None for d in done]

        first, second = asyncio.run(both())
        ops._quorum_probe = slow_probe  # type: ignore[method-assign]
        assert first is None, first
        assert isinstance(second, GRPCError) and second.message == (
            f"failed to acquire upgrade mutex: error trying to lock etcd upgrade mutex: {MUTEX_LOCKED}"
        )
        assert _validate(other, preserve=False) is None  # and passes once the first is done

        # A member that does not answer the quorum read is named by its id.
        ids = {m.name: m.id for m in asyncio.run(_members(cluster, [one, two]))}
        cluster.stop(three)
        problem = _validate(ops, preserve=True)
        assert problem is not None and problem.startswith(
            f"error validating etcd for upgrade: etcd member {ids['cp-3']:016x} is not healthy; all members must "
            "be healthy to perform an upgrade: "
        ), problem
        assert _mutex_keys(cluster, [one, two]) == []  # a refusal releases it too
        cluster.start(three, initial_cluster=None, state=None)
        cluster.wait_healthy([one, two, three])

        # A member added that never started has no name yet.
        async def add_ghost() -> int:
            # etcd refuses a reconfiguration ("unhealthy cluster") until every member has been
            # connected for 5 s: three just restarted.
            deadline = time.monotonic() + 20
            async with cluster.client([one, two, three], timeout=5.0) as client:
                while True:
                    try:
                        return (await client.member_add([f"https://{prefix}.9:2380"], learner=False)).id
                    except EtcdUnavailableError as err:
                        if "unhealthy cluster" not in str(err) or time.monotonic() > deadline:
                            raise
                    await asyncio.sleep(0.5)

        ghost = asyncio.run(add_ghost())
        try:
            assert _validate(ops, preserve=False) == (
                f"error validating etcd for upgrade: etcd member {ghost:016x} is not started, all members must be "
                "running to perform an upgrade"
            )
        finally:

            async def remove_ghost() -> None:
                async with cluster.client([one, two, three], timeout=5.0) as client:
                    await client.member_remove(ghost)

            asyncio.run(remove_ghost())

        # Without --preserve the upgrade leaves etcd: member removed, etcd stopped, data cleared.
        leaving, node_three, supervisor = _node(cluster, three, endpoint_host=one.address)
        assert asyncio.run(leaving.leave_for_upgrade()) is None
        assert _voting(cluster, [one, two]) == ["cp-1", "cp-2"]
        assert supervisor.stopped and three.data_dir.is_dir() and list(three.data_dir.iterdir()) == []
        assert node_three.said[-2:] == [
            "left the etcd cluster",
            "etcd data directory cleared: the node joins etcd again after the upgrade",
        ]
        # Two members left: refused even with --preserve (one more down loses quorum).
        assert _validate(ops, preserve=True) == (
            "error validating etcd for upgrade: etcd member count(2) is insufficient to maintain quorum if "
            "upgrade commences"
        )


async def _members(cluster: EtcdCluster, members: list[EtcdMember]) -> list[Any]:
    async with cluster.client(members, timeout=5.0) as client:
        return await client.member_list()


def test_a_single_member_is_refused_without_preserve_and_never_leaves(tmp_path: Path) -> None:
    address = f"{_prefix()}.1"
    with etcd_cluster(tmp_path, [("solo", address)]) as cluster:
        (solo,) = cluster.members
        ops, node, supervisor = _node(cluster, solo, endpoint_host=address)
        assert _validate(ops, preserve=False) == f"error validating etcd for upgrade: {ETCD_SINGLE_MEMBER}"
        assert _validate(ops, preserve=True) is None
        assert _mutex_keys(cluster, [solo]) == []
        # --force skips the checks; the sequence's leave then refuses and keeps the data.
        problem = asyncio.run(ops.leave_for_upgrade())
        assert problem is not None and "only voting etcd member" in problem, problem
        assert not supervisor.stopped and any(solo.data_dir.iterdir())
        assert node.said == []
