"""``talosctl pcap``: capture a link's packets with a raw AF_PACKET socket, as a classic pcap stream.

The stream is what Talos sends: a pcap file (magic ``a1b2c3d4``, version 2.4, link type Ethernet),
its global header first, then one record per packet, so ``talosctl pcap -o x.pcap`` is readable by
tcpdump and tshark. The socket is opened in the calling process's network namespace: machined
only captures on a node with a namespace of its own (on a process node the links are the host's).

Exceptions: :class:`CaptureError` (unknown interface, no permission, a BPF filter).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncGenerator, Callable

__all__ = ["CaptureError", "capture", "global_header", "record"]

_ETH_P_ALL = 0x0003
_LINKTYPE_ETHERNET = 1
_MAGIC = 0xA1B2C3D4
_DEFAULT_SNAPLEN = 65535
_SOL_PACKET = 263
_PACKET_ADD_MEMBERSHIP = 1
_PACKET_MR_PROMISC = 1
_PACKET_OUTGOING = 4


class CaptureError(Exception):
    """The capture cannot start: says what is wrong with the request."""


def global_header(snaplen: int) -> bytes:
    """The pcap file header: magic, version 2.4, zone 0, sigfigs 0, snaplen, Ethernet."""
    return struct.pack("<IHHiIII", _MAGIC, 2, 4, 0, 0, snaplen, _LINKTYPE_ETHERNET)


def record(packet: bytes, snaplen: int, when: float) -> bytes:
    """One packet record: timestamp (s, µs), captured length, original length, the bytes."""
    seconds = int(when)
    micros = int((when - seconds) * 1_000_000)
    data = packet[:snaplen]
    return struct.pack("<IIII", seconds, micros, len(data), len(packet)) + data


def _open(interface: str, promiscuous: bool) -> socket.socket:
    try:
        index = socket.if_nametoindex(interface)
    except OSError as err:
        raise CaptureError(f"interface {interface!r} does not exist on the node (-i)") from err
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    except PermissionError as err:
        raise CaptureError(f"capturing needs CAP_NET_RAW: {err}") from err
    try:
        sock.bind((interface, _ETH_P_ALL))
        if promiscuous:
            mreq = struct.pack("iHH8s", index, _PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(_SOL_PACKET, _PACKET_ADD_MEMBERSHIP, mreq)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def capture(
    interface: str,
    *,
    promiscuous: bool = False,
    snaplen: int = 0,
    bpf_filter: int = 0,
    clock: Callable[[], float] = time.time,
) -> AsyncGenerator[bytes, None]:
    """The pcap stream of ``interface``: the header, then a record per packet, until the caller stops.

    Loopback is captured too, but a packet on ``lo`` appears once (its outgoing copy is skipped).
    """
    if bpf_filter:
        raise CaptureError("BPF filters are not supported by Ichor yet: capture without --bpf-filter")
    snaplen = snaplen or _DEFAULT_SNAPLEN
    if not 0 < snaplen <= 262144:
        raise CaptureError(f"snap length {snaplen} is outside 1..262144 (--snaplen)")
    sock = _open(interface, promiscuous)
    loop = asyncio.get_running_loop()
    try:
        yield global_header(snaplen)
        while True:
            packet, address = await loop.sock_recvfrom(sock, 262144)
            if interface == "lo" and address[2] == _PACKET_OUTGOING:
                continue
            yield record(packet, snaplen, clock())
    finally:
        sock.close()
