"""Host DNS: a small caching DNS forwarder (Talos 1.7's ``127.0.0.53``), over UDP and TCP.

A query is answered from the cache while its TTL lasts, else forwarded to the upstream resolvers in
order (UDP queries over UDP, TCP queries over TCP) and the answer cached for the smallest TTL of
its records (a negative answer for its SOA's TTL, RFC 2308). What the cache must not do:

* hold more than ``max_entries`` answers (the oldest go first) or run more than ``max_in_flight``
  forwards at once (a query beyond that is refused with SERVFAIL, never queued without bound);
* answer from or forward a packet it cannot parse: malformed packets are dropped, silently, as a
  resolver does; only :class:`DNSFormatError` leaves :func:`parse_message`.

Exceptions: :class:`DNSFormatError` (a packet that is not a DNS message) and
:class:`UpstreamError` (no upstream answered), both :class:`DNSError`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import struct
import time
from collections.abc import Callable, Sequence
from typing import cast

__all__ = [
    "DNSCache",
    "DNSError",
    "DNSFormatError",
    "Message",
    "UpstreamError",
    "parse_message",
    "serve_tcp",
    "serve_udp",
]

_HEADER = struct.Struct("!HHHHHH")
_RR_FIXED = struct.Struct("!HHIH")
_MAX_LABEL_JUMPS = 64
_TYPE_SOA = 6
_RCODE_NOERROR, _RCODE_SERVFAIL, _RCODE_NXDOMAIN = 0, 2, 3
_FLAG_QR, _FLAG_TC = 0x8000, 0x0200
_MAX_UDP = 4096
_MAX_TCP = 65535
_TCP_IDLE = 10.0


class DNSError(Exception):
    """Root of the host DNS errors."""


class DNSFormatError(DNSError):
    """The bytes are not a well-formed DNS message."""


class UpstreamError(DNSError):
    """No upstream resolver answered the query."""


@dataclasses.dataclass(frozen=True)
class Message:
    """What the cache needs of a DNS message: its question and the TTLs of its records."""

    id: int
    flags: int
    question: tuple[str, int, int] | None
    """(lower-cased name, type, class) of the first question."""
    ttl_offsets: tuple[int, ...]
    """Byte offsets of every record's TTL field (to age a cached answer)."""
    min_ttl: int | None
    """Smallest record TTL (answers), or the SOA's negative TTL; None when nothing says how long."""

    @property
    def is_response(self) -> bool:
        return bool(self.flags & _FLAG_QR)

    @property
    def rcode(self) -> int:
        return self.flags & 0xF


def _skip_name(data: bytes, offset: int) -> tuple[str, int]:
    """Read a (possibly compressed) name at ``offset``: the name and the offset after it."""
    labels: list[str] = []
    end: int | None = None
    jumps = 0
    while True:
        if offset >= len(data):
            raise DNSFormatError("name runs past the end of the message")
        length = data[offset]
        if length & 0xC0 == 0xC0:
            if offset + 1 >= len(data):
                raise DNSFormatError("truncated compression pointer")
            jumps += 1
            if jumps > _MAX_LABEL_JUMPS:
                raise DNSFormatError("compression pointer loop")
            if end is None:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | data[offset + 1]
            continue
        if length & 0xC0:
            raise DNSFormatError(f"unsupported label type {length:#x}")
        if length == 0:
            name = ".".join(labels).lower() + "."
            if len(name) > 255:
                raise DNSFormatError("name longer than 255 octets")
            return name, end if end is not None else offset + 1
        label = data[offset + 1 : offset + 1 + length]
        if len(label) != length:
            raise DNSFormatError("label runs past the end of the message")
        labels.append(label.decode("latin-1"))
        offset += 1 + length


def parse_message(data: bytes) -> Message:
    """Parse a DNS message's header, first question and record TTLs; :class:`DNSFormatError` if bad."""
    if len(data) < _HEADER.size:
        raise DNSFormatError("shorter than a DNS header")
    msg_id, flags, qdcount, ancount, nscount, arcount = _HEADER.unpack_from(data)
    if qdcount > 1:
        raise DNSFormatError("more than one question")
    offset = _HEADER.size
    question: tuple[str, int, int] | None = None
    if qdcount:
        name, offset = _skip_name(data, offset)
        if offset + 4 > len(data):
            raise DNSFormatError("truncated question")
        qtype, qclass = struct.unpack_from("!HH", data, offset)
        offset += 4
        question = (name, qtype, qclass)
    ttl_offsets: list[int] = []
    answer_ttls: list[int] = []
    soa_ttl: int | None = None
    for index in range(ancount + nscount + arcount):
        _, offset = _skip_name(data, offset)
        if offset + _RR_FIXED.size > len(data):
            raise DNSFormatError("truncated resource record")
        rtype, _, ttl, rdlength = _RR_FIXED.unpack_from(data, offset)
        ttl_offset = offset + 4
        offset += _RR_FIXED.size + rdlength
        if offset > len(data):
            raise DNSFormatError("record data runs past the end of the message")
        if rtype == 41:  # OPT: its "TTL" is EDNS flags, never aged
            continue
        ttl_offsets.append(ttl_offset)
        if index < ancount:
            answer_ttls.append(ttl)
        elif index < ancount + nscount and rtype == _TYPE_SOA and rdlength >= 20:
            minimum = struct.unpack_from("!I", data, offset - 4)[0]
            soa_ttl = min(ttl, minimum)
    if offset != len(data):
        raise DNSFormatError("trailing bytes after the last record")
    min_ttl = min(answer_ttls) if answer_ttls else soa_ttl
    return Message(msg_id, flags, question, tuple(ttl_offsets), min_ttl)


