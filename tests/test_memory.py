"""machined's idle heap trim and its opt-in tracemalloc dump (ichor.machined.memory)."""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpclib.client import Channel
from grpclib.health.service import Health
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest
from grpclib.server import Server
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated

from ichor.machined.memory import (
    MALLOC_TRIM_ENV,
    TRACEMALLOC_ENV,
    IdleTrimmer,
    bound_h2_closed_streams,
    glibc_trim,
    release_closed_grpc_connections,
    start_tracemalloc_from_env,
)


class _Clocks:
    """A wall clock and a CPU clock the test advances by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def spend(self, seconds: float, cpu_share: float) -> None:
        self.now += seconds
        self.cpu += seconds * cpu_share


def _trimmer(clocks: _Clocks, trims: list[int]) -> IdleTrimmer:
    def trim() -> int:
        trims.append(1)
        return 1

    return IdleTrimmer(trim, window=5.0, idle_share=0.05, cpu=lambda: clocks.cpu, clock=lambda: clocks.now)


def test_trims_once_when_the_node_goes_idle_after_load() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    clocks.spend(5, 0.9)  # under load: never trimmed while calls are being served
    assert trimmer.tick() is False
    clocks.spend(5, 0.8)
    assert trimmer.tick() is False
    clocks.spend(5, 0.01)  # load gone
    assert trimmer.tick() is True
    for _ in range(5):  # idle stays idle: no trim again and again
        clocks.spend(5, 0.01)
        assert trimmer.tick() is False
    clocks.spend(5, 0.5)  # the next burst
    assert trimmer.tick() is False
    clocks.spend(5, 0.0)
    assert trimmer.tick() is True
    assert len(trims) == trimmer.trims == 2


def test_a_node_idle_from_boot_trims_once() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    for _ in range(4):
        clocks.spend(5, 0.0)
        trimmer.tick()
    assert len(trims) == 1


def test_a_clock_that_did_not_move_decides_nothing() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    clocks.cpu += 1.0
    assert trimmer.tick() is False
    assert trims == []


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="glibc's malloc_trim")
def test_glibc_trim_calls_the_c_library() -> None:
    trim = glibc_trim()
    assert trim is not None
    assert trim() in (0, 1)


def test_malloc_trim_can_be_turned_off() -> None:
    assert glibc_trim({MALLOC_TRIM_ENV: "0"}) is None


def test_a_server_forgets_connections_its_clients_closed() -> None:
    async def scenario(socket_path: str) -> None:
        server = Server([Health()])
        await server.start(path=socket_path)
        try:
            for _ in range(5):
                channel = Channel(path=socket_path)
                await HealthStub(channel).Check(HealthCheckRequest())
                channel.close()
            async with asyncio.timeout(10):
                while not all(handler.closing for handler in server._handlers):
                    await asyncio.sleep(0.01)
            # grpclib alone would hold all five (and their HTTP/2 and TLS state) until more came.
            assert len(server._handlers) == 5
            release_closed_grpc_connections()
            assert len(server._handlers) == 0
        finally:
            server.close()
            await server.wait_closed()

    with tempfile.TemporaryDirectory(prefix="grpc-", dir="/tmp") as directory:
        asyncio.run(scenario(str(Path(directory) / "s.sock")))


@pytest.fixture
def usr1() -> Iterator[object]:
    before = signal.getsignal(signal.SIGUSR1)
    try:
        yield before
    finally:
        signal.signal(signal.SIGUSR1, before)
        tracemalloc.stop()


@pytest.mark.usefixtures("usr1")
def test_tracemalloc_dump_on_sigusr1(tmp_path: Path) -> None:
    assert start_tracemalloc_from_env(tmp_path, {TRACEMALLOC_ENV: "3"}) is True
    assert tracemalloc.is_tracing()
    os.kill(os.getpid(), signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGUSR1)
    dumps = sorted((tmp_path / "system/run").glob("tracemalloc-*.snapshot"))
    assert [d.name for d in dumps] == ["tracemalloc-1.snapshot", "tracemalloc-2.snapshot"]
    assert tracemalloc.Snapshot.load(str(dumps[0])).statistics("filename")


@pytest.mark.parametrize("value", ["", "many"])
def test_tracemalloc_stays_off_unless_asked_with_a_number(tmp_path: Path, value: str, usr1: object) -> None:
    assert start_tracemalloc_from_env(tmp_path, {TRACEMALLOC_ENV: value}) is False
    assert not tracemalloc.is_tracing()
    assert signal.getsignal(signal.SIGUSR1) is usr1
    assert not (tmp_path / "system/run").exists()


@pytest.fixture
def h2_bound() -> Iterator[int]:
    before = H2Connection.MAX_CLOSED_STREAMS
    bound_h2_closed_streams(64)
    try:
        yield 64
    finally:
        H2Connection.MAX_CLOSED_STREAMS = before


_REQUEST = [
    (":method", "POST"),
    (":path", "/machine.MachineService/Version"),
    (":scheme", "http"),
    (":authority", "n"),
]


def _connected() -> tuple[H2Connection, H2Connection]:
    client, server = (
        H2Connection(H2Configuration(client_side=True)),
        H2Connection(H2Configuration(client_side=False)),
    )
    client.initiate_connection()
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    return client, server


def _call(client: H2Connection, server: H2Connection) -> None:
    stream = client.get_next_available_stream_id()
    client.send_headers(stream, _REQUEST, end_stream=True)
    server.receive_data(client.data_to_send())
    server.send_headers(stream, [(":status", "200")], end_stream=True)
    client.receive_data(server.data_to_send())


def test_a_long_lived_connection_remembers_a_bounded_number_of_closed_streams(h2_bound: int) -> None:
    client, server = _connected()
    for _ in range(h2_bound * 5):
        _call(client, server)
    assert 0 < len(server._closed_streams) <= h2_bound
    assert 0 < len(client._closed_streams) <= h2_bound


def test_late_data_on_a_forgotten_reset_stream_is_still_a_stream_error(h2_bound: int) -> None:
    # Bounding the closed streams is safe: data that was on its way when this end reset a stream
    # gets RST_STREAM even once the stream has been forgotten, never a connection error.
    client, server = _connected()
    stream = client.get_next_available_stream_id()
    client.send_headers(stream, _REQUEST)
    server.receive_data(client.data_to_send())
    server.reset_stream(stream)  # the server cancels the call while the client's data is on its way
    client.send_data(stream, b"late")
    late = client.data_to_send()
    for _ in range(h2_bound * 2):
        _call(client, server)
    events = server.receive_data(late)  # not a ProtocolError: the connection lives
    assert not any(isinstance(e, ConnectionTerminated) for e in events)
    assert stream not in server._closed_streams
    reply = server.data_to_send()
    assert reply[3] == 0x3 and int.from_bytes(reply[5:9]) == stream  # RST_STREAM on that stream
    _call(client, server)
