"""Where apid sends a call: the backends' common shape, and the one that dials (a gRPC channel).

A channel backend is another node's apid (TLS) or, when apid does not run in machined's process,
machined's unix socket; :mod:`._inproc` is the in-process one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, Protocol

from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

from ._failure import BackendFailed, Failure, Metadata, connection_failure
from ._methods import Method

__all__ = ["Backend", "ChannelBackend"]


class Backend(Protocol):
    """Where apid sends a call: over a connection (:class:`ChannelBackend`) or in-process."""

    name: str

    def close(self) -> None: ...

    async def call(
        self,
        method: Method,
        requests: AsyncIterable[bytes],
        metadata: Metadata,
        deadline: Any,
        on_headers: Callable[[Metadata], Awaitable[None]],
        on_reply: Callable[[bytes], Awaitable[None]],
    ) -> Metadata: ...


class ChannelBackend:
    """One place calls can go over a connection: machined's unix socket or another node's apid
    (a pooled channel)."""

    def __init__(self, name: str, make_channel: Callable[[], Channel], dial_timeout: float) -> None:
        self.name = name
        self._make_channel = make_channel
        self._dial_timeout = dial_timeout
        self._channel: Channel | None = None
        self._connect_lock = asyncio.Lock()

    async def connected(self) -> Channel:
        channel = self._channel
        if channel is not None and channel._connected:
            # The common case, every call on a live connection: no lock, no timer (a timeout's
            # timer handle per call showed as ~3% of apid's CPU under load).
            return channel
        async with self._connect_lock:
            if self._channel is None:
                self._channel = self._make_channel()
            try:
                async with asyncio.timeout(self._dial_timeout):
                    await self._channel.__connect__()
            except (OSError, TimeoutError) as exc:
                raise BackendFailed(connection_failure(self.name, exc)) from exc
            return self._channel

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def call(
        self,
        method: Method,
        requests: AsyncIterable[bytes],
        metadata: Metadata,
        deadline: Any,
        on_headers: Callable[[Metadata], Awaitable[None]],
        on_reply: Callable[[bytes], Awaitable[None]],
    ) -> Metadata:
        """Make the call and relay its replies; returns the trailers, raises ``BackendFailed``."""
        channel = await self.connected()
        call = channel.request(
            method.path, method.cardinality, bytes, bytes, metadata=metadata, deadline=deadline
        )
        try:
            async with call:
                await call.send_request()
                async for message in requests:
                    await call.send_message(message)
                await call.end()
                try:
                    await call.recv_initial_metadata()
                finally:
                    # Also for a trailers-only error reply: its headers are empty then.
                    await on_headers(Metadata(call.initial_metadata or ()))
                async for reply in call:
                    await on_reply(reply)
                await call.recv_trailing_metadata()
                return Metadata(call.trailing_metadata or ())
        except GRPCError as exc:
            trailers = Metadata(call.trailing_metadata or ())
            details = exc.details if isinstance(exc.details, bytes) else None
            raise BackendFailed(Failure(exc.status, exc.message or "", details, trailers)) from exc
        except StreamTerminatedError as exc:
            raise BackendFailed(Failure(Status.UNAVAILABLE, f"error reading from server: {exc}")) from exc
        except TimeoutError as exc:
            # The caller's deadline, carried onto this hop (connecting has its own timeout).
            raise BackendFailed(Failure(Status.DEADLINE_EXCEEDED, "context deadline exceeded")) from exc
        except OSError as exc:
            raise BackendFailed(connection_failure(self.name, exc)) from exc
        except ProtocolError as exc:
            raise BackendFailed(Failure(Status.INTERNAL, f"protocol error: {exc}")) from exc
