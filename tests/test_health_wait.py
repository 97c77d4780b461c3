"""The health stages' waiting logic against an in-memory cluster: when etcd counts as healthy (what
``talosctl cluster create`` waits for) and what each progress line says while it is not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.v1alpha1 import state_pb2
from ichor.client import EndpointFailure, EndpointUnreachableError, RPCError
from ichor.client.health import (
    ETCD_CHECKS,
    ClusterInfo,
    HealthCheckError,
    cluster_checks,
    maintenance_check,
    wait_for,
)

CPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@dataclass
class FakeNode:
    """One control plane as the Talos API shows it."""

    address: str
    state: str = "Running"
    last_event: str = "Health check successful"
    healthy: bool | None = True
    health_message: str = ""
    learner: bool = False
    answering: bool = True
    stage: str = "running"
    peer_address: str = ""
    """The address etcd advertises when it is not ``address`` (cluster.etcd.advertisedSubnets)."""


@dataclass
class FakeCluster:
    """What ``client.with_node(n).machine`` / ``.cosi`` answer; every member sees every other's
    learner flag as the node itself reports it."""

    nodes: dict[str, FakeNode] = field(default_factory=lambda: {a: FakeNode(a) for a in CPS})

    def with_node(self, node: str) -> Any:
        return _View(self, self.nodes[node])


class _View:
    def __init__(self, cluster: FakeCluster, node: FakeNode) -> None:
        self.cluster, self.node = cluster, node
        self.machine = self
        self.cosi = self

    def _answer(self) -> None:
        if not self.node.answering:
            raise RPCError(14, 'connection error: desc = "connection refused"')

    async def Version(self, request: Any) -> Any:
        self._answer()
        return machine_pb2.VersionResponse()

    async def ServiceList(self, request: Any) -> Any:
        self._answer()
        reply = machine_pb2.ServiceListResponse()
        service = reply.messages.add().services.add(id="etcd", state=self.node.state)
        service.events.events.add(msg=self.node.last_event, state=self.node.state)
        service.health.unknown = self.node.healthy is None
        service.health.healthy = bool(self.node.healthy)
        service.health.last_message = self.node.health_message
        return reply

    async def EtcdStatus(self, request: Any) -> Any:
        self._answer()
        reply = machine_pb2.EtcdStatusResponse()
        reply.messages.add().member_status.is_learner = self.node.learner
        return reply

    async def EtcdAlarmList(self, request: Any) -> Any:
        self._answer()
        reply = machine_pb2.EtcdAlarmListResponse()
        reply.messages.add()
        return reply

    async def EtcdMemberList(self, request: Any) -> Any:
        self._answer()
        reply = machine_pb2.EtcdMemberListResponse()
        element = reply.messages.add()
        for i, node in enumerate(self.cluster.nodes.values()):
            element.members.add(
                id=i + 1,
                hostname=f"cp-{i + 1}",
                peer_urls=[f"https://{node.peer_address or node.address}:2380"],
                is_learner=node.learner,
            )
        return reply

    async def Get(self, request: Any) -> Any:
        if not self.node.answering:
            raise EndpointUnreachableError(
                "connection refused",
                [EndpointFailure(f"{self.node.address}:50000", "connection refused", "unreachable")],
            )
        reply = state_pb2.GetResponse()
        reply.resource.spec.yaml_spec = f"stage: {self.node.stage}\nstatus:\n    ready: false\n"
        return reply


def _etcd_stages(cluster: FakeCluster) -> list[Any]:
    return [c for c in cluster_checks(cluster, ClusterInfo(list(CPS))) if c.name in ETCD_CHECKS]


def _wait(checks: list[Any], *, timeout: float = 5.0, step: Any = None) -> list[str]:
    """Run ``wait_for`` on a fake clock (each sleep advances it and calls ``step(now)``); the lines."""
    lines: list[str] = []
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        if step is not None:
            step(now[0])

    asyncio.run(
        wait_for(checks, timeout=timedelta(seconds=timeout), report=lines.append, interval=1.0,
                 clock=lambda: now[0], sleep=sleep)
    )  # fmt: skip
    return lines


def test_all_control_planes_running_healthy_and_voting_is_done() -> None:
    lines = _wait(_etcd_stages(FakeCluster()))
    assert lines == [f"waiting for {name}: OK" for name in ETCD_CHECKS]


def test_members_advertised_on_a_nodes_second_network_are_its_members() -> None:
    cluster = FakeCluster()
    for i, node in enumerate(cluster.nodes.values()):
        node.peer_address = f"10.6.0.{i + 2}"
    second = {cp: [f"10.6.0.{i + 2}"] for i, cp in enumerate(CPS)}
    checks = [c for c in cluster_checks(cluster, ClusterInfo(list(CPS), [], second)) if c.name in ETCD_CHECKS]
    assert _wait(checks) == [f"waiting for {name}: OK" for name in ETCD_CHECKS]
    # Without knowing those addresses, the members are nobody's; and one address of another node is not enough.
    with pytest.raises(HealthCheckError):
        _wait(_etcd_stages(cluster), timeout=2.0)
    wrong = {**second, CPS[2]: ["10.6.0.99"]}
    checks = [c for c in cluster_checks(cluster, ClusterInfo(list(CPS), [], wrong)) if c.name in ETCD_CHECKS]
    with pytest.raises(HealthCheckError, match=r"do not match the control plane nodes"):
        _wait(checks, timeout=2.0)


def test_a_service_not_running_is_not_done_and_the_line_says_why() -> None:
    cluster = FakeCluster()
    cluster.nodes[CPS[2]].state, cluster.nodes[CPS[2]].last_event = "Preparing", "Running pre state"
    with pytest.raises(HealthCheckError) as err:
        _wait(_etcd_stages(cluster), timeout=3)
    assert str(err.value) == (
        f"timed out waiting for etcd to be healthy: {CPS[2]}: service etcd is Preparing (Running pre state)"
    )


def test_a_learner_still_present_is_not_done() -> None:
    """A member promoted everywhere but in its own view fails its health (a quorum read on a
    learner); a learner anywhere keeps the wait going, saying how many vote."""
    cluster = FakeCluster()
    cluster.nodes[CPS[2]].learner = True
    cluster.nodes[CPS[2]].healthy, cluster.nodes[CPS[2]].health_message = (
        False,
        "rpc not supported for learner",
    )
    with pytest.raises(HealthCheckError, match="etcd is a learner, not yet promoted to a voting member"):
        _wait(_etcd_stages(cluster), timeout=3)

    # Past the health stage (a member that was healthy before it became a learner again), the
    # consistency stage still refuses.
    checks = _etcd_stages(cluster)[1:]
    with pytest.raises(HealthCheckError) as err:
        _wait(checks, timeout=3)
    assert "2 of 3 control planes voting (learner: cp-3)" in str(err.value)


def test_progress_while_etcd_starts_says_what_is_awaited_once_per_change_and_never_a_grpc_error() -> None:
    cluster = FakeCluster()
    second, third = cluster.nodes[CPS[1]], cluster.nodes[CPS[2]]
    second.answering = False
    third.state, third.last_event, third.healthy = "Preparing", "Running pre state", None

    def step(now: float) -> None:
        second.answering = now >= 3
        if now >= 5:
            third.state, third.learner, third.healthy = "Running", True, False
        if now >= 8:
            third.learner, third.healthy = False, None
        if now >= 9:
            third.healthy = True

    lines = _wait(_etcd_stages(cluster), timeout=30, step=step)
    assert lines == [
        f"waiting for etcd to be healthy: {CPS[1]}: not answering yet; "
        f"{CPS[2]}: service etcd is Preparing (Running pre state) (0s)",
        f"waiting for etcd to be healthy: {CPS[2]}: service etcd is Preparing (Running pre state) (3s)",
        f"waiting for etcd to be healthy: {CPS[2]}: etcd is a learner, not yet promoted to a voting member (5s)",
        f"waiting for etcd to be healthy: {CPS[2]}: service etcd is Running, its health is not known yet (8s)",
        "waiting for etcd to be healthy: OK",
        "waiting for etcd members to be consistent across nodes: OK",
        "waiting for etcd members to be control plane nodes: OK",
    ]


def test_a_node_that_never_answers_times_out_with_the_last_error_plainly() -> None:
    cluster = FakeCluster()
    cluster.nodes[CPS[0]].answering = False
    with pytest.raises(HealthCheckError) as err:
        _wait(_etcd_stages(cluster), timeout=2)
    assert str(err.value) == (
        f"timed out waiting for etcd to be healthy: {CPS[0]}: not answering yet (last error: {CPS[0]}: "
        'rpc error: code = Unavailable desc = connection error: desc = "connection refused")'
    )


def test_maintenance_mode_is_the_maintenance_api_answering_with_the_maintenance_stage() -> None:
    cluster = FakeCluster()
    for node in cluster.nodes.values():
        node.stage = "maintenance"
    cluster.nodes[CPS[0]].answering = False
    cluster.nodes[CPS[1]].stage = "booting"

    def step(now: float) -> None:
        cluster.nodes[CPS[0]].answering = True
        cluster.nodes[CPS[1]].stage = "maintenance"

    lines = _wait([maintenance_check(cluster, CPS)], step=step)
    assert lines == [
        f"waiting for all nodes to be in maintenance mode: {CPS[0]}: not answering yet; "
        f"{CPS[1]}: machine stage is booting, not maintenance (0s)",
        "waiting for all nodes to be in maintenance mode: OK",
    ]
