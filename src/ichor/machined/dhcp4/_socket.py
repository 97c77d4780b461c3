"""The DHCP client's way onto the link: a packet socket for what a host without an address sends and
receives, the kernel's UDP stack for unicast once it has one.

* Broadcasts (DISCOVER, REQUEST, rebinding) go out of an ``AF_PACKET`` socket bound to the link as
  IPv4/UDP datagrams built here (source ``0.0.0.0`` or the leased address, to ``255.255.255.255``),
  so they leave by that link whatever the routing table says.
* Unicasts to the server (renewal, release) go through a UDP socket bound to the leased address
  and the link (``SO_BINDTODEVICE``), so the kernel resolves the server's MAC.
* Replies are read from the packet socket: IPv4, UDP, to port 68, not fragmented.

Only machined on a node with a network namespace of its own opens these (needs ``CAP_NET_RAW``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
from collections.abc import AsyncIterator

from ichor.machined.dhcp4._client import Transport, TransportFactory
from ichor.machined.dhcp4._packet import DHCPPacketError, Packet, decode

__all__ = ["RawTransport", "ip_udp_datagram", "raw_transports", "udp_payload"]

CLIENT_PORT, SERVER_PORT = 68, 67
_ETH_P_IP = 0x0800
_PACKET_OUTGOING = 4
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip_udp_datagram(payload: bytes, src: ipaddress.IPv4Address, dst: ipaddress.IPv4Address) -> bytes:
    """``payload`` from ``src``:68 to ``dst``:67 as one IPv4 packet (header and UDP checksums set)."""
    udp_len = 8 + len(payload)
    pseudo = src.packed + dst.packed + struct.pack("!BBH", 0, socket.IPPROTO_UDP, udp_len)
    udp = struct.pack("!HHHH", CLIENT_PORT, SERVER_PORT, udp_len, 0) + payload
    udp_sum = _checksum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", udp_sum) + udp[8:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0x10, 20 + udp_len, 0, 0, 64, socket.IPPROTO_UDP, 0,
                         src.packed, dst.packed)  # fmt: skip
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return header + udp


def udp_payload(datagram: bytes) -> bytes | None:
    """The UDP payload of an IPv4 datagram to port 68, or None (not IPv4/UDP/68, fragmented, short)."""
    if len(datagram) < 20 or datagram[0] >> 4 != 4:
        return None
    ihl = (datagram[0] & 0x0F) * 4
    total = int.from_bytes(datagram[2:4], "big")
    if ihl < 20 or len(datagram) < ihl + 8 or datagram[9] != socket.IPPROTO_UDP:
        return None
    if int.from_bytes(datagram[6:8], "big") & 0x3FFF:  # more-fragments flag or an offset
        return None
    dport = int.from_bytes(datagram[ihl + 2 : ihl + 4], "big")
    udp_len = int.from_bytes(datagram[ihl + 4 : ihl + 6], "big")
    if dport != CLIENT_PORT or udp_len < 8 or ihl + udp_len > min(total, len(datagram)):
        return None
    return datagram[ihl + 8 : ihl + udp_len]


class RawTransport:
    """One exchange's sockets on ``link``; see the module docstring."""

    def __init__(self, link: str, address: ipaddress.IPv4Address | None) -> None:
        self._link = link
        self._address = address
        self._packet = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(_ETH_P_IP))
        self._udp: socket.socket | None = None
        try:
            self._packet.bind((link, _ETH_P_IP))
            self._packet.setblocking(False)
            if address is not None:
                self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self._udp.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, link.encode())
                self._udp.bind((str(address), CLIENT_PORT))
                self._udp.setblocking(False)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        self._packet.close()
        if self._udp is not None:
            self._udp.close()

    async def send(self, packet: Packet, *, to: ipaddress.IPv4Address | None = None) -> None:
        loop = asyncio.get_running_loop()
        payload = packet.encode()
        if to is not None and self._udp is not None:
            await loop.sock_sendto(self._udp, payload, (str(to), SERVER_PORT))
            return
        datagram = ip_udp_datagram(payload, self._address or ipaddress.IPv4Address(0), _BROADCAST)
        await loop.sock_sendto(self._packet, datagram, (self._link, _ETH_P_IP, 0, 0, b"\xff" * 6))

    async def receive(self) -> Packet:
        loop = asyncio.get_running_loop()
        while True:
            data, address = await loop.sock_recvfrom(self._packet, 65535)
            if address[2] == _PACKET_OUTGOING:
                continue
            payload = udp_payload(data)
            if payload is None:
                continue
            with contextlib.suppress(DHCPPacketError):
                return decode(payload)


def raw_transports(link: str) -> TransportFactory:
    """The client's transport factory for ``link``: sockets opened per exchange, closed after it."""

    @contextlib.asynccontextmanager
    async def open_transport(address: ipaddress.IPv4Address | None) -> AsyncIterator[Transport]:
        transport = RawTransport(link, address)
        try:
            yield transport
        finally:
            transport.close()

    return open_transport
