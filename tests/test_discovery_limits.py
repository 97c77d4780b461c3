"""The discovery service under hostile load: incremental expiry (exact, and an operation's cost
independent of the store's size) and store-wide quotas refused with ResourceExhausted."""

from __future__ import annotations

import asyncio
import struct
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clock_helpers import FakeClock
from google.protobuf.duration_pb2 import Duration
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.discovery import server_pb2
from ichor.api.gen.discovery.server_grpc import ClusterStub
from ichor.discovery import AffiliateStore, DiscoveryServer, LimitExceeded, Limits

HOST = "127.44.0.9"
START = datetime(2026, 1, 1, tzinfo=UTC)
TTL = timedelta(minutes=30)


# -- exact expiry ---------------------------------------------------------------------------


def test_affiliates_and_endpoints_expire_exactly_at_their_deadlines() -> None:
    clock = FakeClock(START)
    store = AffiliateStore(clock=clock)
    store.update("c", "long", data=b"l", endpoints=[b"e1"], ttl=timedelta(seconds=100))
    store.update("c", "short", data=b"s", endpoints=[], ttl=timedelta(seconds=10))
    # A new endpoint with a shorter ttl than its affiliate: it is due first.
    store.update("c", "long", data=None, endpoints=[b"e2"], ttl=timedelta(seconds=5))
    sub = store.subscribe("c")

    def seen() -> dict[str, tuple[bytes, ...]]:
        return {v.id: v.endpoints for v in store.list("c")}

    clock.advance(4.999)
    assert seen() == {"long": (b"e1", b"e2"), "short": ()}
    clock.advance(0.001)
    assert seen() == {"long": (b"e1",), "short": ()}
    clock.advance(5)
    assert seen() == {"long": (b"e1",)}
    # A refresh moves the deadline: the affiliate outlives its first ttl.
    store.update("c", "long", data=None, endpoints=[b"e1"], ttl=timedelta(seconds=100))
    clock.advance(90)  # t=100: the first deadline, no longer the affiliate's
    assert seen() == {"long": (b"e1",)}
    clock.advance(9.999)
    assert seen() == {"long": (b"e1",)}
    clock.advance(0.001)
    assert seen() == {}
    assert store.clusters() == []
    assert store.memory == 0, "every byte accounted for is given back"

    async def watched() -> list[tuple[list[tuple[str, tuple[bytes, ...]]], bool]]:
        changes = [await sub.get() for _ in range(3)]
        return [([(v.id, v.endpoints) for v in c.affiliates], c.deleted) for c in changes]

    assert asyncio.run(watched()) == [
        ([("long", (b"e1",))], False),
        ([("short", ())], True),
        ([("long", ())], True),
    ]


# -- cost per operation ---------------------------------------------------------------------


class _Instant(datetime):
    """A datetime that counts how often it is compared: the store's unit of work."""

    comparisons = 0

    def _count(self) -> None:
        _Instant.comparisons += 1

    def __lt__(self, other: Any) -> bool:
        self._count()
        return super().__lt__(other)

    def __le__(self, other: Any) -> bool:
        self._count()
        return super().__le__(other)

    def __gt__(self, other: Any) -> bool:
        self._count()
        return super().__gt__(other)

    def __ge__(self, other: Any) -> bool:
        self._count()
        return super().__ge__(other)


def _filled_store(clusters: int, affiliates: int) -> tuple[AffiliateStore, FakeClock]:
    clock = FakeClock(_Instant(2026, 1, 1, tzinfo=UTC))
    store = AffiliateStore(clock=clock)  # 30 x 1024 such affiliates fit the default limits
    for c in range(clusters):
        for a in range(affiliates):
            store.update(f"cluster-{c}", f"affiliate-{a}", data=b"x" * 64, endpoints=[b"e" * 20], ttl=TTL)
            clock.advance(0.001)
    return store, clock


def _work(operation: Callable[[], object]) -> int:
    _Instant.comparisons = 0
    operation()
    return _Instant.comparisons


def test_an_update_costs_the_same_in_a_small_and_a_large_store() -> None:
    """30 clusters x 1024 affiliates (the issue's case) against 1 x 8: the same handful of steps."""

    def costs(store: AffiliateStore, clock: FakeClock) -> list[int]:
        clock.advance(60)
        return [
            _work(lambda: store.update("cluster-0", "affiliate-1", data=b"y" * 64, endpoints=[], ttl=TTL)),
            _work(lambda: store.update("fresh", "new", data=b"z", endpoints=[b"e"], ttl=TTL)),
            _work(lambda: store.list("fresh")),
            _work(lambda: store.delete("fresh", "new")),
        ]

    small = costs(*_filled_store(1, 8))
    large = costs(*_filled_store(30, 1024))
    # A heap push is logarithmic: ~15 comparisons for 30k entries; a walk would be 30k+.
    for small_cost, large_cost in zip(small, large, strict=True):
        assert large_cost <= small_cost + 16, (small, large)


def test_expiring_costs_what_is_due() -> None:
    store, clock = _filled_store(30, 1024)
    first = len(store.list("cluster-0"))
    # The fill took 30.72 s at 1 ms per affiliate: move to just after the tenth one's deadline.
    clock.advance(TTL.total_seconds() - 30 * 1024 * 0.001 + 0.0095)
    work = _work(store.expire)
    assert len(store.list("cluster-0")) == first - 10
    assert work < 10 * 64, work  # ten pops of a 30k-entry heap, not a walk over 30k affiliates


