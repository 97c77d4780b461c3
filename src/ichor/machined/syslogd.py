"""syslogd: Talos 1.7's syslog receiver on ``/dev/log`` (004:724-728).

A unix datagram socket; every message is parsed as RFC 5424 (``<PRI>1 ...``) or, failing that
detection, RFC 3164, best effort as Talos does, and written to the ``syslogd`` service log as one
line of JSON with Talos's keys (Go's ``json.Marshal`` of a map: sorted keys, ``<>&`` escaped):

* RFC 3164: ``content``, ``facility``, ``hostname`` (``localhost`` when the message names none),
  ``priority``, ``severity``, ``tag`` (``unknown`` when there is none), ``timestamp`` (this year,
  UTC);
* RFC 5424: ``app_name``, ``facility``, ``hostname``, ``message``, ``msg_id``, ``priority``,
  ``proc_id``, ``severity``, ``structured_data``, ``timestamp``, ``version``.

A datagram that is not syslog is skipped, as Talos skips it. This module never sends anything.
"""

from __future__ import annotations

__all__ = ["bind", "parse", "serve"]

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ichor.machined.cosi import format_time
from ichor.machined.gojson import go_json

_PRI = re.compile(rb"<(\d{1,3})>")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_RFC3164_TIME = re.compile(r"([A-Z][a-z]{2}) ( \d|\d\d) (\d\d):(\d\d):(\d\d)")
READ_SIZE = 65536


def parse(data: bytes, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> dict[str, Any] | None:
    """A syslog datagram as Talos's fields; None when it is not syslog (no ``<PRI>``)."""
    match = _PRI.match(data)
    if match is None:
        return None
    priority = int(match[1])
    if priority > 191:
        return None
    rest = data[match.end() :].decode("utf-8", errors="replace")
    if rest.startswith("1 "):
        return _rfc5424(priority, rest[2:])
    return _rfc3164(priority, rest, now())


def _rfc3164(priority: int, rest: str, now: datetime) -> dict[str, Any]:
    """Talos's best effort: a tag is present only with ``name[pid]:``; without one the tag is
    ``unknown`` and the whole text after the timestamp is the content."""
    fields: dict[str, Any] = {"priority": priority, "facility": priority // 8, "severity": priority % 8}
    stamp = _RFC3164_TIME.match(rest)
    if stamp is None or stamp[1] not in _MONTHS:
        timestamp, body, tagged, hostname = now.replace(microsecond=0), rest, False, "localhost"
    else:
        day = int(stamp[2])
        timestamp = datetime(
            now.year, _MONTHS[stamp[1]], day, int(stamp[3]), int(stamp[4]), int(stamp[5]), tzinfo=UTC
        )
        body = rest[stamp.end() :].removeprefix(" ")
        head, sep, _ = rest.partition("]:")
        tagged = bool(sep)
        # Talos: a hostname is there when the text before "]:" has more than three spaces, unless
        # the timestamp's day is space-padded (the two-space form).
        hostname = "localhost"
        if tagged and "  " not in head and head.count(" ") > 3:
            hostname, _, body = body.partition(" ")
    tag = "unknown"
    if tagged:
        tag, body = _tag(body)
    fields |= {
        "hostname": hostname,
        "tag": tag,
        "content": body.strip(" \n\x00"),
        "timestamp": format_time(timestamp),
    }
    return fields


def _tag(body: str) -> tuple[str, str]:
    """The tag (up to ``[``, ``:`` or a space) and the content after ``: ``."""
    end = next((i for i, c in enumerate(body) if c in ": "), len(body))
    if end == len(body):
        return "", body
    bracket = body.find("[", 0, end)
    tag = body[:bracket] if bracket != -1 else body[:end]
    content = body[end + 1 :]
    return tag, content.removeprefix(" ")


def _rfc5424(priority: int, rest: str) -> dict[str, Any] | None:
    parts = rest.split(" ", 5)
    if len(parts) < 5:
        return None
    stamp, hostname, app_name, proc_id, msg_id = parts[:5]
    tail = parts[5] if len(parts) > 5 else ""
    structured, message = _structured_data(tail)
    if structured is None:
        return None
    if stamp == "-":
        timestamp = "0001-01-01T00:00:00Z"  # Go's zero time
    else:
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        timestamp = _with_offset(when) if when.utcoffset() else format_time(when)
    return {
        "priority": priority, "facility": priority // 8, "severity": priority % 8, "version": 1,
        "timestamp": timestamp, "hostname": hostname, "app_name": app_name, "proc_id": proc_id,
        "msg_id": msg_id, "structured_data": structured, "message": message.removeprefix("\ufeff").rstrip("\n\x00"),
    }  # fmt: skip


def _with_offset(value: datetime) -> str:
    """Go's RFC 3339 (nano) of a time in a fixed zone: fraction without trailing zeros, ``+hh:mm``."""
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    offset = value.strftime("%z")
    return text + offset[:3] + ":" + offset[3:]


def _structured_data(tail: str) -> tuple[str | None, str]:
    """``-`` or one or more ``[...]`` elements (``\\]`` escaped inside values), then the message."""
    if tail.startswith("-"):
        return "-", tail[2:] if tail.startswith("- ") else tail[1:]
    at, quoted = 0, False
    while at < len(tail) and tail[at] == "[":
        at += 1
        while at < len(tail):
            char = tail[at]
            if char == "\\" and quoted:
                at += 2
                continue
            if char == '"':
                quoted = not quoted
            elif char == "]" and not quoted:
                break
            at += 1
        if at >= len(tail):
            return None, ""
        at += 1
    if at == 0:
        return None, ""
    return tail[:at], tail[at + 1 :] if tail[at : at + 1] == " " else tail[at:]


def bind(path: Path) -> socket.socket:
    """The ``/dev/log`` datagram socket at ``path`` (a stale one, or an empty directory a bind mount
    made there, replaced), writable by every user."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()  # made by a container runtime for a bind mount that came first (only if empty)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(os.fspath(path))
        path.chmod(0o666)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, READ_SIZE)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve(path: Path, log: IO[str], *, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
    """Receive on ``path`` until cancelled, one JSON line in ``log`` per syslog message."""
    sock = bind(path)
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await loop.sock_recv(sock, READ_SIZE)
            fields = parse(data, now=now)
            if fields is not None:
                log.write(go_json(fields) + "\n")
                log.flush()
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
