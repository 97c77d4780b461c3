"""Logging destinations: every service log line sent to ``machine.logging.destinations`` (004:712-722).

As Talos 1.7 does it (``runtime/logging``): each line of a service log becomes an event
(:func:`parse_log_line`: a line that is, or ends in, a JSON object gives its fields, ``time``/``ts``,
``level``, ``msg`` and ``err``), tagged ``talos-service: <id>``, and goes to every destination as one
JSON object (:func:`json_line`) with ``msg``, ``talos-time``, ``talos-level``, the line's own fields
and the destination's ``extraTags``: newline-delimited over TCP, one datagram per event over UDP
(``json_lines``). An event is retried every second until one destination took it; the logs are
followed from their start, so what was logged before a destination was configured is sent too.

The service logs are the files of ``Layout.log_dir`` (``<id>.log``) but the console log, which is
Ichor's stand-in for the kernel log, not a service's. This module only reads those files; the
addresses it sends to are the ones the config names.
"""

from __future__ import annotations

__all__ = [
    "JsonLinesSender",
    "LogEvent",
    "LogShipper",
    "SendError",
    "json_line",
    "parse_log_line",
    "ship_logs",
]

import asyncio
import contextlib
import json
import math
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ichor.machined.cosi import EventType, State, format_time
from ichor.machined.gojson import go_json
from ichor.machined.logfile import follow_file
from ichor.machined.resources import ACTIVE_CONFIG_ID, MACHINE_CONFIGS

SEND_TIMEOUT = 5.0
"""Talos's per-attempt send timeout."""
RETRY_INTERVAL = 1.0
_MAX_EPOCH = datetime(3000, 1, 1, tzinfo=UTC).timestamp()
_LEVELS = ("debug", "info", "warn", "error", "dpanic", "panic", "fatal")  # zap's, lowest first
NOT_SERVICE_LOGS = frozenset({"console"})


@dataclass
class LogEvent:
    """One log line as Talos's ``runtime.LogEvent``."""

    msg: str
    time: datetime
    level: str = "info"
    fields: dict[str, Any] = field(default_factory=dict)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_log_line(line: bytes, now: datetime) -> LogEvent:
    """Talos's ``parseLogLine``: the line's JSON (all of it, or what follows its first ``{``) gives
    the event's time, level, message and fields; any other line is the message itself."""
    text = line.decode("utf-8", errors="replace").strip()
    msg, fields = "", _json_object(text)
    if fields is None and (at := text.find("{")) != -1:
        fields = _json_object(text[at:])
        if fields is not None:
            msg = text[:at].strip()
    if fields is None:
        return LogEvent(msg=text, time=now)
    event = LogEvent(msg=msg, time=now, fields=fields)
    for key in ("time", "ts"):
        when = _time_of(fields.get(key))
        if when is not None:
            event.time = when
            del fields[key]
            break
    level = fields.get("level")
    if isinstance(level, str):
        level = "warn" if level.lower() == "warning" else level.lower()
        if level in _LEVELS:
            event.level = level
            del fields["level"]
    if isinstance(text_msg := fields.get("msg"), str):
        event.msg = (event.msg + " " if event.msg else "") + text_msg.strip()
        del fields["msg"]
    if isinstance(error := fields.get("err"), str):
        if _LEVELS.index(event.level) < _LEVELS.index("warn"):
            event.level = "warn"
        event.msg = (event.msg + ": " if event.msg else "") + error.strip()
        del fields["err"]
    return event


