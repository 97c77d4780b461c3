"""Cluster health checks: stages and texts (client side, the node's ClusterService, the CLI)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode

from ichor.api.gen.cluster import cluster_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.storage import storage_pb2

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)
ADDRESS = "127.77.4.2"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, ADDRESS)
    with fake.serving():
        yield fake


def _etcd_cluster(
    node: FakeNode,
    *,
    members: list[str],
    errors: list[str] = (),  # type: ignore[assignment]
    alarm: bool = False,
    mode: str = "metal",
    memory_kib: int = 4 * 1024 * 1024,
    disk_bytes: int = 10 * 1024**3,
) -> None:
    async def version(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.VersionResponse()
        element = reply.messages.add()
        element.version.tag = "v1.7.6"
        element.platform.mode = mode
        await stream.send_message(reply)

    async def status(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.EtcdStatusResponse()
        reply.messages.add().member_status.errors.extend(errors)
        await stream.send_message(reply)

    async def alarms(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.EtcdAlarmListResponse()
        element = reply.messages.add()
        if alarm:
            element.member_alarms.add(member_id=1, alarm=machine_pb2.EtcdMemberAlarm.NOSPACE)
        await stream.send_message(reply)

    async def member_list(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.EtcdMemberListResponse()
        element = reply.messages.add()
        for i, ip in enumerate(members):
            element.members.add(id=i + 1, hostname=f"cp-{i}", peer_urls=[f"https://{ip}:2380"])
        await stream.send_message(reply)

    async def services(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.ServiceListResponse()
        etcd = reply.messages.add().services.add(id="etcd", state="Running")
        etcd.health.healthy = True
        await stream.send_message(reply)

    async def memory(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = machine_pb2.MemoryResponse()
        reply.messages.add().meminfo.memtotal = memory_kib
        await stream.send_message(reply)

    async def disks(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        reply = storage_pb2.DisksResponse()
        reply.messages.add().disks.add(device_name="/dev/sda", size=disk_bytes, system_disk=True)
        await stream.send_message(reply)

    node.handlers.update(Version=version, EtcdStatus=status, EtcdAlarmList=alarms, EtcdMemberList=member_list,
                         ServiceList=services, Memory=memory, Disks=disks)  # fmt: skip


def test_client_side_stages_pass_then_kubernetes_fails_truthfully(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2", "10.5.0.3"])
    r = talosctl(
        *node.args(),
        "health",
        "--server=false",
        "--control-plane-nodes",
        "10.5.0.2,10.5.0.3",
        "--wait-timeout",
        "5s",
    )
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[:4] == [
        "waiting for all nodes' APIs to be reachable: OK",
        "waiting for etcd to be healthy: OK",
        "waiting for etcd members to be consistent across nodes: OK",
        "waiting for etcd members to be control plane nodes: OK",
    ]
    assert lines[4:7] == [
        "waiting for apid to be ready: OK",
        "waiting for all nodes memory sizes: OK",
        "waiting for all nodes disk sizes: OK",
    ]
    assert lines[7].startswith("waiting for kubelet to be healthy: the nodes run no Kubernetes")
    assert "error: kubelet to be healthy: the nodes run no Kubernetes" in r.stderr
    assert "OK" not in lines[7]


def test_a_worker_below_talos_memory_minimum_fails_its_stage(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2"], memory_kib=512 * 1024)
    r = talosctl(*node.args(), "health", "--server=false", "--control-plane-nodes", "10.5.0.2",
                 "--worker-nodes", "10.5.0.5", "--wait-timeout", "2s")  # fmt: skip
    assert r.exit_code == 1
    assert "waiting for all nodes disk sizes" not in r.stderr
    assert (
        "error: timed out waiting for all nodes memory sizes: 10.5.0.2: does not meet memory requirements: "
        "expected at least 1898 MiB, actual 512 MiB; 10.5.0.5: does not meet memory requirements: "
        "expected at least 874 MiB, actual 512 MiB"
    ) in r.stderr
    assert "hint: raise --wait-timeout, or look at the nodes named above (`talosctl memory`" in r.stderr


def test_container_mode_nodes_pass_the_size_stages_unmeasured(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2"], mode="container", memory_kib=1, disk_bytes=1)
    r = talosctl(
        *node.args(), "health", "--server=false", "--control-plane-nodes", "10.5.0.2", "--wait-timeout", "2s"
    )
    assert "waiting for all nodes disk sizes: OK" in r.stderr.splitlines()
    assert "Memory" not in node.calls and "Disks" not in node.calls


def test_etcd_alarm_keeps_the_stage_waiting_until_timeout(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2"], alarm=True)
    r = talosctl(
        *node.args(), "health", "--server=false", "--control-plane-nodes", "10.5.0.2", "--wait-timeout", "2s"
    )
    assert r.exit_code == 1
    assert "waiting for etcd to be healthy: 10.5.0.2: etcd alarms raised: NOSPACE (0s)" in r.stderr
    assert "error: timed out waiting for etcd to be healthy" in r.stderr
    assert "hint: raise --wait-timeout" in r.stderr
    assert "discovered nodes" not in r.stderr  # given by --control-plane-nodes, not discovered


def test_members_must_be_the_control_plane_nodes(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2"])
    r = talosctl(
        *node.args(), "health", "--server=false", "--control-plane-nodes", "10.5.0.2", "--init-node", "10.5.0.9",
        "--wait-timeout", "1s",
    )  # fmt: skip
    assert r.exit_code == 1
    assert "do not match the control plane nodes ['10.5.0.2', '10.5.0.9']" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server=false", "--worker-nodes", "10.5.0.5"], "control plane nodes are not known"),
        (["--control-plane-nodes", "10.5.0.2", "--run-e2e"], "--run-e2e runs the Kubernetes e2e"),
        (["--control-plane-nodes", "10.5.0.2", "--wait-timeout", "soon"], "invalid duration 'soon'"),
    ],
)
def test_bad_flags_are_refused_before_any_call(
    node: FakeNode, talosctl: Any, args: list[str], message: str
) -> None:
    r = talosctl(*node.args("10.5.0.2"), "health", *args)
    assert r.exit_code != 0
    assert message in r.stderr
    assert node.calls == []


def test_server_side_streams_progress_and_reports_errors(node: FakeNode, talosctl: Any) -> None:
    seen: list[Any] = []

    async def health(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        seen.append(request)
        await stream.send_message(cluster_pb2.HealthCheckProgress(message='discovered nodes: ["10.5.0.2"]'))
        await stream.send_message(
            cluster_pb2.HealthCheckProgress(message="waiting for etcd to be healthy: OK")
        )
        failed = cluster_pb2.HealthCheckProgress()
        failed.metadata.hostname = "10.5.0.2"
        failed.metadata.error = "kubelet to be healthy: the nodes run no Kubernetes"
        await stream.send_message(failed)

    node.handlers["HealthCheck"] = health
    r = talosctl(
        *node.args("10.5.0.2"), "health", "--control-plane-nodes", "10.5.0.2", "--worker-nodes", "10.5.0.5"
    )
    assert r.exit_code == 1
    assert r.stderr.splitlines()[:2] == [
        'discovered nodes: ["10.5.0.2"]',
        "waiting for etcd to be healthy: OK",
    ]
    assert "error: healthcheck error: kubelet to be healthy" in r.stderr
    (request,) = seen
    assert list(request.cluster_info.control_plane_nodes) == ["10.5.0.2"]
    assert list(request.cluster_info.worker_nodes) == ["10.5.0.5"]
    assert request.wait_timeout.seconds == 20 * 60

    r = talosctl(*node.args("10.5.0.2", "10.5.0.3"), "health", "--control-plane-nodes", "10.5.0.2")
    assert r.exit_code == 1 and "'health' is not supported with multiple nodes" in r.stderr


def _node_health_check(
    tmp_path: Path,
    request: Any,
    members: Callable[[], list[tuple[str, list[str]]]] | None = None,
    served_members: list[tuple[str, list[str]]] | None = None,
) -> tuple[list[str], Any]:
    """The node's HealthCheck (ClusterService, its client reaching a fake cluster whose node serves
    ``served_members`` as Members resources); returns the progress lines and the gRPC error that
    ended the stream."""
    import asyncio
    from contextlib import asynccontextmanager

    from grpclib.exceptions import GRPCError
    from grpclib.testing import ChannelFor

    from ichor.api.gen.cluster import cluster_grpc
    from ichor.cli._root import GlobalOptions
    from ichor.client import Client
    from ichor.machined.server._cluster import ClusterService

    fake = FakeNode(tmp_path, "127.77.4.3")
    _etcd_cluster(fake, members=["10.5.0.2"])
    if served_members is not None:
        _members(fake, served_members)
    with fake.serving():

        @asynccontextmanager
        async def factory() -> Any:
            async with Client.from_options(GlobalOptions(talosconfig=str(fake.talosconfig))) as client:
                yield client

        async def main() -> tuple[list[str], GRPCError]:
            service = ClusterService(factory, interval=0.01, members=members)
            async with ChannelFor([service]) as channel:
                stub = cluster_grpc.ClusterServiceStub(channel)
                lines: list[str] = []
                with pytest.raises(GRPCError) as err:
                    async with stub.HealthCheck.open() as call:
                        await call.send_message(request, end=True)
                        async for progress in call:
                            lines.append(progress.message)
                return lines, err.value

        return asyncio.run(main())


def test_node_cluster_service_runs_the_same_checks(tmp_path: Path) -> None:
    """The node's HealthCheck over a client to a fake cluster: stages, final error."""
    request = cluster_pb2.HealthCheckRequest(
        cluster_info=cluster_pb2.ClusterInfo(control_plane_nodes=["10.5.0.2"])
    )
    lines, error = _node_health_check(tmp_path, request)
    # Nodes named in the request were not discovered: no "discovered nodes" line.
    assert not any(line.startswith("discovered nodes") for line in lines), lines
    assert "waiting for etcd members to be control plane nodes: OK" in lines
    assert lines[-1].startswith("waiting for kubelet to be healthy: the nodes run no Kubernetes")
    assert "the nodes run no Kubernetes" in (error.message or "")


