"""How a backend call that did not succeed is carried inside apid, and how dial errors read.

Both kinds of backend (a gRPC channel, ``_channel.ChannelBackend``, and
:class:`ichor.machined.apid._inproc.InProcessBackend`) raise :class:`BackendFailed`; apid turns it
into the caller's trailers (one-to-one) or a node's in-band error (one-to-many).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from multidict import MultiDict

Metadata = MultiDict[str | bytes]


@dataclass(frozen=True)
class Failure:
    """A backend call that did not succeed, as apid reports it."""

    status: Status
    message: str
    details: bytes | None = None
    trailers: Metadata | None = None


class BackendFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class RequestRefused(Exception):
    """The caller's request cannot be forwarded (too large a message); ends the whole call."""

    def __init__(self, error: GRPCError) -> None:
        super().__init__(error.message)
        self.error = error


def connection_failure(where: str, exc: BaseException) -> Failure:
    """``exc`` from dialling ``where``, shaped like grpc-go's dial errors (what Talos users know)."""
    if isinstance(exc, ssl.SSLError):
        reason = f"transport: authentication handshake failed: {exc.reason or exc}"
    elif isinstance(exc, TimeoutError):
        reason = f"transport: Error while dialing: dial {where}: i/o timeout"
    else:
        # asyncio's strerror repeats the address; the errno text is what Go prints.
        errno = exc.errno if isinstance(exc, OSError) else None
        text = os.strerror(errno) if errno else str(exc)
        reason = f"transport: Error while dialing: dial {where}: connect: {text.lower()}"
    return Failure(Status.UNAVAILABLE, f'connection error: desc = "{reason}"')