def _servfail(query: bytes) -> bytes:
    """SERVFAIL for ``query`` (already parsed): its header with QR set, its question, no records."""
    msg_id, flags, qdcount, *_ = _HEADER.unpack_from(query)
    reply_flags = (flags & 0x7900) | _FLAG_QR | 0x0080 | _RCODE_SERVFAIL
    return _HEADER.pack(msg_id, reply_flags, qdcount, 0, 0, 0) + query[_HEADER.size :]


@dataclasses.dataclass
class _Entry:
    response: bytes
    stored: float
    expires: float
    message: Message


Upstream = tuple[str, int]


class DNSCache:
    """The resolver's state: upstreams, the bounded answer cache and the in-flight limit."""

    def __init__(
        self,
        upstreams: Sequence[Upstream] = (),
        *,
        max_entries: int = 1024,
        max_in_flight: int = 128,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstreams: tuple[Upstream, ...] = tuple(upstreams)
        self._entries: collections.OrderedDict[tuple[str, int, int], _Entry] = collections.OrderedDict()
        self._max_entries = max_entries
        self._max_in_flight = max_in_flight
        self._in_flight = 0
        self._timeout = timeout
        self._clock = clock
        self.hits = 0
        self.misses = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _cached(self, key: tuple[str, int, int], msg_id: int) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._clock()
        if now >= entry.expires:
            del self._entries[key]
            return None
        aged = int(now - entry.stored)
        out = bytearray(entry.response)
        struct.pack_into("!H", out, 0, msg_id)
        for ttl_offset in entry.message.ttl_offsets:
            (ttl,) = struct.unpack_from("!I", out, ttl_offset)
            struct.pack_into("!I", out, ttl_offset, max(ttl - aged, 0))
        return bytes(out)

    def _store(self, key: tuple[str, int, int], response: bytes, message: Message) -> None:
        cacheable = message.rcode in (_RCODE_NOERROR, _RCODE_NXDOMAIN) and not message.flags & _FLAG_TC
        if not cacheable or not message.min_ttl:
            return
        now = self._clock()
        self._entries[key] = _Entry(response, now, now + message.min_ttl, message)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    async def resolve(self, query: bytes, *, tcp: bool = False) -> bytes | None:
        """The answer to ``query`` (wire bytes), or None to drop it (not a query we can answer)."""
        try:
            message = parse_message(query)
        except DNSFormatError:
            return None
        if message.is_response or message.question is None:
            return None
        key = message.question
        cached = self._cached(key, message.id)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        if self._in_flight >= self._max_in_flight:
            self.refused += 1
            return _servfail(query)
        self._in_flight += 1
        try:
            response = await self._forward(query, message, tcp=tcp)
        except UpstreamError:
            return _servfail(query)
        finally:
            self._in_flight -= 1
        answer = parse_message(response)
        self._store(key, response, answer)
        return response

    async def _forward(self, query: bytes, message: Message, *, tcp: bool) -> bytes:
        failures: list[str] = []
        for host, port in self.upstreams:
            try:
                async with asyncio.timeout(self._timeout):
                    response = await (_ask_tcp if tcp else _ask_udp)(query, host, port)
                answer = parse_message(response)
            except (OSError, TimeoutError, DNSFormatError, asyncio.IncompleteReadError) as err:
                failures.append(f"{host}:{port}: {str(err) or type(err).__name__}")
                continue
            if answer.id != message.id or answer.question != message.question or not answer.is_response:
                failures.append(f"{host}:{port}: answer does not match the query")
                continue
            return response
        raise UpstreamError("; ".join(failures) or "no upstream resolvers")


class _OneReply(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if not self.reply.done():
            self.reply.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.reply.done():
            self.reply.set_exception(exc)


async def _ask_udp(query: bytes, host: str, port: int) -> bytes:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(_OneReply, remote_addr=(host, port))
    try:
        transport.sendto(query)
        return await protocol.reply
    finally:
        transport.close()


async def _read_framed(reader: asyncio.StreamReader) -> bytes:
    (length,) = struct.unpack("!H", await reader.readexactly(2))
    return await reader.readexactly(length)


async def _ask_tcp(query: bytes, host: str, port: int) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(struct.pack("!H", len(query)) + query)
        await writer.drain()
        return await _read_framed(reader)
    finally:
        writer.close()


class _UDPServer(asyncio.DatagramProtocol):
    def __init__(self, cache: DNSCache, tasks: set[asyncio.Task[None]]) -> None:
        self._cache = cache
        self._tasks = tasks
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)  # the selector's is no subclass

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if len(data) > _MAX_UDP:
            return
        task = asyncio.get_running_loop().create_task(self._answer(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        response = await self._cache.resolve(data)
        if response is not None and self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(response, addr)


async def serve_udp(
    cache: DNSCache, host: str, port: int, started: Callable[[int], None] | None = None
) -> None:
    """Answer UDP queries on ``host:port`` until cancelled (``started`` gets the bound port)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _UDPServer(cache, tasks), local_addr=(host, port), reuse_port=False
    )
    try:
        if started is not None:
            started(transport.get_extra_info("sockname")[1])
        await asyncio.Future()
    finally:
        transport.close()
        for task in tasks:
            task.cancel()


async def serve_tcp(
    cache: DNSCache, host: str, port: int, started: Callable[[int], None] | None = None
) -> None:
    """Answer TCP (length-framed) queries on ``host:port`` until cancelled."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                async with asyncio.timeout(_TCP_IDLE):
                    query = await _read_framed(reader)
                response = await cache.resolve(query, tcp=True)
                if response is None:
                    return
                writer.write(struct.pack("!H", len(response)) + response)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(connection, host, port, limit=_MAX_TCP + 2)
    async with server:
        if started is not None:
            started(server.sockets[0].getsockname()[1])
        await server.serve_forever()