def _members(node: FakeNode, members: list[tuple[str, list[str]]]) -> list[Any]:
    """Serve ``members`` (machine type, addresses) as Members resources; returns the List requests."""
    from ichor.api.gen.v1alpha1 import state_pb2

    requests: list[Any] = []

    async def listing(stream: Stream[Any, Any]) -> None:
        requests.append(await stream.recv_message())
        for i, (machine_type, addresses) in enumerate(members):
            reply = state_pb2.ListResponse()
            reply.resource.metadata.id = f"node-{i}"
            listed = "".join(f"    - {a}\n" for a in addresses)
            reply.resource.spec.yaml_spec = (
                f"nodeId: node-{i}\naddresses:\n{listed}hostname: node-{i}\nmachineType: {machine_type}\n"
                if addresses
                else f"nodeId: node-{i}\naddresses: []\nmachineType: {machine_type}\n"
            )
            await stream.send_message(reply)

    node.handlers["State.List"] = listing
    return requests


def test_client_side_without_nodes_uses_the_discovered_members(node: FakeNode, talosctl: Any) -> None:
    _etcd_cluster(node, members=["10.5.0.2"])
    requests = _members(node, [("controlplane", ["10.5.0.2", "fd00::2"]), ("worker", ["10.5.0.5"])])
    r = talosctl(*node.args("10.5.0.2"), "health", "--server=false", "--wait-timeout", "5s")
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[0] == 'discovered nodes: ["10.5.0.2" "10.5.0.5"]'
    assert "waiting for etcd members to be control plane nodes: OK" in lines
    assert "the nodes run no Kubernetes" in r.stderr
    (request,) = requests
    assert (request.namespace, request.type) == ("cluster", "Members.cluster.talos.dev")


