"""Fuzzing the discovery service, which anyone can reach without credentials, on a fixed budget.

* the store: any sequence of updates, deletes and clock moves, with any ids, data, endpoints and
  ttls, keeps exactly what a plain model keeps (or refuses with ``LimitExceeded`` and changes
  nothing), never grows past its quotas, and gives back every accounted byte once all expired;
* the service: any bytes, or any request with random ids, sizes and ttls, sent to any of its five
  methods end with a clear status (OK, InvalidArgument or ResourceExhausted, with a message); the
  server logs no traceback, holds no more than the message limit, and answers the next caller.
"""

from __future__ import annotations

import asyncio
import struct
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clock_helpers import FakeClock
from fuzz_budget import budget
from fuzz_helpers import Live, collecting_tracebacks
from google.protobuf.duration_pb2 import Duration
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.metadata import decode_grpc_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.api.gen.discovery import server_pb2
from ichor.discovery import AffiliateStore, DiscoveryServer, LimitExceeded, Limits
from ichor.machined.apid import RawCodec

HOST = "127.44.0.10"
LIMITS = Limits(clusters_max=4, cluster_affiliates_max=6, affiliate_endpoints_max=4, watchers_max=3,
                memory_max=24 * 1024)  # fmt: skip

pytestmark = pytest.mark.fuzz

# -- the store against a model --------------------------------------------------------------


@dataclass
class _Model:
    """What the store must hold: affiliates alive until their latest deadline, endpoints likewise."""

    affiliates: dict[tuple[str, str], tuple[bytes, dict[bytes, datetime], datetime]] = field(
        default_factory=dict
    )

    def update(
        self, key: tuple[str, str], data: bytes | None, endpoints: list[bytes], until: datetime
    ) -> None:
        old_data, old_endpoints, old_until = self.affiliates.get(key, (b"", {}, until))
        merged = dict(old_endpoints)
        for endpoint in endpoints:
            merged[endpoint] = max(until, merged.get(endpoint, until))
        self.affiliates[key] = (old_data if data is None else data, merged, max(old_until, until))

    def alive(self, now: datetime) -> dict[tuple[str, str], tuple[bytes, tuple[bytes, ...]]]:
        return {
            key: (data, tuple(e for e, d in endpoints.items() if d > now))
            for key, (data, endpoints, until) in self.affiliates.items()
            if until > now
        }


_ids = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "\x00", "é", "x" * 200])
_ops = st.one_of(
    st.tuples(
        st.just("update"), _ids, _ids,
        st.one_of(st.none(), st.binary(max_size=2048)),
        st.lists(st.binary(min_size=1, max_size=32), max_size=5),
        st.integers(1, 1800),
    ),
    st.tuples(st.just("delete"), _ids, _ids),
    st.tuples(st.just("advance"), st.floats(0, 2000, allow_nan=False)),
)  # fmt: skip


