"""Service states, events and health as values (Talos ``system/events`` and ``system/health``).

Values only: nothing here runs, waits or reads the clock by itself.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "MAX_EVENTS_TO_KEEP",
    "EventHistory",
    "HealthStatus",
    "ServiceEvent",
    "ServiceState",
]

MAX_EVENTS_TO_KEEP = 64
"""Events kept per service (Talos ``events.MaxEventsToKeep``)."""


class ServiceState(enum.IntEnum):
    """A service's state; the numbers are the ``ServiceStateEvent.action`` values on the wire."""

    INITIALIZED = 0
    PREPARING = 1
    WAITING = 2
    RUNNING = 3
    STOPPING = 4
    FINISHED = 5
    FAILED = 6
    SKIPPED = 7
    STARTING = 8

    def __str__(self) -> str:
        # Talos prints "Running", "Finished", ... in `talosctl services` and event messages.
        return self.name.capitalize()

    @property
    def is_down(self) -> bool:
        """A terminal state: nothing of the service is running any more."""
        return self in (ServiceState.FAILED, ServiceState.FINISHED, ServiceState.SKIPPED)


@dataclass(frozen=True)
class HealthStatus:
    """Health as Talos reports it: ``healthy`` None means unknown (not checked yet, or no check)."""

    healthy: bool | None = None
    last_message: str = ""
    last_change: datetime | None = None

    @property
    def unknown(self) -> bool:
        return self.healthy is None


@dataclass(frozen=True)
class ServiceEvent:
    """One entry of a service's history, and what subscribers receive (``ServiceStateEvent``)."""

    service: str
    state: ServiceState
    message: str
    timestamp: datetime
    health: HealthStatus


class EventHistory:
    """The last :data:`MAX_EVENTS_TO_KEEP` events of one service, oldest first."""

    def __init__(self, size: int = MAX_EVENTS_TO_KEEP) -> None:
        self._events: deque[ServiceEvent] = deque(maxlen=size)

    def push(self, event: ServiceEvent) -> None:
        self._events.append(event)

    def __iter__(self) -> Iterator[ServiceEvent]:
        return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def last(self, count: int) -> list[ServiceEvent]:
        return list(self._events)[-count:] if count > 0 else []
