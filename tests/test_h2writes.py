"""HTTP/2 write coalescing in machined (ichor.machined.h2writes)."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.health.service import Health
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse
from grpclib.protocol import H2Protocol
from grpclib.server import Server

from ichor.machined.h2writes import CoalescingTransport, coalesce_h2_writes


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.events.append("close")
        self.closing = True

    def abort(self) -> None:
        self.events.append("abort")
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.9", 1)}.get(name, default)


async def _turn() -> None:
    await asyncio.sleep(0)


def test_writes_of_one_loop_turn_reach_the_socket_as_one_write_in_order() -> None:
    async def scenario() -> None:
        inner = _Transport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())
        transport.write(b"headers|")
        transport.write(b"")
        transport.write(bytearray(b"data|"))
        transport.writelines([b"trailers"])
        assert inner.writes == []
        await _turn()
        assert inner.writes == [b"headers|data|trailers"]
        transport.write(b"next")
        await _turn()
        assert inner.writes == [b"headers|data|trailers", b"next"]
        assert transport.get_extra_info("peername") == ("127.0.0.9", 1)

    asyncio.run(scenario())


def test_close_sends_what_was_collected_first_and_abort_drops_it() -> None:
    async def scenario() -> None:
        closed = _Transport()
        transport = CoalescingTransport(closed, asyncio.get_running_loop())
        transport.write(b"goaway")
        transport.close()
        assert (closed.writes, closed.events) == ([b"goaway"], ["close"])

        aborted = _Transport()
        transport = CoalescingTransport(aborted, asyncio.get_running_loop())
        transport.write(b"lost")
        transport.abort()
        await _turn()
        assert (aborted.writes, aborted.events) == ([], ["abort"])

    asyncio.run(scenario())


def test_nothing_is_written_to_a_transport_closed_meanwhile() -> None:
    async def scenario() -> None:
        inner = _Transport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())
        transport.write(b"late")
        inner.closing = True  # the peer went away before the loop came round
        await _turn()
        assert inner.writes == []

    asyncio.run(scenario())


@pytest.fixture
def coalescing() -> Iterator[None]:
    original = H2Protocol.connection_made
    coalesce_h2_writes()
    coalesce_h2_writes()  # twice: wraps once
    try:
        yield
    finally:
        H2Protocol.connection_made = original  # type: ignore[method-assign]


def test_grpc_calls_work_over_coalescing_connections(coalescing: None) -> None:
    async def scenario(directory: str) -> None:
        # Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer.
        socket_path = str(Path(directory) / "h2.sock")
        server = Server([Health()])
        await server.start(path=socket_path)
        channel = Channel(path=socket_path)
        try:
            async with asyncio.timeout(10):
                replies = await asyncio.gather(
                    *(HealthStub(channel).Check(HealthCheckRequest()) for _ in range(20))
                )
            assert {r.status for r in replies} == {HealthCheckResponse.SERVING}
            protocol = await channel.__connect__()
            assert isinstance(protocol.connection._transport, CoalescingTransport)
        finally:
            channel.close()
            server.close()
            await server.wait_closed()

    with tempfile.TemporaryDirectory(prefix="h2-", dir="/tmp") as directory:
        asyncio.run(scenario(directory))
