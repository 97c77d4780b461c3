"""The discovery server's memory: clusters -> affiliates (opaque data, endpoints, expiry) and watchers.

Affiliates and each of their endpoints expire ``ttl`` after their last update; every operation
first drops what has expired (by the injected clock), and :meth:`AffiliateStore.expire` does the
same for a periodic collector, so expiry is exact under a fake clock. Watchers get every change of
their cluster through a bounded queue; a watcher that falls that far behind is cut off (its stream
ends and the client re-watches, getting a fresh snapshot) instead of growing memory.

This module holds state only: no gRPC, no network, no decryption (the server never has the key).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

__all__ = [
    "AffiliateStore",
    "AffiliateView",
    "Change",
    "Clock",
    "LimitExceeded",
    "Limits",
    "Subscription",
    "WatcherLagging",
]


Clock = Callable[[], datetime]
"""Returns the current (timezone-aware) time; injected so tests move time by hand."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclasses.dataclass(frozen=True)
class Limits:
    """The discovery service's limits (values of siderolabs/discovery-service)."""

    cluster_id_max: int = 256
    affiliate_id_max: int = 256
    affiliate_data_max: int = 2048
    affiliate_endpoint_max: int = 32
    """Bytes of one encrypted endpoint."""
    ttl_max: timedelta = timedelta(minutes=30)
    cluster_affiliates_max: int = 1024
    affiliate_endpoints_max: int = 64
    watcher_queue: int = 1024
    """Changes a watcher may have pending before it is cut off."""


class LimitExceeded(Exception):
    """A cluster or an affiliate is full (gRPC ``ResourceExhausted``)."""


class WatcherLagging(Exception):
    """The watcher did not keep up; its stream must end so the client re-watches."""


@dataclasses.dataclass(frozen=True)
class AffiliateView:
    id: str
    data: bytes
    endpoints: tuple[bytes, ...]


@dataclasses.dataclass(frozen=True)
class Change:
    """One watch message: affiliates updated, or (``deleted``) gone, with only ids meaningful."""

    affiliates: tuple[AffiliateView, ...]
    deleted: bool = False


_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclasses.dataclass
class _Affiliate:
    id: str
    data: bytes = b""
    endpoints: dict[bytes, datetime] = dataclasses.field(default_factory=dict)
    expires: datetime = _NEVER

    def view(self) -> AffiliateView:
        return AffiliateView(self.id, self.data, tuple(self.endpoints))


class Subscription:
    """A watcher of one cluster: :meth:`get` returns its next change."""

    def __init__(self, cluster_id: str, snapshot: tuple[AffiliateView, ...], size: int) -> None:
        self.cluster_id = cluster_id
        self.snapshot = snapshot
        self._queue: asyncio.Queue[Change | None] = asyncio.Queue(maxsize=size)
        self.lagging = False

    def _push(self, change: Change) -> None:
        if self.lagging:
            return
        try:
            self._queue.put_nowait(change)
        except asyncio.QueueFull:
            self.lagging = True
            # Room is guaranteed: one slot is freed for the marker that ends the stream.
            self._queue.get_nowait()
            self._queue.put_nowait(None)

    async def get(self) -> Change:
        change = await self._queue.get()
        if change is None:
            raise WatcherLagging(f"watcher of cluster {self.cluster_id!r} fell behind")
        return change


