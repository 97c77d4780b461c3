"""apid without sockets: the method table, routing decisions and wire-level reply edits."""

from __future__ import annotations

import pytest
from google.rpc import status_pb2
from grpclib.const import Cardinality, Status
from grpclib.exceptions import GRPCError
from hypothesis import given
from hypothesis import strategies as st
from multidict import MultiDict

from ichor.api.gen.cluster import cluster_pb2
from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machined.apid import (
    MAX_MESSAGE_SIZE,
    METHODS,
    RawCodec,
    RouteKind,
    WireError,
    append_info,
    error_reply,
    go_error_string,
    is_streamed,
    local_target_checker,
    route,
)

SELF = "10.5.0.2"
is_self = local_target_checker([SELF])


def _route(method: str, *pairs: tuple[str, str], forwarding: bool = True):
    return route(method, MultiDict(pairs), forwarding=forwarding, is_local_target=is_self)


# --------------------------------------------------------------------------- method table


def test_method_table_covers_the_talos_services() -> None:
    services = {path.split("/")[1] for path in METHODS}
    assert services == {
        "machine.MachineService",
        "cluster.ClusterService",
        "storage.StorageService",
        "time.TimeService",
        "inspect.InspectService",
        "cosi.resource.State",
    }
    assert METHODS["/machine.MachineService/Version"].cardinality is Cardinality.UNARY_UNARY
    assert METHODS["/machine.MachineService/Logs"].cardinality is Cardinality.UNARY_STREAM
    assert METHODS["/machine.MachineService/EtcdRecover"].cardinality is Cardinality.STREAM_UNARY
    assert METHODS["/cosi.resource.State/Watch"].cardinality is Cardinality.UNARY_STREAM


def test_streamed_methods_are_talos_list() -> None:
    # Spec §2.1: the one-to-many "streaming" set; EtcdRecover (client-streaming) is merged as unary.
    streamed = sorted(p for p in METHODS if is_streamed(p) and not p.startswith("/cosi."))
    names = ["Copy", "DiskUsage", "Dmesg", "EtcdSnapshot", "Events", "ImageList", "Kubeconfig", "List", "Logs",
             "PacketCapture", "Read"]  # fmt: skip
    assert streamed == sorted(
        ["/cluster.ClusterService/HealthCheck"] + [f"/machine.MachineService/{n}" for n in names]
    )
    assert not is_streamed("/machine.MachineService/EtcdRecover")
    assert is_streamed("/machine.MachineService/FutureStream")


# --------------------------------------------------------------------------- routing


def test_routing_rules() -> None:
    v = "/machine.MachineService/Version"
    assert _route(v).kind is RouteKind.LOCAL
    assert _route(v, ("nodes", "a"), ("nodes", "b")).targets == ("a", "b")
    assert _route(v, ("nodes", "a")).kind is RouteKind.ONE_TO_MANY
    one = _route(v, ("node", "a"))
    assert (one.kind, one.targets) == (RouteKind.ONE_TO_ONE, ("a",))
    # proxyfrom wins over everything: the call was routed by the previous hop.
    assert _route(v, ("proxyfrom", "x"), ("nodes", "a"), ("node", "b")).kind is RouteKind.LOCAL
    # nodes wins over node.
    assert _route(v, ("nodes", "a"), ("node", "b")).kind is RouteKind.ONE_TO_MANY
    # The node's own address still goes through the fan-out (Talos dials itself).
    assert _route(v, ("nodes", SELF)).kind is RouteKind.ONE_TO_MANY


def _refused(status: Status, message: str, *args: object, **kwargs: object) -> None:
    with pytest.raises(GRPCError) as refused:
        _route(*args, **kwargs)  # type: ignore[arg-type]
    assert (refused.value.status, refused.value.message) == (status, message)


def test_routing_refusals() -> None:
    v = "/machine.MachineService/Version"
    _refused(Status.INVALID_ARGUMENT, "node metadata must be single-valued", v, ("node", "a"), ("node", "b"))
    _refused(
        Status.INVALID_ARGUMENT,
        "one-2-many proxying is not supported for COSI methods",
        "/cosi.resource.State/Get",
        ("nodes", "a"),
    )
    _refused(Status.INTERNAL, 'invalid target "a:50000"', v, ("nodes", "a:50000"))
    _refused(Status.INTERNAL, 'invalid target "[::1]:50000"', v, ("node", "[::1]:50000"))
    # A bare IPv6 address has no port.
    assert _route(v, ("node", "fd00::2")).targets == ("fd00::2",)


