"""Message-size limits on machined's network servers (maintenance mode, trustd): refused from the
length prefix, before the body is read, with grpc-go's status and wording."""

from __future__ import annotations

import asyncio
import struct
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream

from ichor.api.gen.common import common_pb2
from ichor.api.limits import limit_requests

LIMIT = 1024
ECHO = "/test.Limits/Echo"
COUNT = "/test.Limits/Count"


class _Service:
    def __init__(self) -> None:
        self.received: list[int] = []

    async def echo(self, stream: Stream[common_pb2.Data, common_pb2.Data]) -> None:
        request = await stream.recv_message()
        assert isinstance(request, common_pb2.Data)
        self.received.append(len(request.bytes))
        await stream.send_message(request)

    async def count(self, stream: Stream[common_pb2.Data, common_pb2.Data]) -> None:
        total = 0
        async for chunk in stream:
            self.received.append(len(chunk.bytes))
            total += len(chunk.bytes)
        await stream.send_message(common_pb2.Data(bytes=str(total).encode()))

    def __mapping__(self) -> dict[str, Handler]:
        return {
            ECHO: Handler(self.echo, Cardinality.UNARY_UNARY, common_pb2.Data, common_pb2.Data),
            COUNT: Handler(self.count, Cardinality.STREAM_UNARY, common_pb2.Data, common_pb2.Data),
        }


@asynccontextmanager
async def serving(service: _Service, limit: int = LIMIT) -> AsyncIterator[Channel]:
    with tempfile.TemporaryDirectory(prefix="limits-", dir="/tmp") as tmp:
        path = str(Path(tmp) / "sock")
        server = Server(limit_requests([service], limit))
        await server.start(path=path)
        channel = Channel(path=path)
        try:
            yield channel
        finally:
            channel.close()
            server.close()
            await server.wait_closed()


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(20):
            return await coro

    return asyncio.run(bounded())


def test_messages_within_the_limit_pass_unary_and_streamed() -> None:
    async def scenario() -> None:
        service = _Service()
        async with serving(service) as channel:
            echo = channel.request(ECHO, Cardinality.UNARY_UNARY, common_pb2.Data, common_pb2.Data)
            async with echo as call:
                await call.send_message(common_pb2.Data(bytes=b"x" * 1000), end=True)
                reply = await call.recv_message()
            assert reply is not None and reply.bytes == b"x" * 1000
            count = channel.request(COUNT, Cardinality.STREAM_UNARY, common_pb2.Data, common_pb2.Data)
            async with count as call:
                for size in (10, 1000, 0):
                    await call.send_message(common_pb2.Data(bytes=b"y" * size))
                await call.end()
                reply = await call.recv_message()
            assert reply is not None and reply.bytes == b"1010"
            assert service.received == [1000, 10, 1000, 0]

    run(scenario())


@pytest.mark.parametrize("path", [ECHO, COUNT])
def test_a_message_over_the_limit_is_refused_from_its_prefix(path: str) -> None:
    """The body never comes: only the 5-byte prefix can have refused it."""

    async def scenario() -> None:
        service = _Service()
        async with serving(service) as channel:
            cardinality = Cardinality.UNARY_UNARY if path == ECHO else Cardinality.STREAM_UNARY
            with pytest.raises(GRPCError) as refused:
                async with channel.request(path, cardinality, common_pb2.Data, common_pb2.Data) as call:
                    await call.send_request()
                    await call._stream.send_data(struct.pack(">?I", False, LIMIT + 1))
                    await call.recv_message()
            assert (refused.value.status, refused.value.message) == (
                Status.RESOURCE_EXHAUSTED,
                f"grpc: received message larger than max ({LIMIT + 1} vs. {LIMIT})",
            )
            assert service.received == []

    run(scenario())


@pytest.mark.parametrize(
    ("sent", "message"),
    [
        (b"\0\0\0", "grpc: the request ended 3 bytes into a 5-byte length prefix: unexpected EOF"),
        (
            struct.pack(">?I", False, 100) + b"x" * 40,
            "grpc: the request ended 40 bytes into a 100-byte message: unexpected EOF",
        ),
        (
            struct.pack(">?I", False, 100),
            "grpc: the request ended 0 bytes into a 100-byte message: unexpected EOF",
        ),
    ],
    ids=["inside-the-prefix", "inside-the-body", "right-after-the-prefix"],
)
def test_a_request_that_ends_inside_a_message_is_refused_not_passed_on(sent: bytes, message: str) -> None:
    async def scenario() -> None:
        service = _Service()
        async with serving(service) as channel:
            with pytest.raises(GRPCError) as refused:
                async with channel.request(
                    ECHO, Cardinality.UNARY_UNARY, common_pb2.Data, common_pb2.Data
                ) as call:
                    await call.send_request()
                    await call._stream.send_data(sent, end_stream=True)
                    await call.recv_message()
            assert (refused.value.status, refused.value.message) == (Status.INTERNAL, message)
            assert service.received == []

    run(scenario())


def test_a_body_that_is_not_the_methods_message_is_invalid_argument() -> None:
    async def scenario() -> None:
        service = _Service()
        async with serving(service) as channel:
            with pytest.raises(GRPCError) as refused:
                async with channel.request(
                    ECHO, Cardinality.UNARY_UNARY, common_pb2.Data, common_pb2.Data
                ) as call:
                    await call.send_request()
                    await call._stream.send_data(struct.pack(">?I", False, 2) + b"\xff\xff", end_stream=True)
                    await call.recv_message()
            assert refused.value.status is Status.INVALID_ARGUMENT
            assert (refused.value.message or "").startswith(
                "grpc: error unmarshalling request: common.Data: Error parsing"
            )
            assert service.received == []

    run(scenario())
