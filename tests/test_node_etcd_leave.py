"""``NodeEtcd.leave`` (``talosctl etcd leave`` and a graceful reset) against real etcd members.

The node is a small stand-in holding just what :class:`ichor.machined.etcd.EtcdNode` asks for; the
etcd members are real processes on loopback addresses (``etcd_helpers``), so what is tested is the
member removal etcd really performs.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from etcd_helpers import EtcdCluster, etcd_cluster
from grpclib import Status
from grpclib.exceptions import GRPCError

from ichor.machined.cosi import State
from ichor.machined.etcd import NodeEtcd
from ichor.machined.platform import Layout

pytestmark = pytest.mark.e2e


class _Supervisor:
    def __init__(self, running: bool) -> None:
        self.running = running

    def list(self) -> list[Any]:
        info = type("Info", (), {"id": "etcd", "running": self.running})()
        info.state = type("State", (), {"value": "Running" if self.running else "Finished"})()
        return [info]


class _Node:
    """What NodeEtcd needs of a node, for the member ``name`` at ``address``."""

    def __init__(self, cluster: EtcdCluster, name: str, address: str, endpoint_host: str) -> None:
        self.layout = Layout(cluster.base / name, address)
        self.state = State()
        self.supervisor = _Supervisor(running=True)
        self.name = name
        self.said: list[str] = []
        self.config = {
            "cluster": {
                "etcd": {"ca": {"crt": cluster.ca.crt_b64(), "key": cluster.ca.key_b64()}},
                "controlPlane": {"endpoint": f"https://{endpoint_host}:6443"},
            }
        }

    def say(self, message: str) -> None:
        self.said.append(message)

    def hostname(self) -> str:
        return self.name

    def machine_type(self) -> str:
        return "controlplane"

    def v1alpha1(self) -> dict[str, Any]:
        return self.config

    def now(self) -> datetime:
        return datetime.now(UTC)


def _prefix() -> str:
    return f"127.{random.randint(100, 149)}.{random.randint(0, 255)}"


def _voting(cluster: EtcdCluster, members: list[Any]) -> list[str]:
    async def main() -> list[str]:
        async with cluster.client(members, timeout=5.0) as client:
            return sorted(m.name for m in await client.member_list() if not m.is_learner)

    return asyncio.run(main())


def test_leave_removes_the_member_even_when_its_own_etcd_does_not_answer(tmp_path: Path) -> None:
    prefix = _prefix()
    specs = [(f"cp-{i}", f"{prefix}.{i}") for i in (1, 2, 3)]
    with etcd_cluster(tmp_path, specs) as cluster:
        one, two, three = cluster.members
        node = _Node(cluster, three.name, three.address, endpoint_host=one.address)
        etcd = NodeEtcd(node)  # type: ignore[arg-type]
        # Its own etcd is frozen: connecting to it times out, as a busy member's may.
        assert three.process is not None
        os.kill(three.process.pid, signal.SIGSTOP)
        try:
            asyncio.run(etcd.leave())
        finally:
            os.kill(three.process.pid, signal.SIGCONT)
        assert _voting(cluster, [one, two]) == ["cp-1", "cp-2"]
        assert node.said[-1] == "left the etcd cluster"
        # Leaving again (a reply lost, a retried reset) finds nothing to do and succeeds.
        asyncio.run(etcd.leave())
        assert _voting(cluster, [one, two]) == ["cp-1", "cp-2"]


def test_leave_refuses_to_remove_the_only_voting_member(tmp_path: Path) -> None:
    address = f"{_prefix()}.1"
    with etcd_cluster(tmp_path, [("solo", address)]) as cluster:
        node = _Node(cluster, "solo", address, endpoint_host=address)
        with pytest.raises(GRPCError) as refused:
            asyncio.run(NodeEtcd(node).leave())  # type: ignore[arg-type]
        assert refused.value.status is Status.FAILED_PRECONDITION
        assert "only voting etcd member" in str(refused.value.message)
        assert "talosctl etcd snapshot" in str(refused.value.message)
        assert _voting(cluster, cluster.members) == ["solo"]
        # A graceful reset reports the refusal instead of failing.
        problem = asyncio.run(NodeEtcd(node).leave_before_reset())  # type: ignore[arg-type]
        assert problem is not None and "only voting" in problem


def test_leave_when_etcd_is_not_running_names_the_service(tmp_path: Path) -> None:
    address = f"{_prefix()}.1"
    with etcd_cluster(tmp_path, [("solo", address)]) as cluster:
        node = _Node(cluster, "solo", address, endpoint_host=address)
        node.supervisor.running = False
        with pytest.raises(GRPCError) as refused:
            asyncio.run(NodeEtcd(node).leave())  # type: ignore[arg-type]
        assert refused.value.status is Status.FAILED_PRECONDITION
        assert "talosctl service etcd" in str(refused.value.message)
