"""apid's way to machined when both run in one process: the call is made in-process, no HTTP/2 hop.

Talos's apid reaches machined over machined's unix socket. Ichor runs apid inside machined, so that
hop encoded and decoded every call a second time as HTTP/2 in the same process: 25-30% of a
control plane's CPU under load (py-spy during ``benchmarks/soak.py``). :class:`MachineApi` is what
the machined service publishes while it serves: its handlers by method path.
:class:`InProcessBackend` calls a handler directly, with a stream that behaves, for the handler and
for apid, as grpclib's two ends of the socket do:

- the handler sees the metadata and deadline apid would send, and the caller's messages decoded by
  machined's codec (a body that is not the method's message is InvalidArgument);
- apid gets the reply bytes as grpclib encodes them, the headers and trailers, and a non-OK status
  as :class:`BackendFailed` with the same status and message (no details: machined's server has
  no status-details codec, so none cross the socket either); a reply over
  :data:`MAX_MESSAGE_SIZE` is ResourceExhausted, as apid's codec refuses it from the socket;
- a method machined does not serve is Unimplemented "unknown service ..." as grpc-go words it
  (over the socket grpclib's client reads its bare 404-style refusal as Unknown);
- a handler's unexpected exception is Unknown "Internal Server Error", its traceback logged;
- cancelling the call (caller gone, its deadline, apid closing) cancels the handler, which runs in
  the call's own task;
- the machined service stopping ends running calls as a lost connection does (Unavailable; over
  the socket grpclib's server would leave them running), and while it is not serving a call fails
  as dialling its missing socket does.

It never reads a request before apid has authorized the call: apid refuses first, then calls. The
unix socket is still served for anything that dials machined directly.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any

from grpclib.const import Handler, Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError, ProtocolError

from ichor.api.limits import MAX_MESSAGE_SIZE, too_large

from ..server._codec import RequestCodec
from ._failure import BackendFailed, Failure, Metadata, RequestRefused, connection_failure
from ._methods import Method

__all__ = ["InProcessBackend", "MachineApi"]

log = logging.getLogger(__name__)

_REQUESTS = RequestCodec()
_REPLIES = ProtoCodec()
_INTERNAL = "Internal Server Error"  # grpclib's text for a handler's unexpected exception
_CONNECTION_LOST = Failure(Status.UNAVAILABLE, "error reading from server: Connection lost")


class MachineApi:
    """machined's API handlers, published by the machined service while it serves them."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] | None = None
        self._running: set[_LocalStream] = set()

    def publish(self, servables: Iterable[Any]) -> None:
        handlers: dict[str, Handler] = {}
        for servable in servables:
            handlers.update(servable.__mapping__())
        self._handlers = handlers

    def withdraw(self) -> None:
        """The service stopped: later calls fail to dial, running ones end as a lost connection."""
        self._handlers = None
        for stream in list(self._running):
            stream.withdraw()


