"""A tiny NTP server for tests: answers every SNTP query on a loopback UDP port with its own clock
plus a fixed offset, from a background thread (so in-process CLI runs and node processes can ask it)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ichor.machined import sntp


def answer(query: bytes, *, ahead: float, stratum: int = 2) -> bytes:
    """A server-mode answer to ``query`` whose clock is ``ahead`` seconds ahead of ours."""
    origin = struct.unpack_from("!Q", query, 40)[0]
    now = sntp._to_ntp(time.time() + ahead)
    return struct.pack("!BBbbII4sQQQQ", (4 << 3) | 4, stratum, 6, -20, 0, 0, b"GPS\0", now, origin, now, now)


@contextmanager
def ntp_server(address: str = "127.0.0.1", *, ahead: float = 0.0, stratum: int = 2) -> Iterator[str]:
    """Serve until the block ends; yields ``<address>:<port>`` to query."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(512)
            except TimeoutError:
                continue
            if len(data) >= 48:
                sock.sendto(answer(data, ahead=ahead, stratum=stratum), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"{address}:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        sock.close()