class AffiliateStore:
    """All clusters of one discovery server."""

    def __init__(self, *, clock: Clock | None = None, limits: Limits | None = None) -> None:
        self._clock = clock or utc_now
        self.limits = limits or Limits()
        self._clusters: dict[str, dict[str, _Affiliate]] = {}
        self._watchers: dict[str, set[Subscription]] = {}

    def now(self) -> datetime:
        return self._clock()

    # -- reads -----------------------------------------------------------------------------

    def list(self, cluster_id: str) -> builtins.list[AffiliateView]:
        self.expire()
        return [a.view() for a in self._clusters.get(cluster_id, {}).values()]

    def clusters(self) -> builtins.list[str]:
        self.expire()
        return sorted(self._clusters)

    # -- writes ----------------------------------------------------------------------------

    def update(
        self,
        cluster_id: str,
        affiliate_id: str,
        *,
        data: bytes | None,
        endpoints: Sequence[bytes],
        ttl: timedelta,
    ) -> None:
        """Create or refresh an affiliate; endpoints are merged, data replaced when given."""
        self.expire()
        now = self._clock()
        expires = now + ttl
        cluster = self._clusters.get(cluster_id, {})
        affiliate = cluster.get(affiliate_id)
        if affiliate is None:
            if len(cluster) >= self.limits.cluster_affiliates_max:
                raise LimitExceeded(
                    f"too many affiliates in the cluster (at most {self.limits.cluster_affiliates_max})"
                )
            affiliate = _Affiliate(affiliate_id, expires=expires)
        new_endpoints = [e for e in dict.fromkeys(endpoints) if e not in affiliate.endpoints]
        if len(affiliate.endpoints) + len(new_endpoints) > self.limits.affiliate_endpoints_max:
            raise LimitExceeded(
                f"too many endpoints for the affiliate (at most {self.limits.affiliate_endpoints_max})"
            )
        changed = affiliate_id not in cluster or bool(new_endpoints)
        if data is not None and data != affiliate.data:
            affiliate.data = data
            changed = True
        for endpoint in endpoints:
            affiliate.endpoints[endpoint] = max(expires, affiliate.endpoints.get(endpoint, expires))
        affiliate.expires = max(affiliate.expires, expires)
        self._clusters.setdefault(cluster_id, cluster)[affiliate_id] = affiliate
        if changed:
            self._notify(cluster_id, Change((affiliate.view(),)))

    def delete(self, cluster_id: str, affiliate_id: str) -> bool:
        self.expire()
        cluster = self._clusters.get(cluster_id, {})
        if cluster.pop(affiliate_id, None) is None:
            return False
        if not cluster:
            self._clusters.pop(cluster_id, None)
        self._notify(cluster_id, Change((AffiliateView(affiliate_id, b"", ()),), deleted=True))
        return True

    def expire(self) -> int:
        """Drop expired affiliates and endpoints (telling watchers); returns affiliates dropped."""
        now = self._clock()
        dropped = 0
        for cluster_id in list(self._clusters):
            cluster = self._clusters[cluster_id]
            for affiliate in list(cluster.values()):
                if affiliate.expires <= now:
                    del cluster[affiliate.id]
                    dropped += 1
                    gone = Change((AffiliateView(affiliate.id, b"", ()),), deleted=True)
                    self._notify(cluster_id, gone)
                    continue
                stale = [e for e, until in affiliate.endpoints.items() if until <= now]
                for endpoint in stale:
                    del affiliate.endpoints[endpoint]
                if stale:
                    self._notify(cluster_id, Change((affiliate.view(),)))
            if not cluster:
                del self._clusters[cluster_id]
        return dropped

    # -- watchers --------------------------------------------------------------------------

    def subscribe(self, cluster_id: str) -> Subscription:
        """A watcher whose snapshot and later changes leave no gap (taken in one step)."""
        sub = Subscription(cluster_id, tuple(self.list(cluster_id)), self.limits.watcher_queue)
        self._watchers.setdefault(cluster_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        watchers = self._watchers.get(sub.cluster_id)
        if watchers is not None:
            watchers.discard(sub)
            if not watchers:
                del self._watchers[sub.cluster_id]

    def watcher_count(self, cluster_id: str) -> int:
        return len(self._watchers.get(cluster_id, ()))

    def _notify(self, cluster_id: str, change: Change) -> None:
        for sub in list(self._watchers.get(cluster_id, ())):
            sub._push(change)
