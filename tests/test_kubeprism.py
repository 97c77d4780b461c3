"""machined/kubeprism.py: the KubePrism balancer against real local TCP servers as API servers."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from ichor.machined import kubeprism
from ichor.machined.kubeprism import Balancer, Upstream


async def _forever(_seconds: float) -> None:
    """A health-check sleep that never ends: the test runs every further round itself."""
    await asyncio.Event().wait()


class Server:
    """An upstream that answers each line with ``<name>:<line>`` and ``<name>:bye`` on EOF."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: asyncio.Server | None = None
        self.port = 0
        self.connections = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while line := await reader.readline():
                writer.write(f"{self.name}:".encode() + line)
                await writer.drain()
            writer.write(f"{self.name}:bye\n".encode())
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@asynccontextmanager
async def serving(name: str) -> AsyncIterator[Server]:
    server = Server(name)
    server.server = await asyncio.start_server(server._handle, "127.0.0.1", 0)
    server.port = server.server.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        server.server.close()


def _dead_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _ask(lb: Balancer, line: str = "ping") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
    try:
        writer.write(line.encode() + b"\n")
        await writer.drain()
        return await reader.readline()
    except ConnectionResetError:
        return b""  # closed before it read the line: the kernel answers with a reset
    finally:
        writer.close()


def _run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))  # type: ignore[arg-type]


def test_traffic_flows_both_ways_and_a_half_close_is_passed_on() -> None:
    async def main() -> None:
        async with serving("a") as a, Balancer("127.0.0.1", 0, sleep=_forever) as lb:
            lb.set_upstreams([a.address])
            reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
            writer.write(b"one\ntwo\n")
            await writer.drain()
            assert await reader.readline() == b"a:one\n"
            assert await reader.readline() == b"a:two\n"
            writer.write_eof()  # the upstream sees EOF and still answers
            assert await reader.read() == b"a:bye\n"
            writer.close()
            assert lb.healthy()
            assert lb.endpoint == f"127.0.0.1:{lb.port}"

    _run(main())


def test_a_dead_upstream_is_skipped_once_its_health_checks_fail() -> None:
    logs: list[str] = []

    async def main() -> None:
        async with serving("live") as live, Balancer("127.0.0.1", 0, sleep=_forever, log=logs.append) as lb:
            dead = ("127.0.0.1", _dead_port())
            lb.set_upstreams([dead, live.address])
            await lb.check_health()  # score 1 -> 0: still usable, as in go-loadbalancer
            await lb.check_health()  # -> -1: skipped
            assert {lb.pick() for _ in range(4)} == {Upstream(*live.address)}
            assert any("is unhealthy" in line and str(dead[1]) in line for line in logs)
            answers = {await _ask(lb) for _ in range(4)}
            assert answers == {b"live:ping\n"}
            assert lb.healthy()

    _run(main())


def test_a_failed_dial_tries_the_next_upstream_and_lowers_the_dead_ones_score() -> None:
    async def main() -> None:
        async with serving("live") as live, Balancer("127.0.0.1", 0, sleep=_forever) as lb:
            lb.set_upstreams([("127.0.0.1", _dead_port()), live.address])
            # Fresh upstreams are all usable: whichever is picked, the client is served.
            assert [await _ask(lb) for _ in range(3)] == [b"live:ping\n"] * 3

    _run(main())


def test_all_upstreams_dead_closes_connections_at_once_and_is_unhealthy() -> None:
    async def main() -> None:
        async with Balancer("127.0.0.1", 0, sleep=_forever) as lb:
            lb.set_upstreams([("127.0.0.1", _dead_port()), ("127.0.0.1", _dead_port())])
            await lb.check_health()
            await lb.check_health()
            assert not lb.healthy()
            assert lb.pick() is None
            assert await _ask(lb) == b""  # closed, not hung
        async with Balancer("127.0.0.1", 0, sleep=_forever) as empty:
            assert not empty.healthy()
            assert await _ask(empty) == b""

    _run(main())


def test_an_upstream_list_change_keeps_established_connections() -> None:
    async def main() -> None:
        async with serving("a") as a, serving("b") as b, Balancer("127.0.0.1", 0, sleep=_forever) as lb:
            lb.set_upstreams([a.address])
            reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
            writer.write(b"1\n")
            assert await reader.readline() == b"a:1\n"
            lb.set_upstreams([b.address])
            writer.write(b"2\n")
            assert await reader.readline() == b"a:2\n"  # the old connection still goes to a
            assert await _ask(lb) == b"b:ping\n"  # new ones go to b
            writer.close()

    _run(main())


def test_connections_are_bounded_and_idle_clients_do_not_block_others() -> None:
    async def main() -> None:
        async with serving("a") as a, Balancer("127.0.0.1", 0, sleep=_forever, max_connections=3) as lb:
            lb.set_upstreams([a.address])
            idle = [await asyncio.open_connection("127.0.0.1", lb.port) for _ in range(2)]
            while lb.connections < 2:
                await asyncio.sleep(0.01)
            assert await _ask(lb) == b"a:ping\n"  # two clients that send nothing block nobody
            third = await asyncio.open_connection("127.0.0.1", lb.port)
            while lb.connections < 3:
                await asyncio.sleep(0.01)
            assert await _ask(lb) == b""  # the fourth is over the limit: closed at once
            third[1].close()
            while lb.connections > 2:
                await asyncio.sleep(0.01)
            assert await _ask(lb) == b"a:ping\n"
            for _reader, writer in idle:
                writer.close()

    _run(main())


