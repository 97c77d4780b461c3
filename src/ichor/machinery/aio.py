"""asyncio helpers shared by the node's services, controllers and balancer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["race"]

T = TypeVar("T")


async def race(work: Awaitable[T], stop: asyncio.Event | Awaitable[Any]) -> tuple[bool, T | None]:
    """Await ``work`` unless ``stop`` (an event being set, or any awaitable finishing) comes first:
    ``(stopped, result)``; the loser is cancelled. ``work`` finishing first, or both at once, is
    ``(False, its result)`` (its exception raised)."""
    worker: asyncio.Future[Any] = asyncio.ensure_future(work)
    stopper: asyncio.Future[Any] = asyncio.ensure_future(
        stop.wait() if isinstance(stop, asyncio.Event) else stop
    )
    try:
        await asyncio.wait({worker, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (worker, stopper):
            if not task.done():
                task.cancel()
        await asyncio.gather(worker, stopper, return_exceptions=True)
    if worker.done() and not worker.cancelled():
        result: T = worker.result()
        return False, result
    return True, None