@budget(300)
@given(ops=st.lists(_ops, max_size=40))
def test_the_store_keeps_what_a_model_keeps_within_its_quotas(ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    store = AffiliateStore(clock=clock, limits=LIMITS)
    model = _Model()
    for op in ops:
        if op[0] == "update":
            _, cluster, affiliate, data, endpoints, ttl = op
            try:
                store.update(cluster, affiliate, data=data, endpoints=endpoints, ttl=timedelta(seconds=ttl))
            except LimitExceeded as full:
                assert str(full)
            else:
                model.update((cluster, affiliate), data, endpoints, clock.now + timedelta(seconds=ttl))
        elif op[0] == "delete":
            store.delete(op[1], op[2])
            model.affiliates.pop((op[1], op[2]), None)
        else:
            clock.advance(op[1])
        alive = model.alive(clock.now)
        model.affiliates = {k: v for k, v in model.affiliates.items() if k in alive}
        held = {(c, v.id): (v.data, v.endpoints) for c in store.clusters() for v in store.list(c)}
        assert held == alive
        assert len(store.clusters()) <= LIMITS.clusters_max
        assert 0 <= store.memory <= LIMITS.memory_max
    clock.advance(LIMITS.ttl_max.total_seconds())
    assert store.clusters() == [] and store.memory == 0


# -- the service over gRPC ------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    loop = asyncio.new_event_loop()
    server = DiscoveryServer(AffiliateStore(limits=LIMITS), gc_interval=3600)
    loop.run_until_complete(server.__aenter__())
    state = Live(loop, server)
    try:
        state.run(server.start(HOST, 0))
        with collecting_tracebacks(state.tracebacks, "ichor/discovery", "api/limits.py"):
            yield state
    finally:
        loop.run_until_complete(server.__aexit__(None, None, None))
        loop.close()


_METHODS = {
    "Hello": (Cardinality.UNARY_UNARY, server_pb2.HelloRequest),
    "AffiliateUpdate": (Cardinality.UNARY_UNARY, server_pb2.AffiliateUpdateRequest),
    "AffiliateDelete": (Cardinality.UNARY_UNARY, server_pb2.AffiliateDeleteRequest),
    "List": (Cardinality.UNARY_UNARY, server_pb2.ListRequest),
    "Watch": (Cardinality.UNARY_STREAM, server_pb2.WatchRequest),
}


@st.composite
def _requests(draw: st.DrawFn, method: str) -> bytes:
    """A request body: random bytes, or the method's message with random fields."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    text = st.one_of(st.sampled_from(["", "c1", "c2", "c3", "c4", "c5", "a", "b"]), st.text(max_size=300))
    request = _METHODS[method][1]()
    for name in ("cluster_id", "affiliate_id"):
        if name in request.DESCRIPTOR.fields_by_name:
            setattr(request, name, draw(text))
    if method == "AffiliateUpdate":
        if draw(st.booleans()):
            request.affiliate_data = draw(st.binary(max_size=3000))
        request.affiliate_endpoints.extend(draw(st.lists(st.binary(max_size=40), max_size=70)))
        if draw(st.booleans()):
            request.ttl.CopyFrom(
                Duration(seconds=draw(st.integers(-(2**40), 2**40)), nanos=draw(st.integers(0, 999_999_999)))
            )
    return bytes(request.SerializeToString())


async def _call(live: Live, method: str, body: bytes | None) -> tuple[Status, str]:
    """One call with ``body`` as its only message (None: no message); its status and message."""
    channel = Channel(live.server.host, live.server.port, codec=RawCodec())
    try:
        async with asyncio.timeout(10):
            cardinality = _METHODS[method][0]
            path = f"/sidero.discovery.server.Cluster/{method}"
            call = await channel.request(path, cardinality, bytes, bytes).__aenter__()
            await call.send_request()
            frame = b"" if body is None else struct.pack(">?I", False, len(body)) + body
            await call._stream.send_data(frame, end_stream=True)
            h2 = call._stream
            headers = dict(await h2.recv_headers())
            if "grpc-status" not in headers:
                prefix = await h2.recv_data(5)
                if prefix:
                    await h2.recv_data(struct.unpack(">?I", prefix)[1])
                if method == "Watch":
                    return Status.OK, ""  # the snapshot came; the stream stays open until closed
                headers = dict(await h2.recv_trailers())
            return Status(int(headers["grpc-status"])), decode_grpc_message(headers.get("grpc-message", ""))
    finally:
        channel.close()


@st.composite
def _calls(draw: st.DrawFn) -> list[tuple[str, bytes | None]]:
    calls = []
    for method in draw(st.lists(st.sampled_from(sorted(_METHODS)), min_size=1, max_size=5)):
        calls.append((method, None if draw(st.integers(0, 9)) == 0 else draw(_requests(method))))
    return calls


@settings(budget(80), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=_calls())
def test_any_request_ends_with_a_clear_status(live: Live, calls: list[tuple[str, bytes | None]]) -> None:
    tracemalloc.start()
    try:
        for method, body in calls:
            status, message = live.run(_call(live, method, body))
            assert status in {Status.OK, Status.INVALID_ARGUMENT, Status.RESOURCE_EXHAUSTED}, (
                status,
                message,
            )
            assert status is Status.OK or message
            if body is None:
                assert (status, message) == (Status.INVALID_ARGUMENT, "the request ended without a message")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert live.tracebacks == [], live.tracebacks[0]
    assert peak < 8 * 1024 * 1024
    store = live.server.store
    assert len(store.clusters()) <= LIMITS.clusters_max and store.memory <= LIMITS.memory_max
    hello = server_pb2.HelloRequest(cluster_id="c1").SerializeToString()
    assert live.run(_call(live, "Hello", hello)) == (Status.OK, "")
