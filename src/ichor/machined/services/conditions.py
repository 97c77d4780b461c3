"""Service conditions read from resources (Talos's ``time sync``, ``etcd spec``, ``api certificates``)
and the simple health probes of the system services.

A condition is met when a resource says so; the waiting service shows Talos's words for it
(``Waiting for time sync``). Built on the state's watch, so nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ichor.machined.cosi import ResourceType, State
from ichor.machined.resources import TIME_STATUS_ID, TIME_STATUSES
from ichor.machined.services._conditions import TIME_SYNC, Condition

__all__ = ["listening", "resource_exists", "time_sync", "time_synced"]


def time_synced(state: State) -> bool:
    """``TimeStatuses/node`` says the clock is in sync (process nodes: the host's clock is)."""
    status = state.spec_of(TIME_STATUSES, TIME_STATUS_ID)
    return status is not None and status.synced


def time_sync(state: State) -> Condition:
    """Talos's ``time sync`` service condition: met once ``TimeStatuses/node`` is synced."""

    async def wait() -> None:
        async for _ in state.watch(TIME_STATUSES.default_namespace, TIME_STATUSES, TIME_STATUS_ID):
            if time_synced(state):
                return

    return Condition(TIME_SYNC, wait)


def resource_exists(state: State, rtype: ResourceType[Any], id: str, description: str) -> Condition:
    """Met once the resource ``rtype``/``id`` exists (e.g. ``etcd spec``, ``api certificates``)."""

    async def wait() -> None:
        async for _ in state.watch(rtype.default_namespace, rtype, id):
            if state.spec_of(rtype, id) is not None:
                return

    return Condition(description, wait)


def listening(address: str, port: int) -> Callable[[], Awaitable[None]]:
    """A health probe: something accepts TCP connections on ``address:port`` (apid, trustd)."""

    async def check() -> None:
        _, writer = await asyncio.open_connection(address, port)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    return check
