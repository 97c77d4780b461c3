"""The node's event stream (``talosctl events``): sequence, phase, task, service and status events.

Each event gets an ``rs/xid``-style id (12 bytes: seconds, machine id, pid, counter, in base32hex,
20 characters, roughly time-ordered) as Talos's ids are, and an optional actor id that ties it to
the API call that caused it (``reboot --wait`` follows its own actor). A bounded history lets a
subscriber ask for the last N events, everything after an id, or the last N seconds.

A reader that must stay bounded while it cannot keep up (the event sink, while its endpoint is
down) keeps a position instead of a queue (:meth:`EventBus.since`, :meth:`EventBus.add_listener`):
what it can lose is what the history drops, never the node's memory.

This module only keeps and fans out events; what publishes them is up to the node.
"""

from __future__ import annotations

__all__ = ["INVALID_XID", "EventBus", "NodeEvent", "new_xid"]

import asyncio
import hashlib
import itertools
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

_B32HEX = "0123456789abcdefghijklmnopqrstuv"
_MACHINE = hashlib.sha256(socket.gethostname().encode()).digest()[:3]
_COUNTER = itertools.count(int.from_bytes(os.urandom(3), "big"))


def new_xid(now: datetime | None = None) -> str:
    """A 20-character xid: sortable by creation second, unique per process."""
    seconds = int((now or datetime.now(UTC)).timestamp())
    raw = (
        seconds.to_bytes(4, "big")
        + _MACHINE
        + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        + (next(_COUNTER) & 0xFFFFFF).to_bytes(3, "big")
    )
    number = int.from_bytes(raw, "big") << 4  # 96 bits -> 100 bits, 20 groups of 5
    return "".join(_B32HEX[(number >> shift) & 31] for shift in range(95, -5, -5))


INVALID_XID = "xid: invalid ID"
"""rs/xid's ``ErrInvalidID`` text, which Talos's Events wraps as ``error parsing tail_id: ...``."""


def _xid_bytes(xid: str) -> int:
    if len(xid) != 20 or any(ch not in _B32HEX for ch in xid):
        raise ValueError(INVALID_XID)
    number = 0
    for ch in xid:
        number = (number << 5) | _B32HEX.index(ch)
    return number >> 4


def xid_time(xid: str) -> datetime:
    """The creation second encoded in an xid; ``ValueError`` when it is not one."""
    seconds = _xid_bytes(xid) >> 64
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True)
class NodeEvent:
    id: str
    actor_id: str
    payload: Any  # a machine.*Event protobuf message
    at: datetime

    @property
    def type_url(self) -> str:
        name: str = self.payload.DESCRIPTOR.full_name
        return "talos/runtime/" + name


class EventBus:
    """Publish events; subscribers get history (as asked) then live events, in order."""

    def __init__(self, *, history: int = 1000, clock: Callable[[], datetime] | None = None) -> None:
        self._history: deque[NodeEvent] = deque(maxlen=history)
        self._subscribers: set[asyncio.Queue[NodeEvent]] = set()
        self._listeners: list[Callable[[], None]] = []
        self._published = 0
        self._clock = clock or (lambda: datetime.now(UTC))

    def publish(self, payload: Any, *, actor_id: str = "") -> NodeEvent:
        now = self._clock()
        event = NodeEvent(id=new_xid(now), actor_id=actor_id, payload=payload, at=now)
        self._history.append(event)
        self._published += 1
        for queue in self._subscribers:
            queue.put_nowait(event)
        for listener in list(self._listeners):
            listener()
        return event

    @property
    def published(self) -> int:
        """How many events were ever published: the position the next one will have."""
        return self._published

    @property
    def oldest_kept(self) -> int:
        """The position of the oldest event still in the history."""
        return self._published - len(self._history)

    def since(self, position: int) -> tuple[list[NodeEvent], int]:
        """Every kept event from ``position`` on (the n-th event published is at n-1), and how many
        events after ``position`` the bounded history no longer holds (lost to a slow reader)."""
        start = max(position, self.oldest_kept)
        return list(self._history)[start - self.oldest_kept :], start - position

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (no arguments, must not block) after each publish; a reader that keeps its
        own position (:meth:`since`) instead of a queue, so its backlog is never more than the history."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def history(self) -> list[NodeEvent]:
        """Every event still kept, oldest first."""
        return list(self._history)

    def _backlog(self, tail_events: int, tail_id: str, tail_seconds: int) -> list[NodeEvent]:
        """The history a subscriber asked for, as Talos's event buffer picks it: ``tail_events``
        first (-1 = all kept), else every event whose id sorts after ``tail_id`` (present or not),
        else every event created after the last ``tail_seconds`` (by its id's second), else none."""
        history = self.history()
        if tail_events < 0:
            return history
        if tail_events > 0:
            return history[max(0, len(history) - tail_events) :]
        if tail_id:
            _xid_bytes(tail_id)  # validates
            # xids in base32hex sort as their bytes do: seconds first, then machine, pid, counter.
            return [e for e in history if e.id > tail_id]
        if tail_seconds:
            since = self._clock() - timedelta(seconds=tail_seconds)
            return [e for e in history if xid_time(e.id) > since]
        return []

    async def subscribe(
        self, *, tail_events: int = 0, tail_id: str = "", tail_seconds: int = 0, actor_id: str = ""
    ) -> AsyncIterator[NodeEvent]:
        """Events from the requested history on, forever (until the caller stops iterating)."""
        queue: asyncio.Queue[NodeEvent] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            for event in self._backlog(tail_events, tail_id, tail_seconds):
                if not actor_id or event.actor_id == actor_id:
                    yield event
            while True:
                event = await queue.get()
                if not actor_id or event.actor_id == actor_id:
                    yield event
        finally:
            self._subscribers.discard(queue)