def test_client_side_without_nodes_and_no_control_plane_member_says_what_to_do(
    node: FakeNode, talosctl: Any
) -> None:
    _members(node, [("worker", ["10.5.0.5"]), ("controlplane", [])])
    r = talosctl(*node.args("10.5.0.2"), "health", "--server=false", "--wait-timeout", "5s")
    assert r.exit_code == 1
    assert "no control plane nodes were discovered" in r.stderr
    assert "cluster.discovery.enabled" in r.stderr and "--control-plane-nodes" in r.stderr
    assert "Version" not in node.calls  # nothing checked without nodes


def test_node_cluster_service_without_nodes_checks_the_members_its_node_knows(tmp_path: Path) -> None:
    # The same reader as talosctl's client-side check (client.health.discover), through the node's client.
    lines, error = _node_health_check(
        tmp_path,
        cluster_pb2.HealthCheckRequest(),
        served_members=[("controlplane", ["10.5.0.2"]), ("worker", ["10.5.0.5"])],
    )
    assert lines[0] == 'discovered nodes: ["10.5.0.2" "10.5.0.5"]'
    assert "waiting for etcd members to be control plane nodes: OK" in lines
    assert "the nodes run no Kubernetes" in (error.message or "")


def test_cluster_info_from_members() -> None:
    from ichor.client.health import ClusterInfo, HealthError

    info = ClusterInfo.from_members(
        [("init", ["10.5.0.1"]), ("controlplane", ["10.5.0.2", "10.5.0.22"]), ("worker", ["10.5.0.5"]),
         ("unknown", ["10.5.0.9"]), ("worker", [])]
    )  # fmt: skip
    assert (info.control_plane_nodes, info.worker_nodes) == (["10.5.0.1", "10.5.0.2"], ["10.5.0.5"])
    with pytest.raises(HealthError, match="no control plane nodes were discovered"):
        ClusterInfo.from_members([])
    assert ClusterInfo.from_flags([], [], "") is None
    given = ClusterInfo.from_flags(["10.5.0.2"], [], "10.5.0.1")
    assert given is not None and given.control_plane_nodes == ["10.5.0.2", "10.5.0.1"]


@pytest.mark.parametrize("members", [[("controlplane", ["10.5.0.2"])], None])
def test_node_cluster_service_without_nodes_uses_its_members(tmp_path: Path, members: Any) -> None:
    from grpclib.const import Status

    found = (lambda: members) if members is not None else None
    # Without a members reader the service asks its client's node, which knows no members here.
    lines, error = _node_health_check(tmp_path, cluster_pb2.HealthCheckRequest(), found, served_members=[])
    if members is None:
        assert error.status is Status.INVALID_ARGUMENT and "--control-plane-nodes" in (error.message or "")
        assert lines == []
    else:
        assert lines[0] == 'discovered nodes: ["10.5.0.2"]'
        assert "waiting for etcd members to be control plane nodes: OK" in lines
        assert "the nodes run no Kubernetes" in (error.message or "")