@pytest.mark.slow  # 22000 create/delete rounds, 20000 of them under tracemalloc: ~5 s
def test_churn_does_not_grow_the_expiry_heap() -> None:
    """Creating and deleting affiliates leaves stale heap entries; they are compacted away."""
    store = AffiliateStore(clock=FakeClock(START))
    store.update("c", "keep", data=b"k", endpoints=[], ttl=TTL)

    def churn(rounds: int) -> None:
        for i in range(rounds):
            store.update("c", f"a{i}", data=b"d" * 100, endpoints=[b"e"], ttl=TTL)
            store.delete("c", f"a{i}")

    churn(2000)  # warm up: caches, interned strings, the heap's list at its steady size
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        churn(20000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept after 20000 create/delete rounds"
    assert [v.id for v in store.list("c")] == ["keep"]


# -- quotas ---------------------------------------------------------------------------------


def test_clusters_are_bounded_and_refreshes_still_pass_when_full() -> None:
    store = AffiliateStore(clock=FakeClock(START), limits=Limits(clusters_max=2))
    store.update("c1", "a", data=b"1", endpoints=[], ttl=TTL)
    store.update("c2", "a", data=b"2", endpoints=[], ttl=TTL)
    with pytest.raises(LimitExceeded, match=r"too many clusters \(at most 2\)"):
        store.update("c3", "a", data=b"3", endpoints=[], ttl=TTL)
    store.update("c1", "b", data=b"1", endpoints=[], ttl=TTL)  # a known cluster may still grow
    store.update("c2", "a", data=b"two", endpoints=[b"e"], ttl=TTL)
    store.delete("c2", "a")
    store.update("c3", "a", data=b"3", endpoints=[], ttl=TTL)  # room again
    assert store.clusters() == ["c1", "c3"]


def test_memory_is_bounded_over_all_clusters() -> None:
    data = b"d" * 2048
    store = AffiliateStore(clock=FakeClock(START), limits=Limits(memory_max=64 * 1024))
    stored = 0
    with pytest.raises(LimitExceeded, match=r"the discovery service is full: affiliates take \d+ bytes"):
        for i in range(1000):
            store.update(f"cluster-{i % 7}", f"a{i}", data=data, endpoints=[], ttl=TTL)
            stored += 1
    assert 20 <= stored <= 26, stored  # 64 KiB of ~2.5 KiB affiliates
    assert store.memory <= 64 * 1024
    store.update("cluster-0", "a0", data=data, endpoints=[], ttl=TTL)  # a refresh is not growth
    with pytest.raises(LimitExceeded):
        store.update("cluster-0", "a0", data=data * 2, endpoints=[], ttl=TTL)  # bigger data is


def test_watchers_are_bounded() -> None:
    store = AffiliateStore(clock=FakeClock(START), limits=Limits(watchers_max=2))
    first, _ = store.subscribe("c"), store.subscribe("nonexistent")
    with pytest.raises(LimitExceeded, match=r"too many watchers \(at most 2\)"):
        store.subscribe("c")
    store.unsubscribe(first)
    store.unsubscribe(first)  # twice is harmless
    store.subscribe("c")


# -- over gRPC ------------------------------------------------------------------------------


def _update(cluster: str, affiliate: str) -> server_pb2.AffiliateUpdateRequest:
    ttl = Duration()
    ttl.FromTimedelta(TTL)
    return server_pb2.AffiliateUpdateRequest(
        cluster_id=cluster, affiliate_id=affiliate, affiliate_data=b"x", ttl=ttl
    )


def test_a_full_service_answers_resource_exhausted() -> None:
    limits = Limits(clusters_max=1, watchers_max=1)

    async def main() -> None:
        async with DiscoveryServer(AffiliateStore(limits=limits), gc_interval=3600) as server:
            await server.start(HOST, 0)
            channel = Channel(server.host, server.port)
            try:
                stub = ClusterStub(channel)
                await stub.AffiliateUpdate(_update("c1", "a"), timeout=5)
                with pytest.raises(GRPCError) as full:
                    await stub.AffiliateUpdate(_update("c2", "a"), timeout=5)
                assert full.value.status is Status.RESOURCE_EXHAUSTED
                assert full.value.message == "the discovery service is full: too many clusters (at most 1)"
                async with stub.Watch.open(timeout=5) as first:
                    await first.send_message(server_pb2.WatchRequest(cluster_id="c1"), end=True)
                    assert await first.recv_message() is not None  # the snapshot
                    with pytest.raises(GRPCError) as full:
                        async with stub.Watch.open(timeout=5) as second:
                            await second.send_message(server_pb2.WatchRequest(cluster_id="c1"), end=True)
                            await second.recv_message()
                    assert full.value.status is Status.RESOURCE_EXHAUSTED
                    assert "too many watchers" in (full.value.message or "")
                    await first.cancel()
            finally:
                channel.close()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_an_oversized_request_is_refused_from_its_prefix() -> None:
    async def main() -> None:
        async with DiscoveryServer(AffiliateStore(), gc_interval=3600) as server:
            await server.start(HOST, 0)
            channel = Channel(server.host, server.port)
            try:
                with pytest.raises(GRPCError) as refused:
                    async with ClusterStub(channel).AffiliateUpdate.open(timeout=5) as call:
                        await call.send_request()
                        # 5 MiB announced, never sent: only the prefix can have been refused.
                        await call._stream.send_data(struct.pack(">?I", False, 5 * 1024 * 1024))
                        await call.recv_message()
                assert refused.value.status is Status.RESOURCE_EXHAUSTED
                assert refused.value.message == "grpc: received message larger than max (5242880 vs. 4194304)"
                assert server.store.clusters() == []
            finally:
                channel.close()

    asyncio.run(asyncio.wait_for(main(), 20))
