"""apid's in-process path to machined answers exactly as the unix-socket hop does.

Each case runs one handler twice: behind a real grpclib server on a unix socket reached through
apid's channel backend, and called in-process (``InProcessBackend``). What apid gets back (headers,
reply bytes, trailers, or the failure's status, message and details bytes) must be the same.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from google.protobuf import empty_pb2
from grpclib.client import Channel
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from multidict import MultiDict

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.api.limits import MAX_MESSAGE_SIZE, too_large
from ichor.machined.apid import MachineApi, RawCodec, RawStatusDetailsCodec
from ichor.machined.apid._channel import ChannelBackend
from ichor.machined.apid._failure import BackendFailed, RequestRefused
from ichor.machined.apid._inproc import InProcessBackend
from ichor.machined.apid._methods import Method
from ichor.machined.server._codec import grpc_server

TIMEOUT = 10.0
UNARY = Cardinality.UNARY_UNARY
VERSION = machine_pb2.VersionResponse(
    messages=[machine_pb2.Version(version=machine_pb2.VersionInfo(tag="v1.7.6"))]
)


class Handlers:
    """A servable whose methods each end a call one particular way."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.swallowed: list[BaseException] = []

    async def ok(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        await stream.send_message(VERSION)

    async def metadata(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        await stream.send_initial_metadata(metadata={"x-node": "a"})
        await stream.send_message(VERSION)
        await stream.send_trailing_metadata(metadata={"x-trailer": "b"})

    async def not_found(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        raise GRPCError(Status.NOT_FOUND, "nothing here: ünïcode")

    async def details(self, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.FAILED_PRECONDITION, "bad", [common_pb2.Data(bytes=b"why")])

    async def bare_status(self, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.PERMISSION_DENIED)

    async def crash(self, stream: Stream[Any, Any]) -> None:
        raise RuntimeError("boom")

    async def silent(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()

    async def two_replies(self, stream: Stream[Any, Any]) -> None:
        await stream.send_message(VERSION)
        await stream.send_message(VERSION)

    async def headers_then_error(self, stream: Stream[Any, Any]) -> None:
        await stream.send_initial_metadata(metadata={"x-node": "a"})
        raise GRPCError(Status.NOT_FOUND, "gone")

    async def explicit_trailers(self, stream: Stream[Any, Any]) -> None:
        await stream.send_trailing_metadata(
            status=Status.ABORTED, status_message="explicit", metadata={"x-t": "1"}
        )
        raise GRPCError(Status.INTERNAL, "after the trailers: not sent")

    async def stream(self, stream: Stream[Any, Any]) -> None:
        request = await stream.recv_message()
        for i in range(3):
            await stream.send_message(common_pb2.Data(bytes=f"{request.tail_lines} {i}".encode()))

    async def stream_then_error(self, stream: Stream[Any, Any]) -> None:
        await stream.send_message(common_pb2.Data(bytes=b"one"))
        raise GRPCError(Status.ABORTED, "stopped")

    async def collect(self, stream: Stream[Any, Any]) -> None:
        sizes = [len(message.bytes) async for message in stream]
        await stream.send_message(common_pb2.Data(bytes=repr(sizes).encode()))

    async def huge(self, stream: Stream[Any, Any]) -> None:
        await stream.send_message(common_pb2.Data(bytes=b"x" * (MAX_MESSAGE_SIZE + 1)))

    async def forever(self, stream: Stream[Any, Any]) -> None:
        await stream.send_message(common_pb2.Data(bytes=b"first"))
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def swallow(self, stream: Stream[Any, Any]) -> None:
        try:
            await stream.recv_message()
        except Exception as exc:  # a careless handler must not hide apid's own failures
            self.swallowed.append(exc)
        await stream.send_message(common_pb2.Data(bytes=b"as if nothing happened"))

    _SHAPES: ClassVar[dict[str, tuple[Cardinality, Any, Any]]] = {
        "stream": (Cardinality.UNARY_STREAM, machine_pb2.LogsRequest, common_pb2.Data),
        "stream_then_error": (Cardinality.UNARY_STREAM, empty_pb2.Empty, common_pb2.Data),
        "forever": (Cardinality.UNARY_STREAM, empty_pb2.Empty, common_pb2.Data),
        "collect": (Cardinality.STREAM_UNARY, common_pb2.Data, common_pb2.Data),
        "huge": (UNARY, empty_pb2.Empty, common_pb2.Data),
        "swallow": (UNARY, empty_pb2.Empty, common_pb2.Data),
    }
    NAMES = (
        "ok", "metadata", "not_found", "details", "bare_status", "crash", "silent", "two_replies",
        "headers_then_error", "explicit_trailers", "stream", "stream_then_error", "collect", "huge",
        "forever", "swallow",
    )  # fmt: skip

    def __mapping__(self) -> dict[str, Handler]:
        mapping = {}
        for name in self.NAMES:
            cardinality, request, reply = self._SHAPES.get(
                name, (UNARY, empty_pb2.Empty, machine_pb2.VersionResponse)
            )
            mapping[path(name)] = Handler(getattr(self, name), cardinality, request, reply)
        return mapping


def path(name: str) -> str:
    return f"/test.Parity/{name}"


def method(name: str) -> Method:
    cardinality = Handlers._SHAPES.get(name, (UNARY,))[0]
    return Method(path(name), cardinality)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer.
    where = Path(tempfile.mkdtemp(prefix="inproc-", dir="/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def socket_backend(sock: Path) -> ChannelBackend:
    return ChannelBackend(
        f"unix {sock}",
        lambda: Channel(path=str(sock), codec=RawCodec(), status_details_codec=RawStatusDetailsCodec()),
        3.0,
    )


async def _messages(requests: list[bytes]) -> AsyncIterator[bytes]:
    for request in requests:
        yield request


Outcome = tuple[Any, ...]


async def outcome(backend: Any, name: str, requests: list[bytes], on_reply: Any = None) -> Outcome:
    """What apid sees of a call: headers, replies, then trailers or the failure."""
    headers: list[list[tuple[str, Any]]] = []
    replies: list[bytes] = []

    async def got_headers(got: MultiDict[Any]) -> None:
        headers.append(list(got.items()))

    async def got_reply(reply: bytes) -> None:
        replies.append(reply)
        if on_reply is not None:
            await on_reply(reply)

    metadata = MultiDict[str | bytes]([("talos-role", "os:admin")])
    try:
        async with asyncio.timeout(TIMEOUT):
            trailers = await backend.call(
                method(name), _messages(requests), metadata, None, got_headers, got_reply
            )
    except BackendFailed as failed:
        f = failed.failure
        return ("failed", f.status, f.message, f.details, list((f.trailers or {}).items()), headers, replies)
    return ("ok", list(trailers.items()), headers, replies)


async def both(short_tmp: Path, name: str, requests: list[bytes], **kwargs: Any) -> tuple[Outcome, Outcome]:
    sock = short_tmp / "machine.sock"
    server = grpc_server([Handlers()])
    await server.start(path=str(sock))
    over_socket = socket_backend(sock)
    try:
        via_socket = await outcome(over_socket, name, requests, **kwargs)
    finally:
        over_socket.close()
        server.close()
        await server.wait_closed()
    api = MachineApi()
    api.publish([Handlers()])
    in_process = await outcome(InProcessBackend(api, f"unix {sock}"), name, requests, **kwargs)
    return via_socket, in_process


EMPTY = b""
CASES = {
    "ok": [EMPTY],
    "metadata": [EMPTY],
    "not_found": [EMPTY],
    "details": [EMPTY],
    "bare_status": [EMPTY],
    "crash": [EMPTY],
    "silent": [EMPTY],
    "two_replies": [EMPTY],
    "headers_then_error": [EMPTY],
    "explicit_trailers": [EMPTY],
    "stream": [machine_pb2.LogsRequest(tail_lines=7).SerializeToString()],
    "stream_then_error": [EMPTY],
    "collect": [common_pb2.Data(bytes=b"x" * n).SerializeToString() for n in (1, 10, 100)],
    "collect-empty": [],
    "undecodable": [b"\xff\xff\xff"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_in_process_answers_as_the_socket_does(short_tmp: Path, case: str) -> None:
    name = {"collect-empty": "collect", "undecodable": "stream"}.get(case, case)
    via_socket, in_process = asyncio.run(both(short_tmp, name, CASES[case]))
    assert in_process == via_socket
    # The cases are not all alike: each shows what it is about.
    if case == "details":
        # machined's server has no status-details codec: details cross neither path.
        assert in_process[1:4] == (Status.FAILED_PRECONDITION, "bad", None)
    if case in ("crash", "silent", "two_replies"):
        assert in_process[1:3] == (Status.UNKNOWN, "Internal Server Error")
    if case == "undecodable":
        assert in_process[1] is Status.INVALID_ARGUMENT and "machine.LogsRequest" in in_process[2]
    if case == "metadata":
        assert in_process[1:3] == ([("x-trailer", "b")], [[("x-node", "a")]])


def test_a_reply_over_the_limit_is_refused_as_apids_codec_refuses_it(short_tmp: Path) -> None:
    via_socket, in_process = asyncio.run(both(short_tmp, "huge", [EMPTY]))
    refused = too_large(MAX_MESSAGE_SIZE + 6, MAX_MESSAGE_SIZE)
    assert in_process == via_socket
    assert in_process[1:3] == (refused.status, refused.message)


def test_a_method_machined_does_not_serve_is_unimplemented_in_grpc_gos_words() -> None:
    async def unserved(path: str) -> Outcome:
        api = MachineApi()
        api.publish([Handlers()])
        metadata = MultiDict[str | bytes]()

        async def ignore(_: Any) -> None:
            pass

        try:
            await InProcessBackend(api, "unix x").call(
                Method(path, UNARY), _messages([EMPTY]), metadata, None, ignore, ignore
            )
        except BackendFailed as failed:
            return (failed.failure.status, failed.failure.message)
        raise AssertionError("served")

    assert asyncio.run(unserved("/time.TimeService/Time")) == (
        Status.UNIMPLEMENTED,
        "unknown service time.TimeService",
    )
    assert asyncio.run(unserved("/test.Parity/Nope")) == (
        Status.UNIMPLEMENTED,
        "unknown method Nope for service test.Parity",
    )


def test_not_serving_fails_as_dialling_the_missing_socket(short_tmp: Path) -> None:
    async def scenario() -> tuple[Outcome, Outcome]:
        sock = short_tmp / "machine.sock"  # nothing serves it
        backend = socket_backend(sock)
        try:
            via_socket = await outcome(backend, "ok", [EMPTY])
        finally:
            backend.close()
        api = MachineApi()
        api.publish([Handlers()])
        api.withdraw()
        return via_socket, await outcome(InProcessBackend(api, f"unix {sock}"), "ok", [EMPTY])

    via_socket, in_process = asyncio.run(scenario())
    assert in_process == via_socket
    assert in_process[1] is Status.UNAVAILABLE
    assert in_process[2].endswith(': connect: no such file or directory"')


def test_the_service_stopping_mid_call_ends_it_as_a_lost_connection() -> None:
    async def scenario() -> tuple[Outcome, Handlers, int]:
        api = MachineApi()
        handlers = Handlers()
        api.publish([handlers])

        async def withdraw(_: bytes) -> None:
            api.withdraw()

        in_process = await outcome(InProcessBackend(api, "unix x"), "forever", [EMPTY], on_reply=withdraw)
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # still running: the call's own task is not left cancelled
        return in_process, handlers, task.cancelling()

    in_process, handlers, cancelling = asyncio.run(scenario())
    assert in_process[1:3] == (Status.UNAVAILABLE, "error reading from server: Connection lost")
    assert in_process[-1] == [common_pb2.Data(bytes=b"first").SerializeToString()]
    assert handlers.cancelled.is_set()
    assert cancelling == 0


def test_cancelling_the_call_cancels_the_handler() -> None:
    async def scenario() -> Handlers:
        api = MachineApi()
        handlers = Handlers()
        api.publish([handlers])
        first = asyncio.Event()

        async def got(_: bytes) -> None:
            first.set()

        call = asyncio.create_task(outcome(InProcessBackend(api, "unix x"), "forever", [EMPTY], on_reply=got))
        await first.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert handlers.cancelled.is_set()
        return handlers

    asyncio.run(scenario())


def test_apids_own_failures_reach_apid_whatever_the_handler_does() -> None:
    """A refused request and a reply apid cannot relay end the call even if the handler swallows them."""

    async def scenario() -> None:
        api = MachineApi()
        handlers = Handlers()
        api.publish([handlers])
        backend = InProcessBackend(api, "unix x")
        refusal = RequestRefused(GRPCError(Status.RESOURCE_EXHAUSTED, "too large"))

        async def refused() -> AsyncIterator[bytes]:
            raise refusal
            yield EMPTY

        async def ignore(_: Any) -> None:
            pass

        md = MultiDict[str | bytes]()
        with pytest.raises(RequestRefused):
            await backend.call(method("swallow"), refused(), md, None, ignore, ignore)
        assert handlers.swallowed == [refusal]

        class Unrelayable(Exception):
            pass

        async def fail(_: bytes) -> None:
            raise Unrelayable

        with pytest.raises(Unrelayable):
            await backend.call(method("ok"), _messages([EMPTY]), md, None, ignore, fail)

    asyncio.run(scenario())


def test_the_handler_sees_apids_metadata_and_the_callers_deadline() -> None:
    seen: dict[str, Any] = {}

    class Peek:
        async def look(self, stream: Stream[Any, Any]) -> None:
            await stream.recv_message()
            seen.update(metadata=list(stream.metadata.items()), deadline=stream.deadline)
            await stream.send_message(VERSION)

        def __mapping__(self) -> dict[str, Handler]:
            return {path("look"): Handler(self.look, UNARY, empty_pb2.Empty, machine_pb2.VersionResponse)}

    async def scenario(deadline: Any) -> None:
        api = MachineApi()
        api.publish([Peek()])

        async def ignore(_: Any) -> None:
            pass

        md = MultiDict[str | bytes]([("proxyfrom", "127.0.0.2:50000"), ("talos-role", "os:reader")])
        await InProcessBackend(api, "unix x").call(
            method("look"), _messages([EMPTY]), md, deadline, ignore, ignore
        )

    marker = object()  # the deadline is handed through as it is
    asyncio.run(scenario(marker))
    assert seen == {
        "metadata": [("proxyfrom", "127.0.0.2:50000"), ("talos-role", "os:reader")],
        "deadline": marker,
    }