def test_a_client_that_never_reads_holds_bounded_buffers_and_blocks_nobody() -> None:
    total = 64 * 1024 * 1024
    sent = 0

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        chunk = b"x" * 65536
        try:
            while sent < total:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        except OSError:
            pass
        finally:
            writer.close()

    async def main() -> None:
        flooder = await asyncio.start_server(flood, "127.0.0.1", 0)
        port = flooder.sockets[0].getsockname()[1]
        async with serving("a") as a, Balancer("127.0.0.1", 0, sleep=_forever) as lb:
            lb.set_upstreams([("127.0.0.1", port)])
            _reader, stuck = await asyncio.open_connection("127.0.0.1", lb.port)  # never reads
            last = -1
            while sent != last:  # until the flood stalls on full buffers
                last = sent
                await asyncio.sleep(0.3)
            assert sent < total // 2, f"{sent} bytes went out: the proxy buffered without bound"
            lb.set_upstreams([a.address])
            assert await _ask(lb) == b"a:ping\n"
            stuck.close()
        flooder.close()

    _run(main())


def test_garbage_upstream_entries_are_ignored_with_a_logged_reason() -> None:
    logs: list[str] = []
    lb = Balancer("127.0.0.1", 0, log=logs.append)
    problems = lb.set_upstreams(
        [
            ("", 6443),
            ("cp-1", 0),
            ("cp 1", 6443),
            ("10.0.0.1", "6443"),
            ("10.0.0.1", True),
            "garbage",  # type: ignore[list-item]
            ("10.0.0.1", 6443),
            ("fd00::1", 6443),
            ("cp-1.example.org", 443),
        ]
    )
    assert lb.upstreams == [
        Upstream("10.0.0.1", 6443),
        Upstream("fd00::1", 6443),
        Upstream("cp-1.example.org", 443),
    ]
    assert str(lb.upstreams[1]) == "[fd00::1]:6443"
    assert len(problems) == 6 and logs == problems
    assert "port 0 is not a TCP port" in problems[1]
    assert "neither an IP address nor a DNS name" in problems[2]
    lb.set_upstreams([("", 6443), ("10.0.0.1", 6443), ("fd00::1", 6443), ("cp-1.example.org", 443)][1:])
    assert len(logs) == 6  # nothing new to say


@pytest.mark.parametrize(
    ("latency", "tier"), [(0.0, 0), (0.0005, 0), (0.001, 2), (0.009, 2), (0.01, 3), (0.2, 4), (3.0, 4)]
)
def test_health_check_latency_sets_the_tier_as_go_loadbalancer(latency: float, tier: int) -> None:
    assert kubeprism._tier(latency) == tier


def test_the_lowest_tier_is_preferred_round_robin_inside_it() -> None:
    lb = Balancer("127.0.0.1", 0)
    lb.set_upstreams([("10.0.0.1", 6443), ("10.0.0.2", 6443), ("10.0.0.3", 6443)])
    slow, fast_1, fast_2 = lb._nodes
    slow.up(kubeprism._tier(0.5))
    fast_1.up(kubeprism._tier(0.0002))
    fast_2.up(kubeprism._tier(0.0003))
    picks = [lb.pick() for _ in range(4)]
    assert picks == [fast_1.upstream, fast_2.upstream] * 2
    fast_1.down(), fast_1.down(), fast_1.down()  # 2 -> -1
    assert {lb.pick() for _ in range(3)} == {fast_2.upstream}
    fast_2.down(), fast_2.down(), fast_2.down()
    assert lb.pick() == slow.upstream


def test_while_no_upstream_is_usable_health_rounds_come_every_second_until_one_is() -> None:
    """An API server back after a restart is used again within seconds, not after three 20 s rounds."""
    slept: list[float] = []

    async def main() -> None:
        rounds = asyncio.Event()

        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            rounds.set()
            await asyncio.sleep(0)

        async with serving("api") as api:
            port = api.port
        # The API server is gone (its port closed): every dial fails and lowers its score.
        async with Balancer("127.0.0.1", 0, sleep=sleep) as lb:
            lb.set_upstreams([("127.0.0.1", port)])
            while lb.healthy():
                await rounds.wait()
                rounds.clear()
            slept.clear()
            await rounds.wait()
            assert slept[-1] == kubeprism.RECOVERY_INTERVAL
            # It comes back on the same port: a few one-second rounds later it is used again.
            server = await asyncio.start_server(Server("api")._handle, "127.0.0.1", port)
            try:
                while not lb.healthy():
                    await rounds.wait()
                    rounds.clear()
                assert await _ask(lb) == b"api:ping\n"
                await rounds.wait()
                rounds.clear()
                await rounds.wait()
                assert slept[-1] == kubeprism.HEALTH_INTERVAL
            finally:
                server.close()

    _run(main())


def test_failed_dials_that_leave_no_upstream_usable_cut_a_full_interval_short() -> None:
    """A kubelet dialling before its API server listens: the first round (score 1 -> 0) kept the
    upstream usable and slept 20 s; the kubelet's failed dial then left none usable, and the next
    round must come after a second, not after the rest of those 20 s."""
    slept: list[float] = []

    async def main() -> None:
        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            if seconds == kubeprism.HEALTH_INTERVAL:
                await asyncio.Event().wait()  # only the lost-upstream wake-up ends it
            await asyncio.sleep(0.01)

        async with Balancer("127.0.0.1", 0, sleep=sleep) as lb:
            lb.set_upstreams([("127.0.0.1", _dead_port())])
            while kubeprism.HEALTH_INTERVAL not in slept:
                await asyncio.sleep(0.01)
            assert lb.healthy()  # one failed round: score 0, still used
            assert await _ask(lb) == b""  # its dial fails: -1, nothing usable
            assert not lb.healthy()
            for _ in range(200):
                if slept[-1] == kubeprism.RECOVERY_INTERVAL:
                    break
                await asyncio.sleep(0.01)
            assert slept[-1] == kubeprism.RECOVERY_INTERVAL

    _run(main())