class _LocalStream:
    """A machined handler's view of a call apid makes in-process: grpclib's server ``Stream``."""

    def __init__(
        self,
        path: str,
        handler: Handler,
        requests: AsyncIterable[bytes],
        metadata: Metadata,
        deadline: Any,
        on_headers: Callable[[Metadata], Awaitable[None]],
        on_reply: Callable[[bytes], Awaitable[None]],
    ) -> None:
        self.metadata = metadata
        self.deadline = deadline
        self.user_agent: str | None = None
        self._path = path
        self._handler = handler
        self._requests = aiter(requests)
        self._on_headers = on_headers
        self._on_reply = on_reply
        self._task = asyncio.current_task()
        self.headers_sent = False
        self.message_sent = False
        self.ended: Failure | None = None
        #: What went wrong on apid's side (the caller's request refused, relaying a reply failed):
        #: raised to apid whatever the handler made of it.
        self.apid_error: BaseException | None = None
        self.withdrawn = False

    def withdraw(self) -> None:
        self.withdrawn = True
        if self._task is not None:
            self._task.cancel()

    # ------------------------------------------------------------- what the handler calls

    async def recv_message(self) -> Any:
        try:
            data = await anext(self._requests)
        except StopAsyncIteration:
            return None
        except RequestRefused as exc:
            self.apid_error = exc
            raise
        return _REQUESTS.decode(data, self._handler.request_type)

    def __aiter__(self) -> _LocalStream:
        return self

    async def __anext__(self) -> Any:
        message = await self.recv_message()
        if message is None:
            raise StopAsyncIteration
        return message

    async def send_initial_metadata(self, *, metadata: Any = None) -> None:
        if self.headers_sent:
            raise ProtocolError("Initial metadata was already sent")
        self.headers_sent = True
        await self._relay(self._on_headers(Metadata(metadata or ())))

    async def send_message(self, message: Any) -> None:
        if not self.headers_sent:
            await self.send_initial_metadata()
        if self.message_sent and not self._handler.cardinality.server_streaming:
            raise ProtocolError("Message was already sent")
        data = _REPLIES.encode(message, self._handler.reply_type)
        self.message_sent = True
        if len(data) > MAX_MESSAGE_SIZE:
            refused = too_large(len(data), MAX_MESSAGE_SIZE)
            self.apid_error = BackendFailed(Failure(refused.status, refused.message or ""))
            raise refused
        await self._relay(self._on_reply(data))

    async def send_trailing_metadata(
        self,
        *,
        status: Status = Status.OK,
        status_message: str | None = None,
        status_details: Any = None,
        metadata: Any = None,
    ) -> None:
        if self.ended is not None:
            raise ProtocolError("Trailing metadata was already sent")
        if status is Status.OK and not self.message_sent and not self._handler.cardinality.server_streaming:
            raise ProtocolError("Unary response with OK status requires a single message to be sent")
        self.ended = Failure(status, status_message or "", None, Metadata(metadata or ()))

    async def _relay(self, sending: Awaitable[None]) -> None:
        try:
            await sending
        except Exception as exc:
            self.apid_error = exc
            raise

    # ------------------------------------------------------------- how the call ended

    def outcome(self, error: Exception | None) -> Failure:
        """The status grpclib's server would send: what the handler sent, or made of its end."""
        if self.ended is not None:
            return self.ended
        if isinstance(error, GRPCError):
            return Failure(error.status, error.message or "")
        if error is not None:
            log.error("machine API %s: application error", self._path, exc_info=error)
            return Failure(Status.UNKNOWN, _INTERNAL)
        if not self.message_sent and not self._handler.cardinality.server_streaming:
            log.error("machine API %s: a unary call ended without its reply", self._path)
            return Failure(Status.UNKNOWN, _INTERNAL)
        return Failure(Status.OK, "")


def _unknown(path: str, handlers: dict[str, Handler]) -> str:
    """grpc-go's text for a method its server does not have."""
    service, _, name = path.strip("/").partition("/")
    if any(served.startswith(f"/{service}/") for served in handlers):
        return f"unknown method {name} for service {service}"
    return f"unknown service {service}"


class InProcessBackend:
    """apid's backend for its own machined when both run in one process (see the module docstring)."""

    def __init__(self, api: MachineApi, socket_name: str) -> None:
        self.name = socket_name
        self._api = api

    def close(self) -> None:
        """Nothing to close: there is no connection."""

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
        handlers = self._api._handlers
        if handlers is None:
            missing = FileNotFoundError(errno.ENOENT, "machined is not serving")
            raise BackendFailed(connection_failure(self.name, missing))
        handler = handlers.get(method.path)
        if handler is None:
            raise BackendFailed(Failure(Status.UNIMPLEMENTED, _unknown(method.path, handlers)))
        stream = _LocalStream(method.path, handler, requests, metadata, deadline, on_headers, on_reply)
        running = self._api._running
        running.add(stream)
        error: Exception | None = None
        try:
            await handler.func(stream)
        except asyncio.CancelledError:
            if not stream.withdrawn:
                raise
        except Exception as exc:  # the handler's failure becomes the call's status, as grpclib's
            error = exc
        finally:
            running.discard(stream)
        if stream.withdrawn:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()
            raise BackendFailed(_CONNECTION_LOST)
        if stream.apid_error is not None:
            raise stream.apid_error
        ended = stream.outcome(error)
        if not stream.headers_sent:
            await on_headers(Metadata())  # a trailers-only reply: no headers to pass on
        if ended.status is not Status.OK:
            raise BackendFailed(ended)
        return ended.trailers or Metadata()
