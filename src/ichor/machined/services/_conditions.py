"""Conditions a service waits for before it starts: a human description plus an awaitable.

The description is what ``talosctl services`` shows after "Waiting for"; Talos's own words are
kept as constants (``time sync``, ``network``, ``api certificates``, ``etcd spec``) so machined builds
its conditions from COSI watches with the texts users know. This module never looks at resources
itself: a condition is whatever awaitable machined hands in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ichor.machined.cosi import Sleep

__all__ = [
    "API_CERTIFICATES",
    "ETCD_SPEC",
    "NETWORK",
    "TIME_SYNC",
    "Condition",
    "event_is_set",
    "file_exists",
    "join_descriptions",
]

TIME_SYNC = "time sync"
NETWORK = "network"
API_CERTIFICATES = "api certificates"
ETCD_SPEC = "etcd spec"


@dataclass(frozen=True)
class Condition:
    """``description`` while unmet; ``wait()`` returns once met (raises if it never can be).

    ``describe``, when given, overrides ``description`` with text that changes while waiting
    (a service dependency reads ``to be registered`` until the service is loaded).
    """

    description: str
    wait: Callable[[], Awaitable[None]]
    describe: Callable[[], str] | None = None

    def __str__(self) -> str:
        return self.describe() if self.describe is not None else self.description


def join_descriptions(conditions: list[Condition]) -> str:
    """Talos joins the unmet parts with ", " (``service "cri" to be "up", time sync, network``)."""
    return ", ".join(str(c) for c in conditions)


def event_is_set(event: asyncio.Event, description: str) -> Condition:
    """A condition met once ``event`` is set (machined sets it from a COSI watch)."""

    async def wait() -> None:
        await event.wait()

    return Condition(description, wait)


def file_exists(
    path: Path,
    *,
    display: str | None = None,
    poll_interval: float = 0.2,
    sleep: Sleep = asyncio.sleep,
) -> Condition:
    """``file "<p>" to exist``: ``display`` is the Talos path shown to users (defaults to ``path``)."""

    async def wait() -> None:
        while not path.exists():
            await sleep(poll_interval)

    return Condition(f'file "{display or path}" to exist', wait)
