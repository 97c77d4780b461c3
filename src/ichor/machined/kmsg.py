"""The kernel's log (``/dev/kmsg``) as ``talosctl dmesg`` shows it on Talos: one line per record,
``<facility>: <priority>: [<time>]: <message>``.

Each ``read`` of ``/dev/kmsg`` returns one record ``<prio>,<seq>,<usec since boot>,<flags>;<text>``;
``EAGAIN`` means no more yet (followed by polling), ``EPIPE`` that records were overwritten
(skipped). Read-only; used on the metal platform, where the kernel is the node's own.

:func:`read_records` yields the raw records (from ``/dev/kmsg``, or from a regular file or pipe of
such lines, a record being a line and the continuation lines after it that start with a space) and
:func:`parse_record` reads one as go-kmsg (Talos's reader) does, for the kernel log Talos sends to
``KmsgLogConfig`` destinations.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

__all__ = ["KmsgRecord", "boot_time", "follow_kmsg", "format_record", "parse_record", "read_records"]

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
    *(f"local{n}" for n in range(8)),  # go-kmsg's names, as Talos prints them
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


def boot_time() -> float:
    """The Unix time the kernel booted (what a record's clock counts from)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


async def follow_kmsg(
    path: Path = Path("/dev/kmsg"), *, only_new: bool = False, follow: bool = False
) -> AsyncIterator[bytes]:
    booted = boot_time()
    async for record in read_records(path, only_new=only_new, follow=follow):
        yield format_record(record, booted)


async def read_records(
    path: Path, *, only_new: bool = False, follow: bool = False, poll_interval: float = 0.2
) -> AsyncIterator[bytes]:
    """The raw records of a kernel log, oldest first; with ``follow`` new ones as they come.

    ``/dev/kmsg`` gives one record per read; a regular file or a pipe holding the same lines (a
    test's stand-in) is split into records here."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    device = stat.S_ISCHR(os.fstat(fd).st_mode)
    pending = b""
    try:
        if only_new:
            os.lseek(fd, 0, os.SEEK_END)
        while True:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                chunk = None
            except BrokenPipeError:
                continue  # overwritten while we read: go on from the next one
            if chunk and device:
                yield chunk
                continue
            if chunk:
                pending += chunk
                records, pending = _split_records(pending)
                for record in records:
                    yield record
                continue
            if pending.endswith(b"\n") or (pending and not follow):
                yield pending  # nothing more to read: the last record is whole
                pending = b""
            if not follow:
                return
            await asyncio.sleep(poll_interval)
    finally:
        os.close(fd)


def _split_records(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete records of ``data`` (a line plus its continuation lines) and what is left: the last
    record stays pending until a following line shows it is complete."""
    lines = data.split(b"\n")
    rest = lines.pop()  # after the last newline: an unfinished line
    records: list[bytes] = []
    current = b""
    for line in lines:
        if line.startswith(b" ") and current:
            current += line + b"\n"
            continue
        if current:
            records.append(current)
        current = line + b"\n"
    return records, current + rest


@dataclass(frozen=True)
class KmsgRecord:
    """One kernel log record, as go-kmsg's ``Message``."""

    facility: str
    priority: str
    seq: int
    clock: int
    """Microseconds since boot."""
    message: str
    """The text after ``;``, unescaped, as go-kmsg keeps it (its newline and continuation lines)."""

    def timestamp(self, booted: float) -> datetime:
        return datetime.fromtimestamp(booted, UTC) + timedelta(microseconds=self.clock)


_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|\\)")


def parse_record(record: bytes) -> KmsgRecord:
    """``<prio>,<seq>,<usec>,<flags>;<text>``: ``ValueError`` when it is not a record."""
    header, found, body = record.partition(b";")
    fields = header.split(b",")
    if not found or len(fields) < 3:
        raise ValueError(f"not a kernel log record: {record[:80]!r}")
    prio, seq, clock = int(fields[0]), int(fields[1]), int(fields[2])
    facility = _FACILITIES[prio >> 3] if prio >> 3 < len(_FACILITIES) else str(prio >> 3)
    text = _ESCAPE.sub(lambda m: b"\\" if m.group(1) == b"\\" else bytes([int(m.group(1)[1:], 16)]), body)
    return KmsgRecord(
        facility=facility, priority=_PRIORITIES[prio & 7], seq=seq, clock=clock,
        message=text.decode("utf-8", errors="replace"),
    )  # fmt: skip