def _time_of(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed.astimezone(UTC) if parsed.tzinfo else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if math.modf(seconds)[1] > _MAX_EPOCH:
            seconds /= 1000  # milliseconds since the epoch
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def json_line(event: LogEvent, extra_tags: Mapping[str, str]) -> bytes:
    """The JSON object Talos's ``json_lines`` sender writes for ``event`` (without the newline)."""
    fields = dict(event.fields)
    fields |= {"msg": event.msg, "talos-time": format_time(event.time), "talos-level": event.level}
    fields |= extra_tags
    return go_json(fields).encode()


class SendError(Exception):
    """A destination did not take an event; ``retry``: sending it again may succeed."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class Sender(Protocol):
    async def send(self, event: LogEvent) -> None: ...

    async def close(self) -> None: ...


class JsonLinesSender:
    """``format: json_lines`` to ``tcp://host:port`` or ``udp://host:port``, one connection kept."""

    def __init__(self, endpoint: str, extra_tags: Mapping[str, str] | None = None) -> None:
        url = urlsplit(endpoint)
        if url.scheme not in ("tcp", "udp") or url.hostname is None or url.port is None:
            raise ValueError(
                f"unsupported logging endpoint {endpoint!r} (tcp://host:port or udp://host:port)"
            )
        self.endpoint, self.scheme, self.host, self.port = endpoint, url.scheme, url.hostname, url.port
        self.extra_tags = dict(extra_tags or {})
        self._writer: asyncio.StreamWriter | None = None
        self._udp: socket.socket | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"JsonLinesSender({self.endpoint!r})"

    async def send(self, event: LogEvent) -> None:
        data = json_line(event, self.extra_tags)
        async with self._lock:
            try:
                async with asyncio.timeout(SEND_TIMEOUT):
                    if self.scheme == "tcp":
                        await self._send_tcp(data + b"\n")
                    else:
                        await self._send_udp(data)
            except (OSError, TimeoutError) as err:
                await self._drop()
                raise SendError(
                    f"{self.endpoint}: {err.strerror if isinstance(err, OSError) else 'timed out'}"
                ) from err

    async def _send_tcp(self, data: bytes) -> None:
        if self._writer is None:
            _, self._writer = await asyncio.open_connection(self.host, self.port)
        self._writer.write(data)
        await self._writer.drain()

    async def _send_udp(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        if self._udp is None:
            family, kind, proto, _, address = (
                await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_DGRAM)
            )[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
            except OSError:
                sock.close()
                raise
            self._udp = sock
        await loop.sock_sendall(self._udp, data)

    async def _drop(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await writer.wait_closed()
        udp, self._udp = self._udp, None
        if udp is not None:
            udp.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()


class LogShipper:
    """Follows every service log under ``log_dir`` and sends each line to the current senders."""

    def __init__(
        self,
        log_dir: Path,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        poll_interval: float = 1.0,
    ) -> None:
        self.log_dir = log_dir
        self.now = now
        self.poll_interval = poll_interval
        self._senders: tuple[Sender, ...] = ()
        self._have_senders = asyncio.Event()

    async def set_senders(self, senders: Sequence[Sender]) -> None:
        """Use ``senders`` from now on (none: events wait); the previous ones are closed."""
        old, self._senders = self._senders, tuple(senders)
        if self._senders:
            self._have_senders.set()
        else:
            self._have_senders.clear()
        for sender in old:
            await sender.close()

    async def run(self) -> None:
        """Until cancelled: once there is a destination, follow each service log as it appears."""
        followed: set[Path] = set()
        try:
            async with asyncio.TaskGroup() as group:
                while True:
                    await self._have_senders.wait()  # no destination: nothing is read at all
                    for path in sorted(self.log_dir.glob("*.log")) if self.log_dir.is_dir() else ():
                        if path not in followed and path.stem not in NOT_SERVICE_LOGS:
                            followed.add(path)
                            group.create_task(self._follow(path), name=f"ship {path.name}")
                    await asyncio.sleep(self.poll_interval)
        finally:
            await self.set_senders(())

    async def _follow(self, path: Path) -> None:
        async for line in follow_file(path, follow=True, poll_interval=0.2):
            if not line.strip():
                continue
            event = parse_log_line(line, self.now())
            event.fields["talos-service"] = path.stem
            await self._resend(event)

    async def _resend(self, event: LogEvent) -> None:
        """Talos's ``resend``: every sender at once; done when one took it or a failure says not to
        retry, else again a second later."""
        while True:
            await self._have_senders.wait()
            results = await asyncio.gather(*(s.send(event) for s in self._senders), return_exceptions=True)
            if any(r is None or (isinstance(r, SendError) and not r.retry) for r in results):
                return
            await asyncio.sleep(RETRY_INTERVAL)


def destinations_of(state: State) -> tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]:
    """``machine.logging.destinations`` of the active config, as (endpoint, format, extra tags)."""
    spec = state.spec_of(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
    config = spec.v1alpha1 if spec is not None else None
    machine = config.machine if config is not None else None
    logging = machine.logging if machine is not None else None
    return tuple(
        (
            d.endpoint or "",
            d.format or "",
            tuple(sorted((k, str(v)) for k, v in (d.extra_tags or {}).items())),
        )
        for d in (logging.destinations or [] if logging is not None else [])
    )


async def ship_logs(state: State, log_dir: Path) -> None:
    """Until cancelled: the node's service logs to the config's destinations, following its changes."""
    shipper = LogShipper(log_dir)
    current: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()
    async with asyncio.TaskGroup() as group:
        group.create_task(shipper.run(), name="ship service logs")
        async for event in state.watch_kind(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS):
            if event.type is EventType.ERRORED:
                raise RuntimeError(f"machine config watch: {event.error}")
            wanted = destinations_of(state)
            if wanted == current:
                continue
            current = wanted
            senders = []
            for endpoint, _format, tags in wanted:  # json_lines is the one format (validated)
                with contextlib.suppress(ValueError):
                    senders.append(JsonLinesSender(endpoint, dict(tags)))
            await shipper.set_senders(senders)
