"""The DHCPv4 client's state machine (RFC 2131 section 4.4): INIT -> SELECTING -> REQUESTING ->
BOUND -> RENEWING (T1) -> REBINDING (T2) -> expired, and RELEASE when it stops.

It talks through a :class:`Transport` opened per exchange (a raw socket on the link in machined,
a fake server in tests) and keeps time through an injectable ``clock``/``sleep`` pair, so tests
drive a whole lease lifetime without waiting. It never touches the kernel's addresses: whoever
runs it gets each lease (or ``None`` when it is lost) through ``on_lease``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ichor.machined.dhcp4._packet import (
    BOOTREQUEST,
    BROADCAST_FLAG,
    DHCPPacketError,
    Lease,
    MessageType,
    Option,
    Packet,
    lease_of,
)

__all__ = ["DHCP4Client", "Transport", "TransportFactory"]

log = logging.getLogger(__name__)

REQUESTED_OPTIONS = bytes((Option.SUBNET_MASK, Option.ROUTER, Option.CLASSLESS_ROUTES, Option.DNS_SERVERS,
                           Option.DOMAIN_SEARCH, Option.NTP_SERVERS, Option.INTERFACE_MTU, Option.HOSTNAME,
                           Option.DOMAIN_NAME, Option.LEASE_TIME, Option.RENEWAL_TIME, Option.REBINDING_TIME))  # fmt: skip
"""Talos's list (routes, DNS, search domains, NTP, MTU, hostname and domain) plus the lease times."""
INFINITE = 0xFFFFFFFF
_BACKOFF = (4.0, 8.0, 16.0, 32.0, 64.0)
"""RFC 2131 4.1: retransmit after 4 s, doubling to 64 s (not randomised, so tests stay exact)."""
_MIN_RENEW_WAIT = 60.0
"""RFC 2131 4.4.5: in RENEWING/REBINDING, retransmit no more often than every 60 s."""


class Transport(Protocol):
    async def send(self, packet: Packet, *, to: ipaddress.IPv4Address | None = None) -> None:
        """Broadcast ``packet`` (``to`` None) or unicast it to a server."""
        ...

    async def receive(self) -> Packet:
        """The next DHCP reply on the link (any xid; the client filters)."""
        ...


TransportFactory = Callable[[ipaddress.IPv4Address | None], AbstractAsyncContextManager[Transport]]
"""Opens a transport; the argument is the client's own address once it has one (renew, release)."""


@dataclasses.dataclass
class _Bound:
    lease: Lease
    since: float
    """``clock()`` when the ACK arrived: T1, T2 and expiry count from here."""


