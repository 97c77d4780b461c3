"""``etcd leave`` against real etcd members: a member whose etcd does not answer is still removed, the
only voting member is refused, a stopped etcd is named by its service."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from etcd_helpers import etcd_cluster
from grpclib import Status
from grpclib.exceptions import GRPCError
from test_node_etcd import _etcd, _Node, _prefix, _voting

pytestmark = pytest.mark.e2e


def test_leave_removes_the_member_even_when_its_own_etcd_does_not_answer(tmp_path: Path) -> None:
    prefix = _prefix()
    specs = [(f"cp-{i}", f"{prefix}.{i}") for i in (1, 2, 3)]
    with etcd_cluster(tmp_path, specs) as cluster:
        one, two, three = cluster.members
        node = _Node(cluster, three.name, three.address, endpoint_host=one.address)
        etcd = _etcd(node)
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
            asyncio.run(_etcd(node).leave())
        assert refused.value.status is Status.FAILED_PRECONDITION
        assert "only voting etcd member" in str(refused.value.message)
        assert "talosctl etcd snapshot" in str(refused.value.message)
        assert _voting(cluster, cluster.members) == ["solo"]
        # A graceful reset reports the refusal instead of failing.
        problem = asyncio.run(_etcd(node).leave_before_reset())
        assert problem is not None and "only voting" in problem


def test_leave_when_etcd_is_not_running_names_the_service(tmp_path: Path) -> None:
    address = f"{_prefix()}.1"
    with etcd_cluster(tmp_path, [("solo", address)]) as cluster:
        node = _Node(cluster, "solo", address, endpoint_host=address)
        node.supervisor.running = False
        with pytest.raises(GRPCError) as refused:
            asyncio.run(_etcd(node).leave())
        assert refused.value.status is Status.FAILED_PRECONDITION
        assert "talosctl service etcd" in str(refused.value.message)
