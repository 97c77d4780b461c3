"""Message-size limits checked before a message's body is read, for every Ichor gRPC server that
a caller on the network can reach (apid, maintenance mode, trustd, the discovery service).

grpclib reads a whole message into memory before its codec sees it, so the 4-byte length prefix
of one message could make a server buffer up to 4 GiB. :func:`receive` reads the 5-byte prefix,
refuses a message over the limit (``RESOURCE_EXHAUSTED``, grpc-go's wording, so talosctl users
see the text they know) and only then reads the body; a request that ends inside a prefix or a
body is ``INTERNAL`` (unexpected EOF), never passed on cut short; a body that is not the
method's protobuf message is ``INVALID_ARGUMENT``. Until the body is read HTTP/2 flow control
holds the peer to one stream window (grpclib acknowledges data only as it is consumed), so a
refused call costs at most that window.

:func:`limit_requests` gives every handler of grpclib servables a stream whose ``recv_message``
(and iteration) go through :func:`receive`. Uses grpclib 0.4's ``Stream._stream``, ``_codec`` and
``_recv_type``; ``tests/test_grpc_limits.py`` pins the behaviour.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from grpclib.const import Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

__all__ = [
    "MAX_MESSAGE_SIZE",
    "limit_requests",
    "receive",
    "stop_request",
    "too_large",
    "truncated",
    "undecodable",
]

#: Talos's ``constants.GRPCMaxMessageSize``: apid's MaxRecvMsgSize and talosctl's MaxCallRecvMsgSize.
MAX_MESSAGE_SIZE = 32 * 1024 * 1024

_PREFIX = struct.Struct(">?I")


def too_large(size: int, limit: int) -> GRPCError:
    """The refusal grpc-go sends for a message of ``size`` bytes over ``limit``."""
    return GRPCError(
        Status.RESOURCE_EXHAUSTED, f"grpc: received message larger than max ({size} vs. {limit})"
    )


def undecodable(message_type: Any, error: Exception) -> GRPCError:
    """The refusal for a request body that is not ``message_type`` (grpc-go's ``InvalidArgument``)."""
    name = getattr(getattr(message_type, "DESCRIPTOR", None), "full_name", "the request message")
    return GRPCError(Status.INVALID_ARGUMENT, f"grpc: error unmarshalling request: {name}: {error}")


def truncated(got: int, size: int, what: str) -> GRPCError:
    """The refusal for a request that ended inside a message (grpc-go's ``Internal``: unexpected EOF)."""
    return GRPCError(
        Status.INTERNAL, f"grpc: the request ended {got} bytes into a {size}-byte {what}: unexpected EOF"
    )


async def receive(stream: Stream[Any, Any], limit: int = MAX_MESSAGE_SIZE) -> Any:
    """The caller's next message (decoded by the stream's codec), or ``None`` at the end."""
    h2_stream = stream._stream
    prefix = await _read(h2_stream, _PREFIX.size, "length prefix")
    if not prefix:
        return None
    compressed, size = _PREFIX.unpack(prefix)
    if compressed:
        raise GRPCError(Status.UNIMPLEMENTED, "grpc: compressed messages are not supported")
    if size > limit:
        raise too_large(size, limit)
    body = await _read(h2_stream, size, "message")
    try:
        return stream._codec.decode(body, stream._recv_type)
    except DecodeError as exc:
        raise undecodable(stream._recv_type, exc) from None


async def _read(h2_stream: Any, size: int, what: str) -> bytes:
    """``size`` bytes of the request, ``b""`` at its end, or :func:`truncated` if it ends within them."""
    try:
        data = bytes(await h2_stream.recv_data(size))
    except AssertionError:  # grpclib's Buffer.read: "Received less data than expected"
        raise truncated(h2_stream.buffer._acked_size, size, what) from None
    if not data and what == "message" and size:  # the end came right after the prefix
        raise truncated(0, size, what)
    return data


def stop_request(stream: Stream[Any, Any]) -> None:
    """After a complete answer, tell a caller still sending its request to stop.

    RST_STREAM(NO_ERROR) once the trailers are out, as grpc-go's server does (RFC 9113 §8.1):
    otherwise the rest of the request keeps arriving, only to be read and dropped.
    """
    h2_stream = stream._stream
    if h2_stream.closable:  # the caller has not ended its side
        h2_stream.reset_nowait()


class _LimitedStream:
    """A handler's view of its stream: everything passes through but receiving is bounded."""

    def __init__(self, stream: Stream[Any, Any], limit: int) -> None:
        self._inner = stream
        self._limit = limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def recv_message(self) -> Any:
        return await receive(self._inner, self._limit)

    def __aiter__(self) -> _LimitedStream:
        return self

    async def __anext__(self) -> Any:
        message = await self.recv_message()
        if message is None:
            raise StopAsyncIteration
        return message


_HandlerFunc = Callable[[Any], Coroutine[Any, Any, None]]


class _LimitedServable:
    def __init__(self, servable: Any, limit: int) -> None:
        self._servable = servable
        self._limit = limit

    def __mapping__(self) -> dict[str, Handler]:
        return {
            path: handler._replace(func=self._wrap(handler.func))
            for path, handler in self._servable.__mapping__().items()
        }

    def _wrap(self, func: _HandlerFunc) -> _HandlerFunc:
        limit = self._limit

        async def handle(stream: Stream[Any, Any]) -> None:
            await func(_LimitedStream(stream, limit))

        return handle


def limit_requests(servables: Iterable[Any], limit: int = MAX_MESSAGE_SIZE) -> list[Any]:
    """``servables`` for ``grpclib.server.Server`` whose handlers refuse messages over ``limit``."""
    return [_LimitedServable(servable, limit) for servable in servables]
