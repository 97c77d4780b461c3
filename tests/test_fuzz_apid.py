"""Fuzzing apid with hostile input, on a fixed budget (derandomized hypothesis, a few seconds).

* routing metadata: any ``node``/``nodes``/``proxyfrom`` values, text or bytes, to any method, give
  a route whose every target apid would dial, or a refusal with a status and a message;
* reply edits: any bytes a backend may send are tagged with the node's hostname or refused with
  ``WireError`` (which apid turns into that node's in-band error), never another exception;
* gRPC length-prefixed frames: any sequence of frames (valid, compressed, over the limit, cut off
  inside a prefix or a body) sent to a live apid, by any role, routed anywhere, ends with the
  status that the first bad frame calls for; apid logs no traceback, holds no more than flow
  control lets in, and still answers the next caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import struct
import tempfile
import tracemalloc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fuzz_budget import budget
from fuzz_helpers import Live, collecting_tracebacks
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.metadata import decode_grpc_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import MultiDict
from test_apid_proxy import PKI, A, B, Cluster, client_ssl, cluster

from ichor.api.gen.common import common_pb2
from ichor.machined.apid import MAX_MESSAGE_SIZE, METHODS, RawCodec, append_info, route
from ichor.machined.apid._router import check_target
from ichor.machined.apid._wire import WireError
from ichor.machinery import pki

MiB = 1024 * 1024

pytestmark = pytest.mark.fuzz

# -- routing metadata -----------------------------------------------------------------------

_keys = st.sampled_from(["node", "nodes", "proxyfrom", "talos-role", "x-other"])
_values = st.one_of(st.text(max_size=40), st.binary(max_size=40), st.sampled_from([A, B, "", "a:1", "[::1]"]))


@budget(400)
@given(
    method=st.one_of(st.sampled_from(sorted(METHODS)), st.text(max_size=60)),
    metadata=st.lists(st.tuples(_keys, _values), max_size=6),
    forwarding=st.booleans(),
)
def test_routing_metadata_gives_a_route_or_a_clear_refusal(
    method: str, metadata: list[tuple[str, str | bytes]], forwarding: bool
) -> None:
    try:
        where = route(method, MultiDict(metadata), forwarding=forwarding, is_local_target={A}.__contains__)
    except GRPCError as refused:
        assert refused.status in {Status.INVALID_ARGUMENT, Status.INTERNAL, Status.PERMISSION_DENIED}
        assert refused.message
        return
    for target in where.targets:
        assert check_target(target) == target  # apid dials only what it would accept


# -- reply edits ----------------------------------------------------------------------------


@budget(400)
@given(reply=st.binary(max_size=200), target=st.text(max_size=40), streaming=st.booleans())
def test_any_backend_reply_is_tagged_or_refused_as_malformed(
    reply: bytes, target: str, streaming: bool
) -> None:
    try:
        tagged = append_info(reply, target, streaming=streaming)
    except WireError as exc:
        assert str(exc)
        return
    assert len(tagged) > len(reply) or not target


@budget(200)
@given(data=st.binary(max_size=100), target=st.text(max_size=40))
def test_a_one_element_reply_keeps_its_element_and_gains_the_hostname(data: bytes, target: str) -> None:
    element = common_pb2.Data(metadata=common_pb2.Metadata(error="e"), bytes=data)
    reply = common_pb2.DataResponse(messages=[element]).SerializeToString()
    tagged = common_pb2.DataResponse.FromString(append_info(reply, target, streaming=False))
    assert [(m.bytes, m.metadata.error, m.metadata.hostname) for m in tagged.messages] == [
        (data, "e", target)
    ]


# -- frames to a live apid ------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    ca = PKI(
        pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1)),
        pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1)),
    )
    certs = {role: ca.leaf(*([role] if role else [])) for role in ("os:admin", "os:reader", "")}
    root = Path(tempfile.mkdtemp(prefix="fuzz-apid-", dir="/tmp"))
    loop = asyncio.new_event_loop()
    running = cluster(ca, root)
    state = Live(loop, loop.run_until_complete(running.__aenter__()), certs=certs)
    try:
        with collecting_tracebacks(state.tracebacks, "machined/apid", "api/limits.py"):
            yield state
    finally:
        loop.run_until_complete(running.__aexit__(None, None, None))
        loop.close()
        shutil.rmtree(root, ignore_errors=True)


def _frame(flag: int, size: int, body: bytes) -> bytes:
    return struct.pack(">BI", flag, size) + body


# apid never decodes a message: what a whole one holds is machined's concern (its own tests).
_message = st.binary(max_size=48).map(lambda b: common_pb2.Data(bytes=b).SerializeToString())
_frames = st.one_of(
    _message.map(lambda m: _frame(0, len(m), m)),  # a valid message
    st.tuples(st.integers(1, 255), _message).map(lambda t: _frame(t[0], len(t[1]), t[1])),  # compressed
    st.integers(MAX_MESSAGE_SIZE + 1, 2**32 - 1).map(lambda n: _frame(0, n, b"")),  # over the limit
    st.tuples(st.integers(1, 64), st.binary(max_size=16)).map(lambda t: _frame(0, len(t[1]) + t[0], t[1])),
    st.binary(min_size=1, max_size=4),  # a bare, cut-off prefix
)
_routes = st.sampled_from(
    [(), (("node", A),), (("node", B),), (("nodes", A),), (("nodes", A), ("nodes", B)),
     (("node", A), ("node", B)), (("node", "a:1"),), (("nodes", "[::1]:5"),), (("proxyfrom", B),)]
)  # fmt: skip


def _first_fault(stream: bytes) -> tuple[Status, str] | None:
    """What apid must answer for the caller's bytes, read as apid reads them (None: all valid)."""
    pos = 0
    while pos < len(stream):
        if len(stream) - pos < 5:
            return Status.INTERNAL, "unexpected EOF"
        flag, size = struct.unpack_from(">BI", stream, pos)
        if flag:
            return Status.UNIMPLEMENTED, "compressed"
        if size > MAX_MESSAGE_SIZE:
            return Status.RESOURCE_EXHAUSTED, f"({size} vs. {MAX_MESSAGE_SIZE})"
        if len(stream) - pos - 5 < size:
            return Status.INTERNAL, "unexpected EOF"
        pos += 5 + size
    return None


