"""A node that answers with an error fails the command (non-zero exit) while the output of the nodes
that answered is still printed: unary one-to-many calls, streams, COSI reads, and PermissionDenied."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode, targets

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.api.gen.v1alpha1 import meta_pb2, resource_pb2, state_pb2

ADDRESS = "127.77.9.1"
GOOD, BAD = "10.5.0.2", "bad"
pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, ADDRESS)
    with fake.serving():
        yield fake


def fail(element: Any, node: str, code: Status, text: str) -> None:
    element.metadata.hostname = node
    element.metadata.error = f"rpc error: code = {code.name.title()} desc = {text}"
    element.metadata.status.code = code.value
    element.metadata.status.message = text


def _unary(reply_type: Any, fill: Any) -> Any:
    """A one-to-many handler: ``fill(element, node)`` for good nodes, Unavailable for ``bad``."""

    def handler(stream: Stream[Any, Any]) -> Any:
        async def handle() -> None:
            await stream.recv_message()
            reply = reply_type()
            for n in targets(stream):
                element = reply.messages.add()
                if n == BAD:
                    fail(element, n, Status.UNAVAILABLE, "connection refused")
                    continue
                element.metadata.hostname = n
                fill(element, n)
            await stream.send_message(reply)

        return handle()

    return handler


def _stream(message_type: Any, fill: Any, code: Status = Status.UNAVAILABLE) -> Any:
    """A streaming handler: one message per good node, an in-band error (``code``) for ``bad``."""

    def handler(stream: Stream[Any, Any]) -> Any:
        async def handle() -> None:
            await stream.recv_message()
            for n in targets(stream) or [GOOD]:
                message = message_type()
                if n == BAD:
                    fail(message, n, code, "the node said no")
                else:
                    message.metadata.hostname = n
                    fill(message)
                await stream.send_message(message)

        return handle()

    return handler


def _service(element: Any, n: str) -> None:
    element.services.add(id="etcd", state="Running")


def test_services_one_node_unreachable_prints_the_other_and_fails(node: FakeNode, talosctl: Any) -> None:
    node.handlers["ServiceList"] = _unary(machine_pb2.ServiceListResponse, _service)
    r = talosctl(*node.args(GOOD, BAD), "services")
    assert r.exit_code == 1
    assert f"{GOOD}   etcd" in r.stdout
    assert f"error: {BAD}: rpc error: code = Unavailable desc = connection refused" in r.stderr
    # Every node good: exit 0.
    assert talosctl(*node.args(GOOD, GOOD), "services").exit_code == 0


def test_service_status_and_version_partial_failure_fail(node: FakeNode, talosctl: Any) -> None:
    node.handlers["ServiceList"] = _unary(machine_pb2.ServiceListResponse, _service)
    r = talosctl(*node.args(GOOD, BAD), "service", "etcd")
    assert r.exit_code == 1 and f"NODE     {GOOD}" in r.stdout

    def version(element: Any, n: str) -> None:
        element.version.tag = "v1.7.6"

    node.handlers["Version"] = _unary(machine_pb2.VersionResponse, version)
    r = talosctl(*node.args(GOOD, BAD), "version", "--short")
    assert r.exit_code == 1 and f"{GOOD}: v1.7.6" in r.stdout and f"{BAD}: " in r.stderr


def _data(message: Any) -> None:
    message.bytes = b"a log line\n"


@pytest.mark.parametrize(
    ("rpc", "args"),
    [("Logs", ["logs", "etcd"]), ("Dmesg", ["dmesg"]), ("Logs", ["logs", "controller-runtime"])],
)
def test_streams_with_a_failed_node_fail(node: FakeNode, talosctl: Any, rpc: str, args: list[str]) -> None:
    node.handlers[rpc] = _stream(common_pb2.Data, _data)
    r = talosctl(*node.args(GOOD, BAD), *args)
    assert r.exit_code == 1
    assert r.stdout == f"{GOOD}: a log line\n"
    assert f"{'ERROR' if rpc == 'Logs' else 'error'}: {BAD}: rpc error: code = Unavailable" in r.stderr
    # Only the unreachable node: nothing printed, still a failure.
    r = talosctl(*node.args(BAD), *args)
    assert r.exit_code == 1 and r.stdout == ""
    assert talosctl(*node.args(GOOD), *args).exit_code == 0


@pytest.mark.parametrize("args", [["ls", "/var"], ["logs", "etcd"], ["dmesg"]])
def test_permission_denied_in_band_fails_with_the_role_hint(
    node: FakeNode, talosctl: Any, args: list[str]
) -> None:
    def file_info(message: Any) -> None:
        message.name = "/var/log"
        message.relative_name = "log"

    node.handlers["List"] = _stream(machine_pb2.FileInfo, file_info, Status.PERMISSION_DENIED)
    node.handlers["Logs"] = node.handlers["Dmesg"] = _stream(common_pb2.Data, _data, Status.PERMISSION_DENIED)
    r = talosctl(*node.args(BAD), *args)
    assert r.exit_code == 1
    assert "code = PermissionDenied" in r.stderr
    assert "hint: the client certificate's roles do not allow this call" in r.stderr


def test_ls_entry_error_fails(node: FakeNode, talosctl: Any) -> None:
    async def listing(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        await stream.send_message(machine_pb2.FileInfo(name="/var/ok", relative_name="ok"))
        await stream.send_message(machine_pb2.FileInfo(name="/var/secret", error="permission denied"))

    node.handlers["List"] = listing
    r = talosctl(*node.args(GOOD), "ls", "/var")
    assert r.exit_code == 1
    assert "ok" in r.stdout and "permission denied" in r.stderr


def members_node(node: FakeNode, resources: list[resource_pb2.Resource], unreachable: str = BAD) -> None:
    """COSI double: ResourceDefinitions knows Members; the node ``unreachable`` answers Unavailable."""
    definition = meta_pb2.ResourceDefinitionSpec(
        resource_type="Members.cluster.talos.dev",
        display_type="Member",
        default_namespace="cluster",
        aliases=["members"],
        all_aliases=["member", "members"],
        print_columns=[meta_pb2.ResourceDefinitionSpec.PrintColumn(name="Hostname", json_path="{.hostname}")],
    )

    async def listing(stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        assert request is not None and stream.metadata is not None
        if stream.metadata.get("node") == unreachable:
            raise GRPCError(Status.UNAVAILABLE, "connection refused")
        if request.type == "ResourceDefinitions.meta.cosi.dev":
            rd = resource_pb2.Resource(spec=resource_pb2.Spec(proto_spec=definition.SerializeToString()))
            await stream.send_message(state_pb2.ListResponse(resource=rd))
            return
        for resource in resources:
            await stream.send_message(state_pb2.ListResponse(resource=resource))

    node.handlers["State.List"] = listing


def member(member_id: str, hostname: str) -> resource_pb2.Resource:
    resource = resource_pb2.Resource(
        metadata=resource_pb2.Metadata(
            namespace="cluster",
            type="Members.cluster.talos.dev",
            id=member_id,
            version="2",
            owner="cluster.MemberController",
            phase="running",
        ),
        spec=resource_pb2.Spec(yaml_spec=f"nodeId: {member_id}\nhostname: {hostname}\n"),
    )
    resource.metadata.created.FromJsonString("2024-05-01T10:00:00Z")
    resource.metadata.updated.FromJsonString("2024-05-01T10:05:00Z")
    return resource


def test_get_one_node_unreachable_prints_the_other_and_fails(node: FakeNode, talosctl: Any) -> None:
    members_node(node, [member("cp-1", "cp-1")])
    r = talosctl(*node.args(GOOD, BAD), "get", "members")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[1].split()[:4] == [GOOD, "cluster", "Member", "cp-1"]
    assert f"error: {BAD}: rpc error: code = Unavailable desc = connection refused" in r.stderr
    # A missing id is an error for the node that lacks it.
    r = talosctl(*node.args(GOOD), "get", "members", "nope")
    assert r.exit_code == 1 and "Members.cluster.talos.dev(cluster/nope) doesn't exist" in r.stderr
