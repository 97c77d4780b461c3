"""apid: a transparent gRPC proxy in front of machined, with Talos's routing and role injection.

It never decodes a request or a reply: messages are forwarded as bytes (``RawCodec``); only
one-to-many replies are touched, at the protobuf wire level (``_wire``). apid works out the
caller's roles and passes them on as ``talos-role``; machined checks them again.

Hostile callers: apid refuses a call its caller's roles do not allow (``authz`` rules, so a
certificate without a role may call nothing) from the method path and the certificate alone,
before reading a byte of the request, and reads requests one message at a time, refusing a message
over :data:`MAX_MESSAGE_SIZE` from its length prefix. A client stream fanned out to several nodes
is relayed as it arrives (``_relay.Fanout``), never collected.

Every call ends with a line in apid's request log (``request_log``: Talos's middleware's format,
:mod:`._requestlog`), which ``talosctl logs apid`` shows.

Each call runs in its grpclib handler task; fan-out to several nodes runs in a ``TaskGroup`` inside it,
so cancelling the call (client gone, deadline, shutdown) cancels every backend call it started.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType

from grpclib.client import Channel
from grpclib.const import Handler, Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError
from grpclib.server import Server, Stream
from multidict import MultiMapping

from ichor.api.limits import MAX_MESSAGE_SIZE, stop_request
from ichor.machinery.pki import CertKey

from .. import authz
from ._channel import Backend, ChannelBackend
from ._codec import RawCodec, RawStatusDetailsCodec
from ._failure import BackendFailed, Metadata, RequestRefused
from ._inproc import InProcessBackend, MachineApi
from ._methods import METHODS, Method, is_streamed
from ._relay import Fanout, Requests
from ._requestlog import request_line
from ._router import NODE_KEY, NODES_KEY, PROXYFROM_KEY, Route, RouteKind, local_target_checker, route
from ._tls import AlertingServer, ServerContexts, client_context, reload_context
from ._wire import WireError, append_info, error_reply

log = logging.getLogger(__name__)

APID_PORT = 50000
#: How long apid waits for a TCP+TLS connection to another node (or machined's socket).
DIAL_TIMEOUT = 20.0
#: How long :meth:`Apid.close` waits for cancelled calls to finish.
SHUTDOWN_TIMEOUT = 10.0

_DROPPED_KEYS = frozenset({NODE_KEY, NODES_KEY, PROXYFROM_KEY, authz.ROLE_METADATA_KEY})


def _peer_certificate(stream: Stream[bytes, bytes]) -> bytes | None:
    """The caller's certificate as DER. grpclib's ``Peer.cert()`` would parse it into a dict on
    every call; authz remembers the roles of the DER it has seen (grpclib 0.4's ``Peer``)."""
    ssl_object = stream.peer._transport.get_extra_info("ssl_object")
    return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None


class Apid:
    """apid for one node: TLS on ``<address>:<port>``, proxying to machined and other nodes.

    ``client_cert`` is this node's own client certificate for the hop to other nodes (control
    planes: O=``os:impersonator``); ``None`` on a worker, which then forwards nothing. One-to-many
    calls go to every target, this node included, as Talos's do; a target that is exactly
    ``address`` reaches machined without the TLS hop to itself Talos makes (same metadata, same
    answer). Only a worker serves a single target naming itself (``local_addresses``, default
    ``address``) without fan-out.

    ``machine_api``, when apid runs in machined's process, is what the machined service publishes:
    calls for this node are then made in-process (:mod:`._inproc`) instead of over
    ``machined_socket``, with the same answers.
    """

    def __init__(
        self,
        *,
        address: str,
        machined_socket: Path,
        server_cert: CertKey,
        accepted_cas: Sequence[bytes],
        client_cert: CertKey | None,
        rbac: bool = True,
        check_ext_key_usage: bool = True,
        port: int = APID_PORT,
        remote_port: int | None = None,
        local_addresses: Iterable[str] = (),
        dial_timeout: float = DIAL_TIMEOUT,
        max_message_size: int = MAX_MESSAGE_SIZE,
        listen_address: str | None = None,
        machine_api: MachineApi | None = None,
        request_log: Callable[[str], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.address = address
        # A node with its own network namespace listens on every address, as Talos's apid does (a
        # shared VIP it holds answers too); a process node only on its own loopback address.
        self.listen_address = listen_address or address
        self.port = port
        self.rbac = rbac
        self.max_message_size = max_message_size
        self._remote_port = port if remote_port is None else remote_port
        self._dial_timeout = dial_timeout
        self._server_tls = ServerContexts(server_cert, accepted_cas, check_ext_key_usage=check_ext_key_usage)
        self._client_ssl = client_context(client_cert, accepted_cas) if client_cert is not None else None
        self._is_local = local_target_checker([address, *local_addresses])
        # Talos forwards the caller's :authority here; grpclib does not expose it, so the address
        # the caller reached is used (it is only checked for presence downstream).
        self._proxyfrom = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        self._machined_socket = machined_socket
        self._machine_api = machine_api
        self._request_log = request_log
        self._clock = clock
        self._local: Backend | None = None
        self._remotes: dict[str, Backend] = {}
        self._server: Server | None = None
        self._closing = False

    def reload_certificates(
        self, server_cert: CertKey, accepted_cas: Sequence[bytes], client_cert: CertKey | None
    ) -> None:
        """Serve ``server_cert`` (and dial with ``client_cert``) from the next TLS handshake on.

        Connections already open keep their session. The listener trusts exactly ``accepted_cas``
        from the next handshake on (:class:`ServerContexts`): a client certificate from a CA
        dropped from ``machine.acceptedCAs`` is refused, as Talos's apid does after a CA rotation.
        The dialling side adds new CAs to the ones it trusts (a CA it no longer needs stays
        trusted for the servers it dials until apid restarts)."""
        self._server_tls.reload(server_cert, accepted_cas)
        if client_cert is not None and self._client_ssl is not None:
            reload_context(self._client_ssl, client_cert, accepted_cas)
        elif client_cert is not None:
            self._client_ssl = client_context(client_cert, accepted_cas)

    @property
    def forwarding(self) -> bool:
        """Whether this apid can dial other nodes (it has a client certificate)."""
        return self._client_ssl is not None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("apid is already started")
        family = socket.AF_INET6 if ipaddress.ip_address(self.listen_address).version == 6 else socket.AF_INET
        sock = socket.create_server((self.listen_address, self.port), family=family, backlog=128)
        # Accepted sockets inherit TCP_NODELAY; asyncio would not set it on them (proto 0), and
        # without it a reply's headers/data/trailers wait on delayed ACKs (~40 ms per call).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = sock.getsockname()[1]
        name = "unix " + str(self._machined_socket)
        if self._machine_api is not None:
            self._local = InProcessBackend(self._machine_api, name)
        else:
            self._local = ChannelBackend(
                name,
                lambda: Channel(
                    path=str(self._machined_socket),
                    codec=RawCodec(),
                    status_details_codec=RawStatusDetailsCodec(),
                ),
                self._dial_timeout,
            )
        server = AlertingServer(
            [self],
            codec=RawCodec(),
            status_details_codec=RawStatusDetailsCodec(),
            tls=self._server_tls.listener,
        )
        try:
            await server.start(sock=sock)
        except BaseException:
            sock.close()
            raise
        self._server = server

    async def close(self) -> None:
        """Stop listening, cancel running calls, close every backend connection."""
        server, self._server = self._server, None
        if server is not None:
            self._closing = True
            server.close()
            try:
                async with asyncio.timeout(SHUTDOWN_TIMEOUT):
                    await server.wait_closed()
            except TimeoutError:
                log.warning("apid: calls still running %.0fs after shutdown began", SHUTDOWN_TIMEOUT)
        for backend in [*self._remotes.values(), *([self._local] if self._local else [])]:
            backend.close()
        self._remotes.clear()

    async def serve(self) -> None:
        """Run until cancelled (the service supervisor's way to stop it)."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    async def __aenter__(self) -> Apid:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---------------------------------------------------------------- grpclib servable

    def __mapping__(self) -> dict[str, Handler]:
        return {
            path: Handler(self._handler(method), method.cardinality, bytes, bytes)
            for path, method in METHODS.items()
        }

    def _handler(self, method: Method) -> Callable[[Stream[bytes, bytes]], Awaitable[None]]:
        async def handle(stream: Stream[bytes, bytes]) -> None:
            await self._handle(method, stream)

        return handle

    # ---------------------------------------------------------------- calls

    def _remote(self, target: str) -> Backend:
        backend = self._remotes.get(target)
        if backend is None:
            client_ssl = self._client_ssl
            assert client_ssl is not None  # the router refuses forwarding without it
            host = target.strip("[]")
            backend = ChannelBackend(
                f"tcp {self._format(host)}:{self._remote_port}",
                lambda: Channel(
                    host,
                    self._remote_port,
                    ssl=client_ssl,
                    codec=RawCodec(),
                    status_details_codec=RawStatusDetailsCodec(),
                ),
                self._dial_timeout,
            )
            self._remotes[target] = backend
        return backend

    def _local_backend(self) -> Backend:
        assert self._local is not None, "apid is not started"
        return self._local

    def _target(self, target: str) -> Backend:
        """Where a call forwarded to ``target`` goes: a target naming this apid's own address
        reaches machined directly. Dialling itself over TLS, as Talos does, would hand machined the
        same call (this apid's own ``proxyfrom``, the same ``talos-role`` values the impersonator
        hop re-sends) at the cost of a second TLS and HTTP/2 hop in this process."""
        return self._local_backend() if target == self.address else self._remote(target)

    @staticmethod
    def _format(host: str) -> str:
        return f"[{host}]" if ":" in host else host

    def _outgoing(self, metadata: MultiMapping[str | bytes], roles: frozenset[authz.Role]) -> Metadata:
        out = Metadata((k, v) for k, v in metadata.items() if k not in _DROPPED_KEYS)
        out.add(PROXYFROM_KEY, self._proxyfrom)
        for role in sorted(roles):
            out.add(authz.ROLE_METADATA_KEY, role.value)
        return out

    async def _handle(self, method: Method, stream: Stream[bytes, bytes]) -> None:
        started = time.monotonic()
        status, message = Status.OK, ""
        try:
            failed = await self._route_and_forward(method, stream)
            if failed is not None:
                status, message = failed
            stop_request(stream)  # answered before the caller finished sending (refused, ...)
        except GRPCError as exc:
            status, message = exc.status, exc.message or ""
            raise
        except asyncio.CancelledError:
            status, message = Status.CANCELLED, "context canceled"
            if self._closing:
                await self._say_goodbye(stream)
            raise
        except Exception as exc:  # grpclib answers it as Unknown
            status, message = Status.UNKNOWN, str(exc)
            raise
        finally:
            if self._request_log is not None:
                self._log_request(
                    method, stream, timedelta(seconds=time.monotonic() - started), status, message
                )

    def _log_request(
        self, method: Method, stream: Stream[bytes, bytes], took: timedelta, status: Status, message: str
    ) -> None:
        assert self._request_log is not None
        metadata = [(":authority", self._proxyfrom), ("content-type", "application/grpc")]
        if stream.user_agent:
            metadata.append(("user-agent", stream.user_agent))
        metadata += [(k, v) for k, v in (stream.metadata or Metadata()).items() if isinstance(v, str)]
        streaming = method.cardinality.name != "UNARY_UNARY"
        line = request_line(self._clock(), path=method.path, streaming=streaming, took=took, status=status,
                            message=message, metadata=metadata)  # fmt: skip
        self._request_log(line)

    async def _say_goodbye(self, stream: Stream[bytes, bytes]) -> None:
        # grpclib cancels handlers on shutdown but leaves their streams open; end them with a
        # status so a client following logs or events sees apid go away instead of hanging.
        try:
            async with asyncio.timeout(1.0):
                await stream.send_trailing_metadata(
                    status=Status.UNAVAILABLE, status_message="apid is shutting down"
                )
        except (ProtocolError, StreamTerminatedError, OSError, TimeoutError, AttributeError):
            pass  # already ended, or the connection is gone

    async def _route_and_forward(
        self, method: Method, stream: Stream[bytes, bytes]
    ) -> tuple[Status, str] | None:
        """The call proxied; the status and message it ended with, when that was not OK."""
        metadata: MultiMapping[str | bytes] = stream.metadata or Metadata()
        roles = authz.caller_roles(_peer_certificate(stream), metadata, rbac=self.rbac)
        where: Route = route(
            method.path, metadata, forwarding=self.forwarding, is_local_target=self._is_local
        )
        if not authz.is_allowed(method.path, roles):
            # Decided from the path and the certificate alone: not a byte of the request is read.
            await self._refuse(method, stream, where)
            return None
        outgoing = self._outgoing(metadata, roles)
        if where.kind is RouteKind.ONE_TO_MANY:
            await self._one_to_many(method, stream, where.targets, outgoing)
            return None
        backend = self._local_backend() if where.kind is RouteKind.LOCAL else self._target(where.targets[0])
        return await self._one_to_one(method, stream, backend, outgoing)

    async def _refuse(self, method: Method, stream: Stream[bytes, bytes], where: Route) -> None:
        """PermissionDenied, shaped as machined's refusal would reach the caller through apid."""
        denied = Status.PERMISSION_DENIED, "not authorized"
        if where.kind is not RouteKind.ONE_TO_MANY:
            raise GRPCError(*denied)  # grpclib ends the call with it and resets the stream
        # One-to-many: each node would have refused in band, so each node's slot says so.
        if is_streamed(method.path):
            for target in where.targets:
                await stream.send_message(error_reply(target, *denied, streaming=True))
        else:
            replies = [error_reply(target, *denied, streaming=False) for target in where.targets]
            await stream.send_message(b"".join(replies))
        await stream.send_trailing_metadata()

    async def _one_to_one(
        self, method: Method, stream: Stream[bytes, bytes], backend: Backend, outgoing: Metadata
    ) -> tuple[Status, str] | None:
        """Pass everything through unchanged: headers, messages, trailers, status (returned when
        not OK)."""

        async def on_headers(headers: Metadata) -> None:
            if headers:
                await stream.send_initial_metadata(metadata=headers)

        requests = Requests(stream, self.max_message_size)
        try:
            trailers = await backend.call(
                method, requests, outgoing, stream.deadline, on_headers, stream.send_message
            )
        except RequestRefused as refused:
            raise refused.error from None
        except BackendFailed as failed:
            f = failed.failure
            await stream.send_trailing_metadata(
                status=f.status, status_message=f.message, status_details=f.details, metadata=f.trailers
            )
            return f.status, f.message or ""
        await stream.send_trailing_metadata(metadata=trailers)
        return None

    async def _one_to_many(
        self, method: Method, stream: Stream[bytes, bytes], targets: Sequence[str], outgoing: Metadata
    ) -> None:
        streaming = is_streamed(method.path)
        headers = Metadata()
        trailers = Metadata()
        # One slot per value of ``nodes``, repeated values included, as Talos answers.
        replies: list[list[bytes]] = [[] for _ in targets]
        send_lock = asyncio.Lock()

        async def send(reply: bytes) -> None:
            async with send_lock:  # frames of two messages must not interleave
                await stream.send_message(reply)

        async def one(index: int, target: str, requests: AsyncIterable[bytes]) -> None:
            async def on_headers(got: Metadata) -> None:
                headers.extend(got)

            async def on_reply(reply: bytes) -> None:
                if streaming:
                    await send(append_info(reply, target, streaming=True))
                else:
                    replies[index].append(append_info(reply, target, streaming=False))

            try:
                got = await self._target(target).call(
                    method, requests, outgoing, stream.deadline, on_headers, on_reply
                )
                trailers.extend(got)
            except BackendFailed as failed:
                f = failed.failure
                if f.trailers:
                    trailers.extend(f.trailers)
                error = error_reply(target, f.status, f.message, f.details, streaming=streaming)
                if streaming:
                    await send(error)
                else:
                    replies[index] = [error]
            except WireError as exc:
                # Talos fails the whole call here; one node's malformed reply should not hide
                # the others, so it becomes that node's in-band error instead.
                message = f"error appending info: {exc}"
                replies[index] = [error_reply(target, Status.INTERNAL, message, streaming=False)]

        requests = Requests(stream, self.max_message_size)
        if len(targets) == 1:
            # One node (``talosctl -n IP``, the usual case): its call reads the caller's stream
            # itself, in this task; no fan-out, no task group.
            try:
                await one(0, targets[0], requests)
            except RequestRefused as refused:
                raise refused.error from None
        else:
            await self._fan_out(targets, requests, one)
        if not streaming:
            # Node order, not arrival order: same meaning for talosctl, stable for people.
            await stream.send_initial_metadata(metadata=headers)
            await stream.send_message(b"".join(b"".join(slot) for slot in replies))
        await stream.send_trailing_metadata(metadata=trailers)

    @staticmethod
    async def _fan_out(
        targets: Sequence[str],
        requests: AsyncIterable[bytes],
        one: Callable[[int, str, AsyncIterable[bytes]], Awaitable[None]],
    ) -> None:
        """Every node's call at once; the caller's messages go to each as they arrive."""
        fanout = Fanout(len(targets))

        async def node(index: int, target: str) -> None:
            try:
                await one(index, target, fanout.messages(index))
            finally:
                fanout.close(index)

        refused: GRPCError | None = None
        try:
            async with asyncio.TaskGroup() as group:
                pump = group.create_task(fanout.pump(requests))
                await asyncio.wait([group.create_task(node(i, target)) for i, target in enumerate(targets)])
                # Every node has answered: the rest of the caller's stream, if any, goes nowhere.
                pump.cancel()
        except* RequestRefused as group_error:
            # A message over the limit ends the call for every node (their calls were reset).
            first = group_error.exceptions[0]
            assert isinstance(first, RequestRefused)
            refused = first.error
        if refused is not None:
            raise refused
