"""The discovery server's memory: clusters -> affiliates (opaque data, endpoints, expiry) and watchers.

Affiliates and each of their endpoints expire ``ttl`` after their last update. Expiry is
incremental: every affiliate has one entry in a heap ordered by its next deadline (its own expiry
or its earliest endpoint's), and every operation first pops what is due by the injected clock, so
expiry is exact under a fake clock and an operation costs what expired since the last one (plus
a heap push), not a walk over the whole store. :meth:`AffiliateStore.expire` does the same for a
periodic collector.

The store is bounded (:class:`Limits`): affiliates per cluster, endpoints per affiliate, clusters,
watchers, and the bytes all affiliates take (ids, data and endpoints plus a fixed per-entry
overhead measured on CPython). What would grow past a bound is refused with :class:`LimitExceeded`
(gRPC ``ResourceExhausted``); refreshing what is already stored never is. Watchers get every change
of their cluster through a bounded queue; a watcher that falls that far behind is cut off (its
stream ends and the client re-watches, getting a fresh snapshot) instead of growing memory.

This module holds state only: no gRPC, no network, no decryption (the server never has the key).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import heapq
import itertools
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


#: What one affiliate costs besides its id, data and endpoints (objects, dict slots, heap entry),
#: and one endpoint besides its bytes; measured with tracemalloc on CPython 3.11.
AFFILIATE_OVERHEAD = 448
ENDPOINT_OVERHEAD = 72
CLUSTER_OVERHEAD = 256


@dataclasses.dataclass(frozen=True)
class Limits:
    """The discovery service's limits: per request and per cluster the values of
    siderolabs/discovery-service; for the whole store Ichor's, since it runs unauthenticated."""

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
    clusters_max: int = 4096
    """Clusters with at least one affiliate."""
    memory_max: int = 64 * 1024 * 1024
    """Bytes all affiliates may take, as accounted (a full affiliate is ~9 KiB, a typical one ~3 KiB)."""
    watchers_max: int = 4096
    """Watch streams open at once, over all clusters."""


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
    scheduled: datetime | None = None
    """The deadline of this affiliate's live entry in the expiry heap."""
    entry: int = -1
    """That entry's sequence number: older entries of this id are stale."""

    def view(self) -> AffiliateView:
        return AffiliateView(self.id, self.data, tuple(self.endpoints))

    def next_deadline(self) -> datetime:
        return min(self.expires, min(self.endpoints.values(), default=self.expires))

    def cost(self) -> int:
        endpoints = sum(len(e) + ENDPOINT_OVERHEAD for e in self.endpoints)
        return AFFILIATE_OVERHEAD + len(self.id) + len(self.data) + endpoints


