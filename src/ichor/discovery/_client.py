"""The discovery client: one node's view of its cluster through a discovery server.

A :class:`DiscoveryClient` holds the cluster id, the cluster key and this node's affiliate id.
Its RPC methods (:meth:`hello`, :meth:`update`, :meth:`delete`, :meth:`list`, :meth:`watch`) each
make one call; :meth:`run` is the long-lived loop a node uses: say hello (following a redirect),
watch the cluster, push the local affiliate (sealed once per change) and refresh it every TTL/2
so it never expires while the node lives, reconnecting with backoff when anything fails.

Remote affiliates are decrypted here. One that does not decrypt (another cluster's key, garbage)
is dropped with a logged reason; it never ends the loop. This module must not know about
resources or controllers: the node's controllers turn what it sees into resources.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError

from ichor.api.gen.discovery import affiliate_pb2, server_pb2
from ichor.api.gen.discovery.server_grpc import ClusterStub
from ichor.discovery._crypto import AffiliateCipher
from ichor.discovery._errors import DecryptError, DiscoveryConfigError
from ichor.machinery.constants import TALOS_VERSION
from ichor.machinery.hostport import split_host_port

__all__ = ["DEFAULT_TTL", "DiscoveryClient", "HelloResult", "RemoteAffiliate", "WatchEvent", "parse_endpoint"]

log = logging.getLogger("ichor.discovery")

DEFAULT_TTL = timedelta(minutes=30)
"""How long the server keeps an affiliate without a refresh (Talos's default)."""

Sleep = Callable[[float], Awaitable[None]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclasses.dataclass(frozen=True)
class RemoteAffiliate:
    """Another node of the cluster, decrypted."""

    id: str
    affiliate: affiliate_pb2.Affiliate
    endpoints: tuple[affiliate_pb2.Endpoint, ...] = ()


@dataclasses.dataclass(frozen=True)
class HelloResult:
    client_ip: IPAddress | None
    redirect: str | None


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One watch message: a snapshot (replaces everything known), updates, or deleted ids."""

    snapshot: bool
    affiliates: tuple[RemoteAffiliate, ...] = ()
    deleted: tuple[str, ...] = ()


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port)."""
    try:
        host, port = split_host_port(endpoint)
    except ValueError:
        port = 0
    if port == 0:
        raise DiscoveryConfigError(
            f"discovery endpoint {endpoint!r} is not host:port",
            hint="set cluster.discovery.registries.service.endpoint to a URL such as https://host:3000/",
        )
    return host, port


class DiscoveryClient:
    def __init__(
        self,
        endpoint: str,
        *,
        cluster_id: str,
        key: bytes,
        affiliate_id: str,
        insecure: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        ttl: timedelta = DEFAULT_TTL,
        client_version: str = TALOS_VERSION,
        rpc_timeout: float = 10.0,
        sleep: Sleep | None = None,
        max_backoff: float = 30.0,
    ) -> None:
        if not cluster_id:
            raise DiscoveryConfigError("cluster id is empty", hint="set cluster.id in the machine config")
        if not affiliate_id:
            raise DiscoveryConfigError("affiliate id (node id) is empty")
        self._host, self._port = parse_endpoint(endpoint)
        self.cluster_id = cluster_id
        self.affiliate_id = affiliate_id
        self._cipher = AffiliateCipher(key)
        self._insecure = insecure
        self._ssl_context = ssl_context
        self.ttl = ttl
        self._client_version = client_version
        self._rpc_timeout = rpc_timeout
        self._sleep: Sleep = sleep or asyncio.sleep
        self._max_backoff = max_backoff
        self._channel: Channel | None = None
        # What run() keeps pushing, and what it has seen.
        self._local_plain: bytes | None = None
        self._local_data: bytes | None = None
        self._local_endpoints: list[bytes] = []
        self._delete_requested = False
        self._local_changed = asyncio.Event()
        self.deleted = asyncio.Event()
        """Set once the server confirmed the deletion of this node's affiliate."""
        self._affiliates: dict[str, RemoteAffiliate] = {}
        self.public_ip: IPAddress | None = None
        self._notify: Callable[[], None] = lambda: None

    @property
    def endpoint(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self._port}"

    # -- connection --------------------------------------------------------------------------

    def _stub(self) -> ClusterStub:
        if self._channel is None:
            ssl_arg: Any = None
            if not self._insecure:
                ssl_arg = self._ssl_context or ssl.create_default_context()
            self._channel = Channel(self._host, self._port, ssl=ssl_arg)
        return ClusterStub(self._channel)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def __aenter__(self) -> DiscoveryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- one call each -----------------------------------------------------------------------

    async def hello(self) -> HelloResult:
        reply = await self._stub().Hello(
            server_pb2.HelloRequest(cluster_id=self.cluster_id, client_version=self._client_version),
            timeout=self._rpc_timeout,
        )
        client_ip: IPAddress | None = None
        with contextlib.suppress(ValueError):
            client_ip = ipaddress.ip_address(reply.client_ip) if reply.client_ip else None
        redirect = reply.redirect.endpoint if reply.HasField("redirect") and reply.redirect.endpoint else None
        self.public_ip = client_ip
        return HelloResult(client_ip, redirect)

    def seal(
        self, affiliate: affiliate_pb2.Affiliate, endpoints: Sequence[affiliate_pb2.Endpoint] = ()
    ) -> tuple[bytes, list[bytes]]:
        data = self._cipher.seal_data(affiliate.SerializeToString(deterministic=True))
        return data, [self._cipher.seal_endpoint(e.SerializeToString(deterministic=True)) for e in endpoints]

    async def update(
        self,
        affiliate: affiliate_pb2.Affiliate | None,
        endpoints: Sequence[affiliate_pb2.Endpoint] = (),
        *,
        sealed: tuple[bytes, list[bytes]] | None = None,
    ) -> None:
        """Publish this node's affiliate (encrypted) with :attr:`ttl`."""
        if sealed is None:
            if affiliate is None:
                raise ValueError("update needs an affiliate or sealed data")
            sealed = self.seal(affiliate, endpoints)
        data, sealed_endpoints = sealed
        ttl = Duration()
        ttl.FromTimedelta(self.ttl)
        await self._stub().AffiliateUpdate(
            server_pb2.AffiliateUpdateRequest(
                cluster_id=self.cluster_id,
                affiliate_id=self.affiliate_id,
                affiliate_data=data,
                affiliate_endpoints=sealed_endpoints,
                ttl=ttl,
            ),
            timeout=self._rpc_timeout,
        )

    async def delete(self) -> None:
        await self._stub().AffiliateDelete(
            server_pb2.AffiliateDeleteRequest(cluster_id=self.cluster_id, affiliate_id=self.affiliate_id),
            timeout=self._rpc_timeout,
        )

    async def list(self) -> dict[str, RemoteAffiliate]:
        reply = await self._stub().List(
            server_pb2.ListRequest(cluster_id=self.cluster_id), timeout=self._rpc_timeout
        )
        found = (self._open(a) for a in reply.affiliates)
        return {a.id: a for a in found if a is not None}

    async def watch(self) -> AsyncIterator[WatchEvent]:
        """The cluster's snapshot, then its changes, decrypted; ends when the server ends the stream."""
        async with self._stub().Watch.open() as stream:
            await stream.send_message(server_pb2.WatchRequest(cluster_id=self.cluster_id), end=True)
            snapshot = True
            while (reply := await stream.recv_message()) is not None:
                if reply.deleted:
                    gone = tuple(a.id for a in reply.affiliates if a.id != self.affiliate_id)
                    event = WatchEvent(snapshot, deleted=gone)
                else:
                    opened = (self._open(a) for a in reply.affiliates)
                    event = WatchEvent(snapshot, affiliates=tuple(a for a in opened if a is not None))
                # News about ourselves (or undecryptable news) is no news; a snapshot always is.
                if event.snapshot or event.affiliates or event.deleted:
                    yield event
                snapshot = False

    def _open(self, affiliate: server_pb2.Affiliate) -> RemoteAffiliate | None:
        """Decrypt one affiliate; None (with the reason logged) for ourselves, empty or foreign data."""
        if affiliate.id == self.affiliate_id or not affiliate.data:
            return None
        try:
            plain = affiliate_pb2.Affiliate.FromString(self._cipher.open_data(affiliate.data))
        except (DecryptError, DecodeError) as exc:
            log.warning("dropping affiliate %s of cluster %s: %s", affiliate.id, self.cluster_id, exc)
            return None
        endpoints: list[affiliate_pb2.Endpoint] = []
        for sealed in affiliate.endpoints:
            try:
                endpoints.append(affiliate_pb2.Endpoint.FromString(self._cipher.open_endpoint(sealed)))
            except (DecryptError, DecodeError) as exc:
                log.warning("dropping an endpoint of affiliate %s: %s", affiliate.id, exc)
        return RemoteAffiliate(affiliate.id, plain, tuple(endpoints))

    # -- the long-lived loop -----------------------------------------------------------------

    def set_local(
        self, affiliate: affiliate_pb2.Affiliate, endpoints: Sequence[affiliate_pb2.Endpoint] = ()
    ) -> None:
        """What :meth:`run` publishes from now on; unchanged data is not re-sent early."""
        plain = affiliate.SerializeToString(deterministic=True) + b"".join(
            e.SerializeToString(deterministic=True) for e in endpoints
        )
        if plain == self._local_plain and not self._delete_requested:
            return
        self._local_plain = plain
        self._local_data, self._local_endpoints = self.seal(affiliate, endpoints)
        self._delete_requested = False
        self.deleted.clear()
        self._local_changed.set()

    def delete_local(self) -> None:
        """Remove this node's affiliate from the server; :attr:`deleted` is set once done."""
        self._delete_requested = True
        self._local_plain = self._local_data = None
        self._local_endpoints = []
        self._local_changed.set()

    @property
    def affiliates(self) -> dict[str, RemoteAffiliate]:
        """The other nodes as last seen (decryptable ones only)."""
        return dict(self._affiliates)

    async def run(self, notify: Callable[[], None] = lambda: None) -> None:
        """Keep this node published and :attr:`affiliates` current until cancelled."""
        self._notify = notify
        failures = 0
        while True:
            try:
                hello = await self.hello()
                if hello.redirect:
                    log.info("discovery server %s redirects to %s", self.endpoint, hello.redirect)
                    self.close()
                    self._host, self._port = parse_endpoint(hello.redirect)
                    continue
                failures = 0
                await _first_failure(self._watch_loop(notify), self._refresh_loop())
            except (GRPCError, OSError, StreamTerminatedError, TimeoutError, ConnectionError) as exc:
                failures += 1
                delay = min(self._max_backoff, 0.5 * 2 ** min(failures - 1, 10))
                log.warning("discovery service %s: %s (retry in %.1fs)", self.endpoint, exc, delay)
                self.close()
                await self._sleep(delay)

    async def _watch_loop(self, notify: Callable[[], None]) -> None:
        async for event in self.watch():
            if event.snapshot:
                self._affiliates = {}
            for gone in event.deleted:
                self._affiliates.pop(gone, None)
            for affiliate in event.affiliates:
                self._affiliates[affiliate.id] = affiliate
            notify()
        raise ConnectionError("the server ended the watch")

    async def _refresh_loop(self) -> None:
        while True:
            self._local_changed.clear()
            if self._delete_requested:
                if not self.deleted.is_set():
                    await self.delete()
                    self.deleted.set()
                    self._notify()
            elif self._local_data is not None:
                await self.update(None, sealed=(self._local_data, list(self._local_endpoints)))
            await _first_done(self._local_changed.wait(), self._sleep(self.ttl.total_seconds() / 2))


async def _first_done(*aws: Awaitable[Any]) -> None:
    """Wait until one finishes (re-raising its error); cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _first_failure(*aws: Awaitable[Any]) -> None:
    """Run side by side until one ends; its error (or its return) ends them all."""
    await _first_done(*aws)