class DHCP4Client:
    """One link's DHCPv4 lease, acquired and kept until :meth:`run` is cancelled (then released)."""

    def __init__(
        self,
        hardware_addr: bytes,
        open_transport: TransportFactory,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        xid: Callable[[], int] = lambda: random.getrandbits(32),
        hostname: str = "",
    ) -> None:
        self._mac = hardware_addr
        self._open = open_transport
        self._clock = clock
        self._sleep = sleep
        self._new_xid = xid
        self._hostname = hostname
        self.bound: _Bound | None = None

    # -- messages ----------------------------------------------------------------------------

    def _packet(self, kind: MessageType, xid: int, *, ciaddr: ipaddress.IPv4Address | None = None,
                extra: tuple[tuple[int, bytes], ...] = (), broadcast: bool = True) -> Packet:  # fmt: skip
        options: list[tuple[int, bytes]] = [(Option.MESSAGE_TYPE, bytes((kind,)))]
        options.append((Option.CLIENT_ID, b"\x01" + self._mac))
        options.extend(extra)
        if kind in (MessageType.DISCOVER, MessageType.REQUEST):
            options.append((Option.PARAMETER_LIST, REQUESTED_OPTIONS))
            options.append((Option.MAX_MESSAGE_SIZE, (1500).to_bytes(2, "big")))
            if self._hostname:
                options.append((Option.HOSTNAME, self._hostname.encode()))
        return Packet(op=BOOTREQUEST, xid=xid, chaddr=self._mac, options=tuple(options),
                      flags=BROADCAST_FLAG if broadcast else 0,
                      ciaddr=ciaddr or ipaddress.IPv4Address(0))  # fmt: skip

    async def _exchange(self, transport: Transport, packet: Packet, accept: set[MessageType],
                        timeout: float, to: ipaddress.IPv4Address | None = None) -> Packet | None:  # fmt: skip
        """Send ``packet`` and return the first reply for its xid of a kind in ``accept`` (None after ``timeout``)."""
        await transport.send(packet, to=to)

        async def answer() -> Packet:
            while True:
                reply = await transport.receive()
                if reply.xid == packet.xid and reply.chaddr[: len(self._mac)] == self._mac \
                        and reply.message_type in accept:  # fmt: skip
                    return reply

        waiter = asyncio.ensure_future(answer())
        timer = asyncio.ensure_future(self._sleep(timeout))
        try:
            await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
            return waiter.result() if waiter.done() else None
        finally:
            for task in (waiter, timer):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- states ------------------------------------------------------------------------------

    async def acquire(self) -> Lease:
        """INIT -> SELECTING -> REQUESTING -> BOUND: retries until a server grants a lease."""
        while True:
            xid = self._new_xid()
            async with self._open(None) as transport:
                offer = None
                for wait in _BACKOFF:
                    offer = await self._exchange(transport, self._packet(MessageType.DISCOVER, xid),
                                                 {MessageType.OFFER}, wait)  # fmt: skip
                    if offer is not None:
                        break
                if offer is None:
                    log.info("no DHCP offer; discovering again")
                    continue
                try:
                    offered = lease_of(offer)
                except DHCPPacketError as err:
                    log.warning("ignoring a DHCP offer: %s", err)
                    continue
                request = self._packet(MessageType.REQUEST, xid, extra=(
                    (Option.REQUESTED_ADDRESS, offered.address.ip.packed),
                    (Option.SERVER_ID, offered.server.packed),
                ))  # fmt: skip
                for wait in _BACKOFF[:3]:
                    reply = await self._exchange(transport, request, {MessageType.ACK, MessageType.NAK}, wait)
                    if reply is None:
                        continue
                    if reply.message_type is MessageType.NAK:
                        break
                    try:
                        lease = lease_of(reply)
                    except DHCPPacketError as err:
                        log.warning("ignoring a DHCP ACK: %s", err)
                        break
                    self.bound = _Bound(lease, self._clock())
                    return lease

    async def _extend(self, *, unicast: bool, until: float) -> Lease | None:
        """RENEWING (unicast to the server) or REBINDING (broadcast) until ``until``; None if NAKed or out of time."""
        assert self.bound is not None
        lease = self.bound.lease
        xid = self._new_xid()
        request = self._packet(MessageType.REQUEST, xid, ciaddr=lease.address.ip, broadcast=False)
        async with self._open(lease.address.ip) as transport:
            while (left := until - self._clock()) > 0:
                wait = min(left, max(left / 2, _MIN_RENEW_WAIT))
                reply = await self._exchange(transport, request, {MessageType.ACK, MessageType.NAK}, wait,
                                             to=lease.server if unicast else None)  # fmt: skip
                if reply is None:
                    continue
                if reply.message_type is MessageType.NAK:
                    return None
                try:
                    renewed = lease_of(reply)
                except DHCPPacketError as err:
                    log.warning("ignoring a DHCP ACK: %s", err)
                    continue
                self.bound = _Bound(renewed, self._clock())
                return renewed
        return None

    async def _sleep_until(self, deadline: float) -> None:
        while (left := deadline - self._clock()) > 0:
            await self._sleep(left)

    async def keep(self, on_lease: Callable[[Lease | None], None]) -> None:
        """From BOUND: renew at T1, rebind at T2, report expiry; returns when the lease is lost."""
        while self.bound is not None:
            bound = self.bound
            if bound.lease.lease_time == INFINITE:
                await asyncio.Event().wait()
            t1 = bound.since + min(bound.lease.renew_after, bound.lease.lease_time)
            t2 = bound.since + min(
                max(bound.lease.rebind_after, bound.lease.renew_after), bound.lease.lease_time
            )
            expiry = bound.since + bound.lease.lease_time
            await self._sleep_until(t1)
            lease = await self._extend(unicast=True, until=t2)
            if lease is None and self._clock() < expiry:
                lease = await self._extend(unicast=False, until=expiry)
            if lease is None:
                log.warning("DHCP lease of %s lost", bound.lease.address)
                self.bound = None
                on_lease(None)
                return
            on_lease(lease)

    async def release(self) -> None:
        """Tell the server the address is free again (best effort: RELEASE gets no answer)."""
        if self.bound is None:
            return
        lease = self.bound.lease
        self.bound = None
        packet = self._packet(MessageType.RELEASE, self._new_xid(), ciaddr=lease.address.ip, broadcast=False,
                              extra=((Option.SERVER_ID, lease.server.packed),))  # fmt: skip
        try:
            async with self._open(lease.address.ip) as transport:
                await transport.send(packet, to=lease.server)
        except OSError as err:
            log.info("DHCP release of %s not sent: %s", lease.address, err)

    async def run(self, on_lease: Callable[[Lease | None], None]) -> None:
        """Acquire, keep, acquire again when lost; RELEASE when cancelled."""
        try:
            while True:
                lease = await self.acquire()
                on_lease(lease)
                await self.keep(on_lease)
        finally:
            await asyncio.shield(self.release())
