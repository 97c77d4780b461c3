"""The discovery server: the ``sidero.discovery.server.Cluster`` gRPC service over an AffiliateStore.

Requests are checked against the service limits before they touch the store; bad input is
``InvalidArgument`` with a message naming the field; a full cluster, affiliate or store (too many
clusters, watchers or bytes of affiliates) is ``ResourceExhausted``, and so is a request message
over :data:`MAX_MESSAGE_SIZE`, refused from its length prefix (the service is unauthenticated). ``Hello`` answers with the caller's IP as the server sees it. ``Watch``
sends the cluster's snapshot first (even when empty), then one message per change.

:class:`DiscoveryServer` owns the gRPC server and the expiry collector; both stop in
:meth:`DiscoveryServer.close`. This module never decrypts anything: it has no key.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from ssl import SSLContext
from typing import Any, TypeVar

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream

from ichor.api.gen.discovery import server_pb2
from ichor.api.gen.discovery.server_grpc import ClusterBase
from ichor.api.limits import limit_requests
from ichor.discovery._store import AffiliateStore, AffiliateView, LimitExceeded, WatcherLagging

__all__ = ["ClusterService", "DiscoveryServer"]

log = logging.getLogger("ichor.discovery")

Sleep = Callable[[float], Awaitable[None]]
_Request = TypeVar("_Request")

#: grpc-go's default server limit, which the discovery service keeps; a valid request is < 8 KiB.
MAX_MESSAGE_SIZE = 4 * 1024 * 1024


def _invalid(message: str) -> GRPCError:
    return GRPCError(Status.INVALID_ARGUMENT, message)


async def _request(stream: Stream[_Request, Any]) -> _Request:
    """The one request message of a call; a caller that sends none gets a status, not a traceback."""
    request = await stream.recv_message()
    if request is None:
        raise _invalid("the request ended without a message")
    return request


def _pb(view: AffiliateView) -> server_pb2.Affiliate:
    return server_pb2.Affiliate(id=view.id, data=view.data, endpoints=list(view.endpoints))


class ClusterService(ClusterBase):
    """The five RPCs, validated; state lives in the store."""

    def __init__(self, store: AffiliateStore) -> None:
        self.store = store
        self.limits = store.limits

    # -- validation ------------------------------------------------------------------------

    def _cluster_id(self, value: str) -> str:
        if not value:
            raise _invalid("cluster ID can't be empty")
        if len(value) > self.limits.cluster_id_max:
            raise _invalid(f"cluster ID is too long ({len(value)} > {self.limits.cluster_id_max} bytes)")
        return value

    def _affiliate_id(self, value: str) -> str:
        if not value:
            raise _invalid("affiliate ID can't be empty")
        if len(value) > self.limits.affiliate_id_max:
            raise _invalid(f"affiliate ID is too long ({len(value)} > {self.limits.affiliate_id_max} bytes)")
        return value

    def _ttl(self, request: server_pb2.AffiliateUpdateRequest) -> timedelta:
        if not request.HasField("ttl"):
            raise _invalid("ttl must be set")
        ttl: timedelta = request.ttl.ToTimedelta()
        if ttl <= timedelta(0):
            raise _invalid(f"ttl must be positive, got {ttl.total_seconds():g}s")
        if ttl > self.limits.ttl_max:
            raise _invalid(f"ttl is too large ({ttl} > {self.limits.ttl_max})")
        return ttl

    # -- RPCs ------------------------------------------------------------------------------

    async def Hello(self, stream: Stream[server_pb2.HelloRequest, server_pb2.HelloResponse]) -> None:
        request = await _request(stream)
        self._cluster_id(request.cluster_id)
        response = server_pb2.HelloResponse()
        peer = stream.peer.addr()
        if peer:
            with contextlib.suppress(ValueError):
                response.client_ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0]).packed
        await stream.send_message(response)

    async def AffiliateUpdate(
        self, stream: Stream[server_pb2.AffiliateUpdateRequest, server_pb2.AffiliateUpdateResponse]
    ) -> None:
        request = await _request(stream)
        cluster_id = self._cluster_id(request.cluster_id)
        affiliate_id = self._affiliate_id(request.affiliate_id)
        data = request.affiliate_data if request.HasField("affiliate_data") else None
        if data is not None and len(data) > self.limits.affiliate_data_max:
            raise _invalid(
                f"affiliate data is too big ({len(data)} > {self.limits.affiliate_data_max} bytes)"
            )
        for endpoint in request.affiliate_endpoints:
            if len(endpoint) > self.limits.affiliate_endpoint_max:
                raise _invalid(
                    f"affiliate endpoint is too big ({len(endpoint)} > {self.limits.affiliate_endpoint_max} bytes)"
                )
        ttl = self._ttl(request)
        try:
            self.store.update(
                cluster_id, affiliate_id, data=data, endpoints=list(request.affiliate_endpoints), ttl=ttl
            )
        except LimitExceeded as exc:
            raise GRPCError(Status.RESOURCE_EXHAUSTED, str(exc)) from None
        await stream.send_message(server_pb2.AffiliateUpdateResponse())

    async def AffiliateDelete(
        self, stream: Stream[server_pb2.AffiliateDeleteRequest, server_pb2.AffiliateDeleteResponse]
    ) -> None:
        request = await _request(stream)
        cluster_id = self._cluster_id(request.cluster_id)
        self.store.delete(cluster_id, self._affiliate_id(request.affiliate_id))
        await stream.send_message(server_pb2.AffiliateDeleteResponse())

    async def List(self, stream: Stream[server_pb2.ListRequest, server_pb2.ListResponse]) -> None:
        request = await _request(stream)
        views = self.store.list(self._cluster_id(request.cluster_id))
        await stream.send_message(server_pb2.ListResponse(affiliates=[_pb(v) for v in views]))

    async def Watch(self, stream: Stream[server_pb2.WatchRequest, server_pb2.WatchResponse]) -> None:
        request = await _request(stream)
        try:
            sub = self.store.subscribe(self._cluster_id(request.cluster_id))
        except LimitExceeded as exc:
            raise GRPCError(Status.RESOURCE_EXHAUSTED, str(exc)) from None
        try:
            await stream.send_message(server_pb2.WatchResponse(affiliates=[_pb(v) for v in sub.snapshot]))
            while True:
                try:
                    change = await sub.get()
                except WatcherLagging as exc:
                    raise GRPCError(Status.RESOURCE_EXHAUSTED, f"{exc}; watch again") from None
                await stream.send_message(
                    server_pb2.WatchResponse(
                        affiliates=[_pb(v) for v in change.affiliates], deleted=change.deleted
                    )
                )
        finally:
            self.store.unsubscribe(sub)


class DiscoveryServer:
    """A discovery service listening on one address; ``async with`` or start()/close()."""

    def __init__(
        self,
        store: AffiliateStore | None = None,
        *,
        gc_interval: float = 1.0,
        sleep: Sleep | None = None,
    ) -> None:
        self.store = store or AffiliateStore()
        self._gc_interval = gc_interval
        self._sleep: Sleep = sleep or asyncio.sleep
        self._server: Server | None = None
        self._gc: asyncio.Task[None] | None = None
        self.host = ""
        self.port = 0

    @property
    def endpoint(self) -> str:
        """``host:port`` as a client dials it (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def start(self, host: str, port: int, *, ssl: SSLContext | None = None) -> None:
        """Listen (``port`` 0 picks a free port; :attr:`port` tells which) and start collecting;
        with ``ssl`` (a server context offering ALPN ``h2``) over TLS, as a public service is."""
        server = Server(limit_requests([ClusterService(self.store)], MAX_MESSAGE_SIZE))
        await server.start(host, port, ssl=ssl)
        listener: Any = getattr(server, "_server", None)  # grpclib keeps the asyncio.Server here
        self.host = host
        self.port = int(listener.sockets[0].getsockname()[1]) if listener and listener.sockets else port
        self._server = server
        self._gc = asyncio.get_running_loop().create_task(self._collect(), name="discovery expiry")

    async def _collect(self) -> None:
        while True:
            await self._sleep(self._gc_interval)
            dropped = self.store.expire()
            if dropped:
                log.info("expired %d affiliate(s)", dropped)

    async def close(self) -> None:
        if self._gc is not None:
            self._gc.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc
            self._gc = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> DiscoveryServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