# (deadline, sequence number, cluster id, affiliate id); the sequence number breaks ties.
_Entry = tuple[datetime, int, str, str]


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
        self._watcher_count = 0
        self._deadlines: list[_Entry] = []
        self._sequence = itertools.count()
        self._affiliate_count = 0
        self.memory = 0
        """Bytes the stored clusters and affiliates take, as :class:`Limits` accounts them."""

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
        cluster = self._clusters.get(cluster_id)
        affiliate = cluster.get(affiliate_id) if cluster is not None else None
        new_endpoints = [
            e for e in dict.fromkeys(endpoints) if affiliate is None or e not in affiliate.endpoints
        ]
        self._check_room(cluster_id, cluster, affiliate, affiliate_id, data, new_endpoints)
        if cluster is None:
            cluster = self._clusters[cluster_id] = {}
            self.memory += CLUSTER_OVERHEAD + len(cluster_id)
        changed = affiliate is None or bool(new_endpoints)
        before = 0
        if affiliate is None:
            affiliate = cluster[affiliate_id] = _Affiliate(affiliate_id, expires=expires)
            self._affiliate_count += 1
        else:
            before = affiliate.cost()
        if data is not None and data != affiliate.data:
            affiliate.data = data
            changed = True
        for endpoint in endpoints:
            affiliate.endpoints[endpoint] = max(expires, affiliate.endpoints.get(endpoint, expires))
        affiliate.expires = max(affiliate.expires, expires)
        self.memory += affiliate.cost() - before
        self._schedule(cluster_id, affiliate)
        if changed:
            self._notify(cluster_id, Change((affiliate.view(),)))

    def _check_room(
        self,
        cluster_id: str,
        cluster: dict[str, _Affiliate] | None,
        affiliate: _Affiliate | None,
        affiliate_id: str,
        data: bytes | None,
        new_endpoints: Sequence[bytes],
    ) -> None:
        """Raise :class:`LimitExceeded` if the update would grow the store past a limit."""
        limits = self.limits
        growth = sum(len(e) + ENDPOINT_OVERHEAD for e in new_endpoints)
        if cluster is None:
            if len(self._clusters) >= limits.clusters_max:
                raise LimitExceeded(
                    f"the discovery service is full: too many clusters (at most {limits.clusters_max})"
                )
            growth += CLUSTER_OVERHEAD + len(cluster_id)
        if affiliate is None:
            if cluster is not None and len(cluster) >= limits.cluster_affiliates_max:
                raise LimitExceeded(
                    f"too many affiliates in the cluster (at most {limits.cluster_affiliates_max})"
                )
            growth += AFFILIATE_OVERHEAD + len(affiliate_id) + len(data or b"")
        elif data is not None:
            growth += len(data) - len(affiliate.data)
        endpoint_count = (len(affiliate.endpoints) if affiliate else 0) + len(new_endpoints)
        if endpoint_count > limits.affiliate_endpoints_max:
            raise LimitExceeded(
                f"too many endpoints for the affiliate (at most {limits.affiliate_endpoints_max})"
            )
        if growth > 0 and self.memory + growth > limits.memory_max:
            raise LimitExceeded(
                f"the discovery service is full: affiliates take {self.memory} bytes "
                f"(at most {limits.memory_max})"
            )

    def delete(self, cluster_id: str, affiliate_id: str) -> bool:
        self.expire()
        affiliate = self._clusters.get(cluster_id, {}).get(affiliate_id)
        if affiliate is None:
            return False
        self._remove(cluster_id, affiliate)
        return True

    def _remove(self, cluster_id: str, affiliate: _Affiliate) -> None:
        cluster = self._clusters[cluster_id]
        del cluster[affiliate.id]
        self._affiliate_count -= 1
        self.memory -= affiliate.cost()
        if not cluster:
            del self._clusters[cluster_id]
            self.memory -= CLUSTER_OVERHEAD + len(cluster_id)
        # Its heap entry goes stale: it no longer matches a stored affiliate.
        self._notify(cluster_id, Change((AffiliateView(affiliate.id, b"", ()),), deleted=True))

    def expire(self) -> int:
        """Drop what is due (telling watchers); returns affiliates dropped.

        Costs what is due, not the size of the store: the heap's first entry is the earliest
        deadline, and each popped entry is one affiliate (with at most ``affiliate_endpoints_max``
        endpoints) to look at.
        """
        now = self._clock()
        dropped = 0
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _, entry, cluster_id, affiliate_id = heapq.heappop(deadlines)
            affiliate = self._clusters.get(cluster_id, {}).get(affiliate_id)
            if affiliate is None or affiliate.entry != entry:
                continue  # deleted or rescheduled since
            affiliate.scheduled = None
            if affiliate.expires <= now:
                self._remove(cluster_id, affiliate)
                dropped += 1
                continue
            stale = [e for e, until in affiliate.endpoints.items() if until <= now]
            for endpoint in stale:
                del affiliate.endpoints[endpoint]
                self.memory -= len(endpoint) + ENDPOINT_OVERHEAD
            self._schedule(cluster_id, affiliate)
            if stale:
                self._notify(cluster_id, Change((affiliate.view(),)))
        return dropped

    def _schedule(self, cluster_id: str, affiliate: _Affiliate) -> None:
        """Make the heap hold ``affiliate``'s next deadline (expiries only move later, except
        when a new endpoint comes with a shorter ttl: then a new, earlier entry is pushed)."""
        deadline = affiliate.next_deadline()
        if affiliate.scheduled is not None and affiliate.scheduled <= deadline:
            return  # its entry fires first, and reschedules then
        affiliate.scheduled = deadline
        affiliate.entry = next(self._sequence)
        heapq.heappush(self._deadlines, (deadline, affiliate.entry, cluster_id, affiliate.id))
        if len(self._deadlines) > 2 * self._affiliate_count + 64:
            self._compact()

    def _compact(self) -> None:
        # Stale entries (deleted or rescheduled affiliates) outnumber live ones: rebuild from the
        # live ones. Linear, but only after as many pushes as there are affiliates.
        self._deadlines = [
            (a.scheduled, a.entry, cluster_id, a.id)
            for cluster_id, cluster in self._clusters.items()
            for a in cluster.values()
            if a.scheduled is not None
        ]
        heapq.heapify(self._deadlines)

    # -- watchers --------------------------------------------------------------------------

    def subscribe(self, cluster_id: str) -> Subscription:
        """A watcher whose snapshot and later changes leave no gap (taken in one step)."""
        if self._watcher_count >= self.limits.watchers_max:
            raise LimitExceeded(
                f"the discovery service is full: too many watchers (at most {self.limits.watchers_max})"
            )
        sub = Subscription(cluster_id, tuple(self.list(cluster_id)), self.limits.watcher_queue)
        self._watchers.setdefault(cluster_id, set()).add(sub)
        self._watcher_count += 1
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        watchers = self._watchers.get(sub.cluster_id)
        if watchers is not None and sub in watchers:
            watchers.discard(sub)
            self._watcher_count -= 1
            if not watchers:
                del self._watchers[sub.cluster_id]

    def watcher_count(self, cluster_id: str) -> int:
        return len(self._watchers.get(cluster_id, ()))

    def _notify(self, cluster_id: str, change: Change) -> None:
        for sub in list(self._watchers.get(cluster_id, ())):
            sub._push(change)
