"""How apid relays a caller's request stream: one message at a time, bounded, shared by fan-out.

Async iterators here are classes, not async generators: a generator left unfinished (a unary
handler reads one message, never the end) is closed by asyncio's finalizer hook, which costs a
task and a self-pipe write per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator

from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.limits import receive

from ._failure import RequestRefused

__all__ = ["Fanout", "Requests"]


class Requests:
    """The caller's messages, one at a time, each refused from its length prefix if over ``limit``."""

    def __init__(self, stream: Stream[bytes, bytes], limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._ended = False

    def __aiter__(self) -> Requests:
        return self

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        try:
            message = await receive(self._stream, self._limit)
        except GRPCError as exc:
            raise RequestRefused(exc) from None
        if message is None:
            self._ended = True
            raise StopAsyncIteration
        return message  # type: ignore[no-any-return]


class _SlotMessages:
    """One backend's messages from its :class:`Fanout` slot."""

    def __init__(self, slot: asyncio.Queue[bytes | None] | None) -> None:
        self._slot = slot

    def __aiter__(self) -> _SlotMessages:
        return self

    async def __anext__(self) -> bytes:
        message = await self._slot.get() if self._slot is not None else None
        if message is None:
            self._slot = None
            raise StopAsyncIteration
        return message


class Fanout:
    """Relays the caller's messages to every backend of a one-to-many call as they arrive.

    Each backend has a one-message slot; the reader waits until every open slot has taken a
    message before reading the next. So the caller's messages are shared, not copied per node, and
    at most three are held at once (one being read, one in a slot, one being written to the slowest
    node) however long the stream is: memory is bounded by message size, never by stream length.
    A backend that ends (or fails) closes its slot and is no longer waited for.
    """

    def __init__(self, count: int) -> None:
        self._slots: list[asyncio.Queue[bytes | None] | None] = [asyncio.Queue(1) for _ in range(count)]

    async def pump(self, messages: AsyncIterable[bytes]) -> None:
        async for message in messages:
            for slot in self._open():
                await slot.put(message)
        for slot in self._open():
            await slot.put(None)

    def _open(self) -> list[asyncio.Queue[bytes | None]]:
        return [slot for slot in self._slots if slot is not None]

    def messages(self, index: int) -> AsyncIterator[bytes]:
        return _SlotMessages(self._slots[index])

    def close(self, index: int) -> None:
        slot, self._slots[index] = self._slots[index], None
        if slot is not None:
            while not slot.empty():  # frees a reader blocked on put()
                slot.get_nowait()
