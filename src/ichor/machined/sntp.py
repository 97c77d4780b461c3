"""A small SNTP client (RFC 4330): one 48-byte query to an NTP server, its answer checked and measured.

It only reads time: nothing here sets a clock (nodes share the host's kernel clock, so machined
never sets it, as Talos in a container does not). Everything a server sends goes through
:func:`parse_response`, which refuses a malformed, unsynchronised, kiss-of-death or unsolicited
answer with :class:`SNTPError` and nothing else.

Exceptions::

    SNTPError (ValueError)   the answer is not a usable time (says why)
    OSError                  the server could not be reached (name resolution, sending)
    TimeoutError             no answer in time
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import struct
import time
from collections.abc import Callable

__all__ = ["NTP_PORT", "SNTPError", "Sample", "parse_response", "query", "request"]

NTP_PORT = 123
_PACKET = struct.Struct("!BBbbII4sQQQQ")
_NTP_EPOCH_OFFSET = 2_208_988_800
"""Seconds from 1900-01-01 (NTP's era 0) to 1970-01-01 (Unix)."""
_MODE_CLIENT, _MODE_SERVER, _MODE_BROADCAST = 3, 4, 5


class SNTPError(ValueError):
    """An answer that is not a usable time."""


class _Unsolicited(SNTPError):
    """An answer to some other query (a late or spoofed one): skipped, the real one may follow."""


@dataclasses.dataclass(frozen=True)
class Sample:
    offset: float
    """Seconds the server's clock is ahead of ours."""
    delay: float
    """Round trip, seconds."""
    stratum: int


def _to_ntp(unix: float) -> int:
    seconds = unix + _NTP_EPOCH_OFFSET
    return (int(seconds) << 32) | int((seconds % 1) * (1 << 32))


def _from_ntp(value: int) -> float:
    return (value >> 32) - _NTP_EPOCH_OFFSET + (value & 0xFFFFFFFF) / (1 << 32)


def request(now: float) -> bytes:
    """A client query (LI 0, version 4, mode 3) whose transmit timestamp is ``now`` (Unix seconds)."""
    return _PACKET.pack((4 << 3) | _MODE_CLIENT, 0, 0, 0, 0, 0, b"\0" * 4, 0, 0, 0, _to_ntp(now))


def parse_response(data: bytes, sent: bytes, received_at: float) -> Sample:
    """Check a server's answer to the query ``sent`` (received at ``received_at``) and measure it."""
    if len(data) < _PACKET.size:
        raise SNTPError(f"answer of {len(data)} bytes: an NTP packet has at least {_PACKET.size}")
    first, stratum, _, _, _, _, ref_id, _, origin, receive, transmit = _PACKET.unpack_from(data)
    leap, version, mode = first >> 6, (first >> 3) & 7, first & 7
    if mode not in (_MODE_SERVER, _MODE_BROADCAST):
        raise SNTPError(f"answer in mode {mode}, not from a server")
    if not 1 <= version <= 4:
        raise SNTPError(f"NTP version {version}")
    if stratum == 0:
        code = ref_id.decode("ascii", errors="replace").strip("\0")
        raise SNTPError(f"kiss-of-death from the server ({code or 'no code'}): it refuses to serve time")
    if stratum > 15 or leap == 3:
        raise SNTPError("the server's own clock is not synchronised")
    sent_transmit = _PACKET.unpack_from(sent)[10]
    if origin != sent_transmit:
        raise _Unsolicited("the answer is not for our query (originate timestamp differs)")
    if transmit == 0 or receive == 0:
        raise SNTPError("the answer carries no time")
    t1, t2, t3, t4 = _from_ntp(sent_transmit), _from_ntp(receive), _from_ntp(transmit), received_at
    return Sample(offset=((t2 - t1) + (t3 - t4)) / 2, delay=max((t4 - t1) - (t3 - t2), 0.0), stratum=stratum)


async def query(server: str, *, port: int = NTP_PORT, timeout: float = 5.0,
                clock: Callable[[], float] = time.time) -> Sample:  # fmt: skip
    """Ask ``server`` (a name or address, optionally ``host:port``) for the time once."""
    host, _, port_text = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
    host = host or server
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, int(port_text or port), type=socket.SOCK_DGRAM)
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        sock.connect(address)
        sent = request(clock())
        await loop.sock_sendall(sock, sent)
        async with asyncio.timeout(timeout):
            while True:
                data = await loop.sock_recv(sock, 512)
                received_at = clock()
                with contextlib.suppress(_Unsolicited):
                    return parse_response(data, sent, received_at)
