"""Host DNS's caching forwarder against a fake upstream on loopback: answers, TTLs, limits, bad packets."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import cast

from fuzz_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from ichor.machined import dnscache


def encode_name(name: str) -> bytes:
    return b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"


def query(name: str, msg_id: int = 0x1234, qtype: int = 1) -> bytes:
    return (
        struct.pack("!HHHHHH", msg_id, 0x0100, 1, 0, 0, 0) + encode_name(name) + struct.pack("!HH", qtype, 1)
    )


def answer(request: bytes, ip: str | None, ttl: int) -> bytes:
    """A: ``ip`` with ``ttl`` (a compressed name), or NXDOMAIN with an SOA whose minimum is ``ttl``."""
    msg_id = struct.unpack_from("!H", request)[0]
    question = request[12:]
    if ip is not None:
        record = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + socket.inet_aton(ip)
        return struct.pack("!HHHHHH", msg_id, 0x8180, 1, 1, 0, 0) + question + record
    soa_rdata = encode_name("ns.lan") + encode_name("admin.lan") + struct.pack("!IIIII", 1, 60, 60, 60, ttl)
    soa = encode_name("lan") + struct.pack("!HHIH", 6, 1, 3600, len(soa_rdata)) + soa_rdata
    return struct.pack("!HHHHHH", msg_id, 0x8183, 1, 0, 1, 0) + question + soa


class FakeUpstream(asyncio.DatagramProtocol):
    """Knows ``test.lan`` (10.5.0.1, TTL 30); everything else is NXDOMAIN (negative TTL 5)."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.queries: list[str] = []
        self.gate = gate
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        asyncio.get_running_loop().create_task(self._reply(data, addr))

    async def _reply(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        name = dnscache.parse_message(data).question
        assert name is not None
        self.queries.append(name[0])
        if self.gate is not None:
            await self.gate.wait()
        assert self.transport is not None
        self.transport.sendto(
            answer(data, "10.5.0.1" if name[0] == "test.lan." else None, 30 if name[0] == "test.lan." else 5),
            addr,
        )


async def start_upstream(
    gate: asyncio.Event | None = None,
) -> tuple[FakeUpstream, asyncio.DatagramTransport, int]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(
        lambda: FakeUpstream(gate), local_addr=("127.0.0.1", 0)
    )
    return protocol, transport, transport.get_extra_info("sockname")[1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def a_record(response: bytes) -> tuple[str, int]:
    """The address and TTL of a one-A-record answer to a ``query`` above."""
    message = dnscache.parse_message(response)
    ttl = struct.unpack_from("!I", response, message.ttl_offsets[0])[0]
    return socket.inet_ntoa(response[-4:]), ttl


def test_answers_are_forwarded_then_served_from_the_cache_with_aged_ttls() -> None:
    async def main() -> None:
        upstream, transport, port = await start_upstream()
        clock = Clock()
        cache = dnscache.DNSCache([("127.0.0.1", port)], clock=clock)
        try:
            first = await cache.resolve(query("Test.LAN", msg_id=1))
            assert first is not None and a_record(first) == ("10.5.0.1", 30)
            clock.now += 12
            second = await cache.resolve(query("test.lan", msg_id=2))
            assert second is not None and struct.unpack_from("!H", second)[0] == 2
            assert a_record(second) == ("10.5.0.1", 18)
            assert upstream.queries == ["test.lan."]
            clock.now += 18  # the TTL is over: asked again
            await cache.resolve(query("test.lan", msg_id=3))
            assert upstream.queries == ["test.lan.", "test.lan."]
            # NXDOMAIN is cached for the SOA's negative TTL (5 s), then asked again
            for _ in range(2):
                missing = await cache.resolve(query("nope.lan"))
                assert missing is not None and dnscache.parse_message(missing).rcode == 3
            clock.now += 6
            await cache.resolve(query("nope.lan"))
            assert upstream.queries.count("nope.lan.") == 2
        finally:
            transport.close()

    asyncio.run(main())


def test_the_cache_is_bounded_and_drops_the_oldest() -> None:
    async def main() -> None:
        upstream, transport, port = await start_upstream()
        cache = dnscache.DNSCache([("127.0.0.1", port)], max_entries=2)
        try:
            for name in ("a.lan", "b.lan", "c.lan", "a.lan"):
                await cache.resolve(query(name))
            assert len(cache) == 2
            assert upstream.queries == ["a.lan.", "b.lan.", "c.lan.", "a.lan."]
        finally:
            transport.close()

    asyncio.run(main())


def test_queries_beyond_the_in_flight_limit_get_servfail_at_once() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        upstream, transport, port = await start_upstream(gate)
        cache = dnscache.DNSCache([("127.0.0.1", port)], max_in_flight=2)
        try:
            held = [asyncio.create_task(cache.resolve(query(f"h{i}.lan"))) for i in range(2)]
            while len(upstream.queries) < 2:
                await asyncio.sleep(0.01)
            refused = await cache.resolve(query("late.lan"))
            assert refused is not None and dnscache.parse_message(refused).rcode == 2
            assert cache.refused == 1 and "late.lan." not in upstream.queries
            gate.set()
            assert all(r is not None for r in await asyncio.gather(*held))
        finally:
            transport.close()

    asyncio.run(main())


def test_no_upstream_answering_gives_servfail_and_nothing_is_cached() -> None:
    async def main() -> None:
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        silent.bind(("127.0.0.1", 0))
        cache = dnscache.DNSCache([("127.0.0.1", silent.getsockname()[1])], timeout=0.2)
        try:
            reply = await cache.resolve(query("test.lan"))
            assert reply is not None and dnscache.parse_message(reply).rcode == 2
            assert len(cache) == 0
        finally:
            silent.close()

    asyncio.run(main())


def test_malformed_packets_and_responses_are_dropped() -> None:
    async def main() -> None:
        cache = dnscache.DNSCache([("127.0.0.1", 9)])
        good = query("test.lan")
        for bad in (b"", b"\x00" * 11, good[:-2], good + b"x", good[:12] + b"\xc0\x0c" + good[-4:],
                    answer(good, "10.5.0.1", 30), good[:12] + b"\x40abc\x00" + good[-4:]):  # fmt: skip
            assert await cache.resolve(bad) is None
        assert cache.misses == 0

    asyncio.run(main())


def test_udp_and_tcp_listeners_answer_real_clients() -> None:
    async def main() -> None:
        upstream, transport, port = await start_upstream()
        tcp_upstream = await asyncio.start_server(tcp_responder, "127.0.0.1", 0)
        cache = dnscache.DNSCache([("127.0.0.1", port)])
        ports: dict[str, int] = {}
        async with asyncio.TaskGroup() as group:
            udp = group.create_task(
                dnscache.serve_udp(cache, "127.0.0.1", 0, lambda p: ports.__setitem__("udp", p))
            )
            while "udp" not in ports:
                await asyncio.sleep(0.01)
            reply = await asyncio.to_thread(udp_client, ports["udp"], query("test.lan"))
            assert a_record(reply)[0] == "10.5.0.1" and upstream.queries == ["test.lan."]
            cache.upstreams = (("127.0.0.1", tcp_upstream.sockets[0].getsockname()[1]),)
            tcp = group.create_task(
                dnscache.serve_tcp(cache, "127.0.0.1", 0, lambda p: ports.__setitem__("tcp", p))
            )
            while "tcp" not in ports:
                await asyncio.sleep(0.01)
            reader, writer = await asyncio.open_connection("127.0.0.1", ports["tcp"])
            request = query("other.lan", qtype=1)
            writer.write(struct.pack("!H", len(request)) + request)
            length = struct.unpack("!H", await reader.readexactly(2))[0]
            over_tcp = await reader.readexactly(length)
            writer.close()
            assert dnscache.parse_message(over_tcp).rcode == 3
            udp.cancel()
            tcp.cancel()
        tcp_upstream.close()
        transport.close()

    asyncio.run(main())


async def tcp_responder(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    length = struct.unpack("!H", await reader.readexactly(2))[0]
    request = await reader.readexactly(length)
    reply = answer(request, None, 5)
    writer.write(struct.pack("!H", len(reply)) + reply)
    await writer.drain()
    writer.close()


def udp_client(port: int, request: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(request, ("127.0.0.1", port))
        return sock.recv(4096)


@budget(300)
@given(st.binary(max_size=300))
def test_the_parser_raises_only_format_errors(data: bytes) -> None:
    try:
        message = dnscache.parse_message(data)
    except dnscache.DNSFormatError:
        return
    assert all(0 <= offset <= len(data) - 4 for offset in message.ttl_offsets)


@budget(200)
@given(st.integers(0, 40), st.binary(min_size=1, max_size=4))
def test_mutated_queries_never_break_the_cache(position: int, patch: bytes) -> None:
    good = bytearray(answer(query("test.lan"), "10.5.0.1", 30))
    good[position : position + len(patch)] = patch
    try:
        message = dnscache.parse_message(bytes(good))
    except dnscache.DNSFormatError:
        return
    assert message.question is None or message.question[0].endswith(".")