def test_worker_routing_without_forwarding() -> None:
    v = "/machine.MachineService/Version"
    assert _route(v, ("nodes", SELF), forwarding=False).kind is RouteKind.LOCAL
    assert _route(v, ("node", SELF), forwarding=False).kind is RouteKind.LOCAL
    assert _route("/cosi.resource.State/Get", ("nodes", SELF), forwarding=False).kind is RouteKind.LOCAL
    for pairs in ([("nodes", "10.5.0.3")], [("nodes", SELF), ("nodes", SELF)], [("node", "10.5.0.3")]):
        _refused(Status.PERMISSION_DENIED, "no request forwarding", v, *pairs, forwarding=False)


# --------------------------------------------------------------------------- wire edits


def _version_reply(tag: str, error: str = "") -> bytes:
    element = machine_pb2.Version(version=machine_pb2.VersionInfo(tag=tag))
    if error:
        element.metadata.error = error
    return machine_pb2.VersionResponse(messages=[element]).SerializeToString()


def test_unary_append_info_merges_into_element_metadata() -> None:
    tagged = append_info(_version_reply("v1.7.6", error="partial"), "10.5.0.2", streaming=False)
    decoded = machine_pb2.VersionResponse.FromString(tagged)
    assert len(decoded.messages) == 1
    assert decoded.messages[0].metadata.hostname == "10.5.0.2"
    assert decoded.messages[0].metadata.error == "partial"
    assert decoded.messages[0].version.tag == "v1.7.6"


@given(st.lists(st.tuples(st.text(max_size=300), st.text(max_size=40)), min_size=1, max_size=5))
def test_concatenated_replies_keep_one_element_per_node(nodes: list[tuple[str, str]]) -> None:
    body = b"".join(append_info(_version_reply(tag), host, streaming=False) for tag, host in nodes)
    decoded = machine_pb2.VersionResponse.FromString(body)
    assert [(m.version.tag, m.metadata.hostname) for m in decoded.messages] == nodes


def test_streaming_append_info() -> None:
    frame = common_pb2.Data(bytes=b"log line\n").SerializeToString()
    decoded = common_pb2.Data.FromString(append_info(frame, "n1", streaming=True))
    assert (decoded.bytes, decoded.metadata.hostname) == (b"log line\n", "n1")
    progress = cluster_pb2.HealthCheckProgress(message="ok").SerializeToString()
    got = cluster_pb2.HealthCheckProgress.FromString(append_info(progress, "n2", streaming=True))
    assert (got.message, got.metadata.hostname) == ("ok", "n2")


@pytest.mark.parametrize("bad", [b"", b"\x12\x00", b"\x08\x01"])
def test_append_info_refuses_replies_without_messages_field(bad: bytes) -> None:
    with pytest.raises(WireError):
        append_info(bad, "n1", streaming=False)


def test_error_reply_decodes_as_any_reply_type() -> None:
    detail = status_pb2.Status(code=5, message="inner")
    details = status_pb2.Status(code=5, message="gone")
    details.details.add().Pack(detail)
    body = error_reply("n1", Status.NOT_FOUND, "gone", details.SerializeToString(), streaming=False)
    decoded = machine_pb2.VersionResponse.FromString(body)
    (element,) = decoded.messages
    assert element.metadata.hostname == "n1"
    assert element.metadata.error == "rpc error: code = NotFound desc = gone"
    assert (element.metadata.status.code, element.metadata.status.message) == (5, "gone")
    assert len(element.metadata.status.details) == 1
    assert not element.HasField("version")

    frame = common_pb2.Data.FromString(error_reply("n2", Status.UNAVAILABLE, "down", streaming=True))
    assert frame.metadata.error == "rpc error: code = Unavailable desc = down"
    assert frame.metadata.status.code == 14


def test_go_error_strings() -> None:
    assert go_error_string(7, "not authorized") == "rpc error: code = PermissionDenied desc = not authorized"
    assert go_error_string(1, "x") == "rpc error: code = Canceled desc = x"
    assert go_error_string(99, "x") == "rpc error: code = Code(99) desc = x"


def test_raw_codec_passes_bytes_and_enforces_32_mib() -> None:
    codec = RawCodec()
    assert codec.encode(b"\x0a\x00", bytes) == b"\x0a\x00"
    assert codec.decode(b"\x0a\x00", bytes) == b"\x0a\x00"
    assert MAX_MESSAGE_SIZE == 32 * 1024 * 1024
    with pytest.raises(GRPCError) as too_big:
        RawCodec(max_message_size=4).decode(b"12345", bytes)
    assert too_big.value.status is Status.RESOURCE_EXHAUSTED
    with pytest.raises(TypeError):
        codec.encode(machine_pb2.Version(), bytes)
