"""``ichor.client.Talos`` (the public SDK) against a mutual-TLS Talos API double: typed per-node results,
per-node errors with ``.node``, streams (logs, watch, health, etcd snapshot) and the requests it sends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets
from test_cli_node_errors import BAD, GOOD, fail, member, members_node

from ichor.api.gen.cluster import cluster_pb2
from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2
from ichor.api.gen.resource.definitions.runtime import runtime_pb2
from ichor.api.gen.v1alpha1 import meta_pb2, resource_pb2, state_pb2
from ichor.client import (
    AllNodesFailedError,
    NodeFailedError,
    NodesFailedError,
    ResourceNotFoundError,
    SnapshotError,
    StageResult,
    Talos,
    UnknownResourceTypeError,
    WatchEndedError,
)
from ichor.client.health import Check, CheckFailed, CheckSkipped, HealthCheckError, stages

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)
T = TypeVar("T")
OTHER = "10.5.0.3"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.26.4")
    with fake.serving():
        yield fake


def use(node: FakeNode, work: Callable[[Talos], Awaitable[T]], *nodes: str) -> T:
    async def main() -> T:
        async with Talos.from_config(node.talosconfig, nodes=nodes) as talos:
            return await work(talos)

    return asyncio.run(main())


def one_to_many(reply_type: Any, fill: Callable[[Any, str], None], seen: list[Any] | None = None) -> Any:
    async def handler(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        if seen is not None:
            seen.append(request)
        reply = reply_type()
        for n in targets(stream):
            element = reply.messages.add()
            if n == BAD:
                fail(element, n, Status.UNAVAILABLE, "connection refused")
                continue
            element.metadata.hostname = n
            fill(element, n)
        await stream.send_message(reply)

    return handler


def _version(element: Any, n: str) -> None:
    element.version.tag = "v1.7.6"
    element.version.arch = "amd64"
    element.platform.name = "container"
    element.features.rbac = True


def test_version_is_typed_per_node_and_a_failed_node_is_an_error_naming_it(node: FakeNode) -> None:
    node.handlers["Version"] = one_to_many(machine_pb2.VersionResponse, _version)
    versions = use(node, lambda t: t.version(), GOOD, BAD)
    assert [(v.node, v.tag, v.arch, v.platform, v.rbac) for v in versions] == [
        (GOOD, "v1.7.6", "amd64", "container", True)
    ]
    (error,) = versions.errors
    assert isinstance(error, NodeFailedError) and error.node == BAD and error.code_name == "Unavailable"
    assert str(error) == f"{BAD}: rpc error: code = Unavailable desc = connection refused"
    with pytest.raises(NodesFailedError) as raised:
        versions.raise_for_errors()
    assert raised.value.errors == [error]
    with pytest.raises(AllNodesFailedError) as every:
        use(node, lambda t: t.version(), BAD)
    assert every.value.node == BAD and [e.node for e in every.value.errors] == [BAD]
    assert "error getting version" in str(every.value)


def test_services_and_service_actions(node: FakeNode) -> None:
    def services(element: Any, n: str) -> None:
        svc = element.services.add(id="etcd", state="Running")
        svc.health.healthy = True
        event = svc.events.events.add(msg="Health check successful", state="Running")
        event.ts.FromJsonString("2024-05-01T10:00:00Z")
        element.services.add(id="kubelet", state="Waiting").health.unknown = True

    node.handlers["ServiceList"] = one_to_many(machine_pb2.ServiceListResponse, services)
    listed = use(node, lambda t: t.services(), GOOD, OTHER)
    assert [(s.node, s.id, s.state, s.health.text, s.healthy) for s in listed] == [
        (GOOD, "etcd", "Running", "OK", True), (GOOD, "kubelet", "Waiting", "?", False),
        (OTHER, "etcd", "Running", "OK", True), (OTHER, "kubelet", "Waiting", "?", False),
    ]  # fmt: skip
    assert listed[0].events[0].message == "Health check successful"
    assert listed[0].events[0].time is not None and listed[0].events[0].time.year == 2024
    assert [s.id for s in use(node, lambda t: t.services("kubelet"), GOOD)] == ["kubelet"]

    seen: list[Any] = []
    node.handlers["ServiceRestart"] = one_to_many(
        machine_pb2.ServiceRestartResponse, lambda e, n: setattr(e, "resp", "Service restarted"), seen
    )
    (done,) = use(node, lambda t: t.service_restart("kubelet"), GOOD)
    assert (done.node, done.service, done.action, done.response) == (
        GOOD,
        "kubelet",
        "restart",
        "Service restarted",
    )
    assert seen[0].id == "kubelet"


def test_logs_are_whole_lines_per_node_and_a_node_error_is_raised_or_passed_on(node: FakeNode) -> None:
    requests: list[Any] = []

    async def logs(stream: Stream[Any, Any]) -> None:
        requests.append(await stream.recv_message())
        for n, chunk in ((GOOD, b"first li"), (OTHER, b"other\n"), (GOOD, b"ne\nsecond\nthi"), (GOOD, b"rd")):
            message = common_pb2.Data(bytes=chunk)
            message.metadata.hostname = n
            await stream.send_message(message)
        failed = common_pb2.Data()
        fail(failed, BAD, Status.NOT_FOUND, "no such service")
        await stream.send_message(failed)

    node.handlers["Logs"] = logs
    errors: list[NodeFailedError] = []

    async def collect(talos: Talos) -> list[tuple[str, str]]:
        stream = talos.logs("etcd", tail=5, kubernetes=True, on_error=errors.append)
        return [(line.node, line.text) async for line in stream]

    assert use(node, collect, GOOD, OTHER, BAD) == [
        (OTHER, "other"), (GOOD, "first line"), (GOOD, "second"), (GOOD, "third"),
    ]  # fmt: skip
    assert [(e.node, e.code_name) for e in errors] == [(BAD, "NotFound")]
    assert (requests[0].id, requests[0].namespace, requests[0].tail_lines) == ("etcd", "k8s.io", 5)

    async def strict(talos: Talos) -> list[str]:
        return [line.text async for line in talos.logs("etcd")]

    with pytest.raises(NodeFailedError) as raised:
        use(node, strict, GOOD, BAD)
    assert raised.value.node == BAD


def test_apply_config_sends_the_mode_dry_run_and_try_timeout(node: FakeNode) -> None:
    seen: list[Any] = []

    def applied(element: Any, n: str) -> None:
        element.mode = machine_pb2.ApplyConfigurationRequest.NO_REBOOT
        element.mode_details = "Dry run summary: no changes"
        element.warnings.append("a warning")

    node.handlers["ApplyConfiguration"] = one_to_many(machine_pb2.ApplyConfigurationResponse, applied, seen)
    (result,) = use(
        node,
        lambda t: t.apply_config(
            "version: v1alpha1\n", mode="try", dry_run=True, try_timeout=timedelta(seconds=90)
        ),
        GOOD,
    )
    assert (result.node, result.mode, result.mode_details, result.warnings) == (
        GOOD, "no-reboot", "Dry run summary: no changes", ("a warning",),
    )  # fmt: skip
    request = seen[0]
    assert request.data == b"version: v1alpha1\n" and request.dry_run
    assert request.mode == machine_pb2.ApplyConfigurationRequest.TRY
    assert request.try_mode_timeout.ToTimedelta() == timedelta(seconds=90)
    with pytest.raises(Exception, match="unknown apply mode"):
        use(node, lambda t: t.apply_config(b"", mode="sometimes"), GOOD)  # type: ignore[arg-type]


def test_lifecycle_calls_send_talos_requests(node: FakeNode) -> None:
    seen: list[Any] = []
    for rpc, reply in (("Reboot", machine_pb2.RebootResponse), ("Reset", machine_pb2.ResetResponse),
                       ("Shutdown", machine_pb2.ShutdownResponse)):  # fmt: skip
        node.handlers[rpc] = one_to_many(reply, lambda e, n: setattr(e, "actor_id", f"actor-{n}"), seen)
    (rebooted,) = use(node, lambda t: t.reboot(mode="powercycle"), GOOD)
    assert (rebooted.node, rebooted.action, rebooted.actor_id) == (GOOD, "reboot", f"actor-{GOOD}")
    assert seen[-1].mode == machine_pb2.RebootRequest.POWERCYCLE
    use(node, lambda t: t.reset(graceful=False, reboot=True, wipe=["EPHEMERAL"]), GOOD)
    assert not seen[-1].graceful and seen[-1].reboot
    assert [(p.label, p.wipe) for p in seen[-1].system_partitions_to_wipe] == [("EPHEMERAL", True)]
    (down,) = use(node, lambda t: t.shutdown(force=True), GOOD)
    assert seen[-1].force and down.action == "shutdown"


def test_etcd_members_are_typed(node: FakeNode) -> None:
    def members(element: Any, n: str) -> None:
        element.members.add(id=0xAB, hostname="cp-1", peer_urls=["https://10.5.0.2:2380"], is_learner=False)

    node.handlers["EtcdMemberList"] = one_to_many(machine_pb2.EtcdMemberListResponse, members)
    (found,) = use(node, lambda t: t.etcd_members(), GOOD)
    assert (found.node, found.id_hex, found.hostname, found.peer_urls) == (
        GOOD, "00000000000000ab", "cp-1", ("https://10.5.0.2:2380",),
    )  # fmt: skip


def _snapshot(size: int) -> Any:
    async def handler(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        left = size
        while left:
            chunk = min(left, 4096)
            await stream.send_message(common_pb2.Data(bytes=b"\0" * chunk))
            left -= chunk

    return handler


def test_etcd_snapshot_is_renamed_only_when_whole(node: FakeNode, tmp_path: Path) -> None:
    target = tmp_path / "db.snapshot"
    node.handlers["EtcdSnapshot"] = _snapshot(512 * 20 + 32)
    assert use(node, lambda t: t.etcd_snapshot(target), GOOD) == 512 * 20 + 32
    assert target.stat().st_size == 512 * 20 + 32 and (target.stat().st_mode & 0o777) == 0o600
    target.unlink()
    node.handlers["EtcdSnapshot"] = _snapshot(1000)
    with pytest.raises(SnapshotError, match=r"sha256 checksum not found \(size 1000\)"):
        use(node, lambda t: t.etcd_snapshot(target), GOOD)
    assert not target.exists() and not Path(f"{target}.part").exists()
    with pytest.raises(Exception, match="not supported with multiple nodes"):
        use(node, lambda t: t.etcd_snapshot(target), GOOD, OTHER)


def _status(stage: str) -> resource_pb2.Resource:
    spec = runtime_pb2.MachineStatusSpec(stage=enums_pb2.MACHINE_STAGE_RUNNING)
    spec.status.ready = True
    resource = resource_pb2.Resource(
        metadata=resource_pb2.Metadata(namespace="runtime", type="MachineStatuses.runtime.talos.dev", id="machine",
                                       version="3", phase="running"),
        spec=resource_pb2.Spec(yaml_spec=f"stage: {stage}\nstatus:\n    ready: true\n",
                               proto_spec=spec.SerializeToString()),
    )  # fmt: skip
    return resource


def cosi_node(node: FakeNode, *, watch_events: list[state_pb2.Event] | None = None) -> None:
    """COSI double knowing Members (alias ``members``) and MachineStatuses; ``bad`` is Unavailable."""
    members_node(node, [member("cp-1", "cp-1")])
    listing_members = node.handlers["State.List"]
    status_rd = meta_pb2.ResourceDefinitionSpec(
        resource_type="MachineStatuses.runtime.talos.dev", default_namespace="runtime",
        aliases=["machinestatus"], all_aliases=["machinestatus", "machinestatuses"],
    )  # fmt: skip

    async def listing(stream: Stream[Any, Any]) -> None:
        original = stream.recv_message

        async def peek() -> Any:
            return request

        request = await original()
        assert request is not None and stream.metadata is not None
        if request.type == "MachineStatuses.runtime.talos.dev":
            await stream.send_message(state_pb2.ListResponse(resource=_status("running")))
            return
        if request.type == "ResourceDefinitions.meta.cosi.dev" and stream.metadata.get("node") != BAD:
            rd = resource_pb2.Resource(spec=resource_pb2.Spec(proto_spec=status_rd.SerializeToString()))
            await stream.send_message(state_pb2.ListResponse(resource=rd))
        stream.recv_message = peek  # type: ignore[method-assign]
        await listing_members(stream)

    async def watch(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None and request.options.bootstrap_contents
        for event in watch_events or []:
            await stream.send_message(state_pb2.WatchResponse(event=[event]))

    node.handlers["State.List"] = listing
    node.handlers["State.Watch"] = watch


def test_get_by_name_or_alias_and_by_typed_spec_class(node: FakeNode) -> None:
    cosi_node(node)
    found = use(node, lambda t: t.get("members"), GOOD, BAD)
    assert [(r.node, r.type, r.id, r.version, r.spec["hostname"]) for r in found] == [
        (GOOD, "Members.cluster.talos.dev", "cp-1", "2", "cp-1")
    ]
    assert found[0].created is not None and found[0].created.minute == 0
    assert [(e.node, e.code_name) for e in found.errors] == [(BAD, "Unavailable")]

    (status,) = use(node, lambda t: t.get(runtime_pb2.MachineStatusSpec, "machine"), GOOD)
    typed = status.proto
    assert isinstance(typed, runtime_pb2.MachineStatusSpec) and typed.status.ready
    assert status.spec == {"stage": "running", "status": {"ready": True}}

    with pytest.raises(ResourceNotFoundError) as missing:
        use(node, lambda t: t.get("members", "nope"), GOOD)
    assert missing.value.node == GOOD and "Members.cluster.talos.dev(cluster/nope) doesn't exist" in str(
        missing.value
    )
    with pytest.raises(UnknownResourceTypeError, match='"nosuch" is not registered') as unknown:
        use(node, lambda t: t.get("nosuch"), GOOD)
    assert unknown.value.node == GOOD


def test_watch_yields_typed_events_then_says_the_node_ended_it(node: FakeNode) -> None:
    created = state_pb2.Event(event_type=state_pb2.CREATED, resource=member("cp-1", "cp-1"))
    bootstrapped = state_pb2.Event(event_type=state_pb2.BOOTSTRAPPED)
    destroyed = state_pb2.Event(event_type=state_pb2.DESTROYED, resource=member("cp-1", "cp-1"))
    cosi_node(node, watch_events=[created, bootstrapped, destroyed])
    seen: list[tuple[str, str, str | None]] = []

    async def follow(talos: Talos) -> None:
        async for event in talos.watch("members"):
            seen.append((event.node, event.kind, event.resource.id if event.resource else None))

    with pytest.raises(WatchEndedError) as ended:
        use(node, follow, GOOD)
    assert ended.value.node == GOOD
    assert seen == [(GOOD, "created", "cp-1"), (GOOD, "bootstrapped", None), (GOOD, "destroyed", "cp-1")]
    with pytest.raises(Exception, match="one node at a time"):
        use(node, follow, GOOD, OTHER)


def test_server_health_is_an_async_iterator_of_stage_results(node: FakeNode) -> None:
    requests: list[Any] = []
    lines = ["discovered nodes: [\"10.5.0.2\"]", "waiting for etcd to be healthy: service etcd is Preparing (2s)",
             "waiting for etcd to be healthy: OK", "waiting for kube-proxy to report ready: SKIP"]  # fmt: skip

    async def health(stream: Stream[Any, Any]) -> None:
        requests.append(await stream.recv_message())
        for line in lines:
            await stream.send_message(cluster_pb2.HealthCheckProgress(message=line))
        failed = cluster_pb2.HealthCheckProgress()
        failed.metadata.hostname = GOOD
        failed.metadata.error = "timed out"
        await stream.send_message(failed)

    node.handlers["HealthCheck"] = health
    got: list[StageResult] = []

    async def check(talos: Talos) -> None:
        async for stage in talos.health(control_plane_nodes=[GOOD], timeout=timedelta(minutes=2)):
            got.append(stage)

    with pytest.raises(HealthCheckError, match="healthcheck error: timed out") as raised:
        use(node, check, GOOD)
    assert raised.value.node == GOOD
    assert [str(s) for s in got] == lines
    assert [(s.stage, s.status, s.reason, s.elapsed) for s in got] == [
        ("", "info", lines[0], ""),
        ("etcd to be healthy", "waiting", "service etcd is Preparing", "2s"),
        ("etcd to be healthy", "ok", "", ""),
        ("kube-proxy to report ready", "skip", "", ""),
    ]
    assert list(requests[0].cluster_info.control_plane_nodes) == [GOOD]
    assert requests[0].wait_timeout.ToTimedelta() == timedelta(minutes=2)


def test_client_side_stages_yield_results_and_raise_at_the_timeout() -> None:
    now = [0.0]
    tries = {"n": 0}

    async def flaky() -> None:
        tries["n"] += 1
        if tries["n"] < 3:
            raise CheckFailed("not yet")

    async def skipped() -> None:
        raise CheckSkipped

    async def never() -> None:
        raise CheckFailed("never", detail="the cause")

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    async def run() -> list[StageResult]:
        out: list[StageResult] = []
        checks = [Check("a", flaky), Check("b", skipped), Check("c", never)]
        with pytest.raises(
            HealthCheckError, match=r"timed out waiting for c: never \(last error: the cause\)"
        ):
            async for result in stages(
                checks, timeout=timedelta(seconds=5), clock=lambda: now[0], sleep=sleep
            ):
                out.append(result)
        return out

    results = asyncio.run(run())
    assert [(r.stage, r.status, r.reason) for r in results] == [
        ("a", "waiting", "not yet"), ("a", "ok", ""), ("b", "skip", ""), ("c", "waiting", "never"),
    ]  # fmt: skip
    assert [str(r) for r in results][:2] == ["waiting for a: not yet (0s)", "waiting for a: OK"]
    made = [StageResult("a", "waiting", reason="not yet", elapsed="1m2s"), StageResult("b", "skip")]
    assert [str(r) for r in made] == ["waiting for a: not yet (1m2s)", "waiting for b: SKIP"]
    assert [StageResult.from_line(str(r)) for r in made] == [
        StageResult("a", "waiting", reason="not yet", elapsed="1m2s", line=str(made[0])),
        StageResult("b", "skip", line=str(made[1])),
    ]


def test_contexts_and_targets(node: FakeNode) -> None:
    (context,) = Talos.contexts(node.talosconfig)
    assert (context.name, context.current, context.roles) == ("fake", True, ("os:admin",))
    assert context.endpoints == (f"{node.address}:{node.port}",)
    talos = Talos.from_config(node.talosconfig, nodes=[GOOD])
    assert (talos.context, talos.nodes, talos.endpoints) == ("fake", [GOOD], [f"{node.address}:{node.port}"])
    assert talos.with_nodes(GOOD, OTHER).nodes == [GOOD, OTHER]
    talos.client.close()


def test_a_call_error_is_an_rpc_error_with_its_code(node: FakeNode) -> None:
    async def refuse(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        raise GRPCError(Status.PERMISSION_DENIED, "not allowed")

    node.handlers["Version"] = refuse
    from ichor.client import PermissionDeniedError

    with pytest.raises(PermissionDeniedError) as denied:
        use(node, lambda t: t.version(), GOOD)
    assert denied.value.code_name == "PermissionDenied" and "os:reader" in (denied.value.hint or "")
    assert denied.value.node == GOOD  # the one node the call went to
    with pytest.raises(PermissionDeniedError) as several:
        use(node, lambda t: t.version(), GOOD, OTHER)
    assert several.value.node is None  # refused by the endpoint for all of them


def test_the_readme_examples_parse_and_import_only_the_public_sdk() -> None:
    """The README's SDK examples (run for real in test_e2e_sdk.py) are Python, use names
    ``ichor.client`` exports, and address the nodes the e2e test substitutes."""
    import ast

    from test_e2e_sdk import readme_examples

    import ichor.client

    examples = readme_examples()
    assert len(examples) >= 4
    for code in examples:
        tree = ast.parse(code)
        for stmt in ast.walk(tree):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "ichor.client":
                assert {alias.name for alias in stmt.names} <= set(ichor.client.__all__)
        assert "10.5.0.2" in code and "asyncio.run(main())" in code


def test_a_one_node_view_names_its_untagged_replies_after_that_node(node: FakeNode) -> None:
    """``with_node(n)`` sends ``node`` metadata: apid answers one-to-one, without a hostname."""
    routed: list[Any] = []

    async def reboot(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        routed.append(dict(stream.metadata or {}))
        reply = machine_pb2.RebootResponse()
        reply.messages.add(actor_id="a-1")
        await stream.send_message(reply)

    node.handlers["Reboot"] = reboot
    (accepted,) = use(node, lambda t: t.with_node(OTHER).reboot(), GOOD, BAD)
    assert (accepted.node, accepted.actor_id) == (OTHER, "a-1")
    assert routed[0].get("node") == OTHER and "nodes" not in routed[0]
