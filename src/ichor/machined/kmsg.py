"""The kernel's log (``/dev/kmsg``) as ``talosctl dmesg`` shows it on Talos: one line per record,
``<facility>: <priority>: [<time>]: <message>``.

Each ``read`` of ``/dev/kmsg`` returns one record ``<prio>,<seq>,<usec since boot>,<flags>;<text>``;
``EAGAIN`` means no more yet (followed by polling), ``EPIPE`` that records were overwritten
(skipped). Read-only; used on the metal platform, where the kernel is the node's own.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["follow_kmsg", "format_record"]

_FACILITIES = (
    "kern",
    "user",
    "mail",
    "daemon",
    "auth",
    "syslog",
    "lpr",
    "news",
    "uucp",
    "cron",
    "authpriv",
    "ftp",
)
_PRIORITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


def format_record(record: bytes, boot_time: float) -> bytes:
    """One ``/dev/kmsg`` record as Talos's dmesg line (continuation lines dropped)."""
    header, _, body = record.partition(b";")
    fields = header.split(b",")
    try:
        prio, usec = int(fields[0]), int(fields[2])
    except (IndexError, ValueError):
        return record.rstrip(b"\n") + b"\n"
    message = body.split(b"\n", 1)[0].decode(errors="replace")
    facility = _FACILITIES[prio >> 3] if prio >> 3 < len(_FACILITIES) else str(prio >> 3)
    stamp = datetime.fromtimestamp(boot_time + usec / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{facility}: {_PRIORITIES[prio & 7]:>7}: [{stamp}]: {message}\n".encode()


async def follow_kmsg(
    path: Path = Path("/dev/kmsg"), *, only_new: bool = False, follow: bool = False
) -> AsyncIterator[bytes]:
    boot_time = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if only_new:
            os.lseek(fd, 0, os.SEEK_END)
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                if not follow:
                    return
                await asyncio.sleep(0.2)
                continue
            except BrokenPipeError:
                continue  # overwritten while we read: go on from the next one
            if not record:
                return
            yield format_record(record, boot_time)
    finally:
        os.close(fd)