async def _call(
    live: Live, path: str, role: str, md: tuple[tuple[str, str], ...], sent: bytes
) -> tuple[Status, str]:
    """Send ``sent`` as the request body of one call; the call's final status and message."""
    c: Cluster = live.server
    channel = Channel(A, c.port, ssl=client_ssl(c.pki.ca, live.extra["certs"][role]), codec=RawCodec())
    try:
        async with asyncio.timeout(10):
            method = METHODS[path]
            call = await channel.request(
                path, method.cardinality, bytes, bytes, metadata=list(md)
            ).__aenter__()
            await call.send_request()
            # apid may answer and reset the stream before all is sent
            with contextlib.suppress(Exception):
                await call._stream.send_data(sent, end_stream=True)
            h2 = call._stream
            headers = dict(await h2.recv_headers())
            if "grpc-status" not in headers:
                while prefix := await h2.recv_data(5):
                    await h2.recv_data(struct.unpack(">?I", prefix)[1])
                headers = dict(await h2.recv_trailers())
            status = Status(int(headers["grpc-status"]))
            message = decode_grpc_message(headers.get("grpc-message", ""))
            assert status is Status.OK or message, f"{status.name} without a message"
            return status, message
    finally:
        channel.close()


@settings(budget(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/machine.MachineService/Version", "/machine.MachineService/EtcdRecover"]),
    role=st.sampled_from(["os:admin", "os:admin", "os:reader", ""]),
    md=_routes,
    frames=st.lists(_frames, max_size=4),
)
def test_hostile_frames_end_with_a_clear_status(
    live: Live, path: str, role: str, md: tuple[tuple[str, str], ...], frames: list[bytes]
) -> None:
    sent = b"".join(frames)
    tracemalloc.start()
    try:
        status, message = live.run(_call(live, path, role, md, sent))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB, f"{peak / MiB:.0f} MiB held for {len(sent)} bytes sent"
    assert live.tracebacks == [], live.tracebacks[0]
    assert status is not Status.UNKNOWN, message
    fault = _first_fault(sent)
    routed = md in {(), (("node", A),), (("node", B),), (("proxyfrom", B),)}
    allowed = role == "os:admin" or (role == "os:reader" and path.endswith("Version"))
    if fault is not None and routed and allowed:
        assert status is fault[0] and fault[1] in message, (status, message)
    # Whatever came before, apid still answers an ordinary call.
    empty = _frame(0, 0, b"")
    after = live.run(_call(live, "/machine.MachineService/Version", "os:admin", (), empty))
    assert after == (Status.OK, "")
