"""A fake DHCP server behind the client's Transport, and a clock whose sleep only moves time.

:class:`FakeServer` answers DISCOVER with OFFER and REQUEST with ACK (or NAK, or silence, as a test
sets it) from a small pool, and records every message it got with the client's address at the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator

from ichor.machined.dhcp4 import BOOTREPLY, MessageType, Option, Packet, Transport

SERVER = ipaddress.IPv4Address("10.77.0.1")
MAC = bytes.fromhex("0a580a4d0002")


class FakeTime:
    """``clock()`` in seconds; ``sleep(s)`` advances it by ``s`` once the loop has had a few turns
    (so a reply the fake server already queued wins the race against a timeout, as on a real link)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        self.now += max(seconds, 0)


def ack_options(lease_seconds: int = 600, **extra: bytes) -> tuple[tuple[int, bytes], ...]:
    base: dict[int, bytes] = {
        Option.SERVER_ID: SERVER.packed,
        Option.SUBNET_MASK: bytes((255, 255, 255, 0)),
        Option.LEASE_TIME: lease_seconds.to_bytes(4, "big"),
        Option.ROUTER: SERVER.packed,
        Option.DNS_SERVERS: SERVER.packed + ipaddress.IPv4Address("10.77.0.53").packed,
        Option.NTP_SERVERS: ipaddress.IPv4Address("10.77.0.123").packed,
        Option.HOSTNAME: b"leased-node",
        Option.DOMAIN_NAME: b"lab.example",
    }
    for name, value in extra.items():
        base[Option[name.upper()]] = value
    return tuple(base.items())


class FakeServer:
    def __init__(self, address: str = "10.77.0.2", lease_time: int = 600) -> None:
        self.address = ipaddress.IPv4Address(address)
        self.lease_time = lease_time
        self.got: list[
            tuple[MessageType | None, ipaddress.IPv4Address | None, ipaddress.IPv4Address | None]
        ] = []
        """(message type, client's own address, unicast destination) per message received."""
        self.answer_requests: str = "ack"
        """``ack``, ``nak`` or ``silent``."""
        self.answer_discover = True
        self.opened = 0

    def reply(self, request: Packet, kind: MessageType) -> Packet:
        options = ((Option.MESSAGE_TYPE, bytes((kind,))), *ack_options(self.lease_time))
        return Packet(op=BOOTREPLY, xid=request.xid, chaddr=request.chaddr, options=options,
                      yiaddr=self.address if kind is not MessageType.NAK else ipaddress.IPv4Address(0))  # fmt: skip

    @contextlib.asynccontextmanager
    async def open(self, own: ipaddress.IPv4Address | None) -> AsyncIterator[Transport]:
        self.opened += 1
        yield _Link(self, own)


class _Link:
    def __init__(self, server: FakeServer, own: ipaddress.IPv4Address | None) -> None:
        self._server = server
        self._own = own
        self._replies: asyncio.Queue[Packet] = asyncio.Queue()

    async def send(self, packet: Packet, *, to: ipaddress.IPv4Address | None = None) -> None:
        server = self._server
        kind = packet.message_type
        server.got.append((kind, self._own, to))
        # Noise on the link first: a reply for another client must be ignored.
        await self._replies.put(Packet(op=BOOTREPLY, xid=packet.xid ^ 1, chaddr=packet.chaddr,
                                       options=((Option.MESSAGE_TYPE, bytes((MessageType.ACK,))),)))  # fmt: skip
        if kind is MessageType.DISCOVER and server.answer_discover:
            await self._replies.put(server.reply(packet, MessageType.OFFER))
        elif kind is MessageType.REQUEST and server.answer_requests != "silent":
            answer = MessageType.ACK if server.answer_requests == "ack" else MessageType.NAK
            await self._replies.put(server.reply(packet, answer))

    async def receive(self) -> Packet:
        return await self._replies.get()
