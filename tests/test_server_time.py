"""time.TimeService (``talosctl time [--check]``) over a real grpclib server on a unix socket,
asking a real NTP server on loopback; Talos's error texts."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import empty_pb2
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server
from ntp_helpers import ntp_server

from ichor.api.gen.timeapi import time_grpc, time_pb2
from ichor.machined import sntp
from ichor.machined.server._time import TimeService

TIMEOUT = 10


@asynccontextmanager
async def serving(
    servers: list[str], roles: tuple[str, ...] = ("os:reader",), **kwargs: Any
) -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server([TimeService(lambda: servers, roles_of=lambda stream: roles, **kwargs)])
        path = str(Path(tmp) / "time.sock")
        await server.start(path=path)
        channel = Channel(path=path)
        try:
            yield time_grpc.TimeServiceStub(channel)
        finally:
            channel.close()
            server.close()
            await server.wait_closed()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def test_time_asks_the_first_configured_server_and_check_the_named_one() -> None:
    async def go() -> None:
        with ntp_server(ahead=30.0) as first, ntp_server(ahead=-5.0) as other:
            async with serving([first, "192.0.2.1"]) as stub:
                (reply,) = (await stub.Time(empty_pb2.Empty())).messages
                assert reply.server == first
                local, remote = reply.localtime.ToDatetime(UTC), reply.remotetime.ToDatetime(UTC)
                assert abs(local - datetime.now(UTC)) < timedelta(seconds=5)
                assert remote - local == pytest.approx(timedelta(seconds=30), abs=timedelta(seconds=1))
                (checked,) = (await stub.TimeCheck(time_pb2.TimeRequest(server=other))).messages
                assert checked.server == other
                offset = checked.remotetime.ToDatetime(UTC) - checked.localtime.ToDatetime(UTC)
                assert offset == pytest.approx(timedelta(seconds=-5), abs=timedelta(seconds=1))

    run(go())


def test_errors_are_talos_texts() -> None:
    async def silent(server: str) -> Any:
        raise TimeoutError

    async def go() -> None:
        with ntp_server(stratum=16) as unsynced:
            async with serving([]) as stub:
                with pytest.raises(GRPCError) as bad:
                    await stub.TimeCheck(time_pb2.TimeRequest(server=unsynced))
                assert bad.value.status is Status.UNKNOWN
                assert (
                    bad.value.message
                    == "error validating NTP response: the server's own clock is not synchronised"
                )
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gone:
            gone.bind(("127.0.0.1", 0))
            closed = f"127.0.0.1:{gone.getsockname()[1]}"
        async with serving([closed]) as stub:
            with pytest.raises(GRPCError) as refused:
                await stub.Time(empty_pb2.Empty())
            assert refused.value.status is Status.UNKNOWN
            assert (
                refused.value.message
                == f'error querying NTP server "{closed}": [Errno 111] Connection refused'
            )
        async with serving([], query=silent) as stub:
            with pytest.raises(GRPCError) as lost:
                await stub.TimeCheck(time_pb2.TimeRequest(server="10.5.0.1"))
            assert lost.value.message == 'error querying NTP server "10.5.0.1": i/o timeout'

    run(go())


def test_time_without_servers_asks_talos_default_and_needs_a_role() -> None:
    asked: list[str] = []

    async def query(server: str) -> sntp.Sample:
        asked.append(server)
        return sntp.Sample(offset=0.0, delay=0.0, stratum=1)

    async def go() -> None:
        async with serving([], roles=(), query=query) as stub:
            with pytest.raises(GRPCError) as denied:
                await stub.Time(empty_pb2.Empty())
            assert denied.value.status is Status.PERMISSION_DENIED and asked == []
        async with serving([], query=query) as stub:
            (reply,) = (await stub.Time(empty_pb2.Empty())).messages
        assert reply.server == "time.cloudflare.com" and asked == ["time.cloudflare.com"]

    run(go())
