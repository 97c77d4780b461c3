"""Discovery server and client over real gRPC on 127.44.0.x: membership, encryption, TTL, limits."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clock_helpers import FakeClock
from google.protobuf.duration_pb2 import Duration
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from ichor.api.gen.discovery import affiliate_pb2, server_pb2
from ichor.api.gen.discovery.server_grpc import ClusterStub
from ichor.discovery import (
    AffiliateCipher,
    AffiliateStore,
    DecryptError,
    DiscoveryClient,
    DiscoveryConfigError,
    DiscoveryServer,
    Limits,
)
from ichor.machinery import proc

HOST = "127.44.0.7"
KEY = bytes(range(32))


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 20))


def server_with(clock: FakeClock | None = None, limits: Limits | None = None) -> DiscoveryServer:
    # The collector is driven by hand in these tests: a long interval keeps it out of the way.
    return DiscoveryServer(AffiliateStore(clock=clock, limits=limits), gc_interval=3600)


def client(server: DiscoveryServer, node: str, *, key: bytes = KEY, cluster: str = "c1") -> DiscoveryClient:
    return DiscoveryClient(server.endpoint, cluster_id=cluster, key=key, affiliate_id=node, insecure=True)


def affiliate(node: str, hostname: str, *addresses: str) -> affiliate_pb2.Affiliate:
    return affiliate_pb2.Affiliate(
        node_id=node,
        hostname=hostname,
        nodename=hostname,
        machine_type="controlplane",
        operating_system="Ichor (v1.7.6)",
        addresses=[ipaddress.ip_address(a).packed for a in addresses],
    )


async def raw_stub(server: DiscoveryServer) -> AsyncIterator[ClusterStub]:
    channel = Channel(server.host, server.port)
    try:
        yield ClusterStub(channel)
    finally:
        channel.close()


def ttl(seconds: float) -> Duration:
    d = Duration()
    d.FromTimedelta(timedelta(seconds=seconds))
    return d


# -- encryption -----------------------------------------------------------------------------


def test_cipher_round_trips_and_refuses_a_foreign_key() -> None:
    mine, theirs = AffiliateCipher(KEY), AffiliateCipher(os.urandom(32))
    sealed = mine.seal_data(b"hello")
    assert sealed[:12] != sealed[12:24] and b"hello" not in sealed
    assert mine.open_data(sealed) == b"hello"
    with pytest.raises(DecryptError, match="does not decrypt"):
        theirs.open_data(sealed)
    endpoint = mine.seal_endpoint(b"\x0a\x04\x7f\x00\x00\x01\x10\xb3\x33")
    assert len(endpoint) == 16 and mine.seal_endpoint(b"\x0a\x04\x7f\x00\x00\x01\x10\xb3\x33") == endpoint
    assert mine.open_endpoint(endpoint) == b"\x0a\x04\x7f\x00\x00\x01\x10\xb3\x33"
    with pytest.raises(DecryptError):
        mine.open_endpoint(endpoint[:10])


@pytest.mark.parametrize("size", [0, 31, 33])
def test_cipher_refuses_a_bad_key_length(size: int) -> None:
    with pytest.raises(DiscoveryConfigError, match=f"{size} bytes") as info:
        AffiliateCipher(b"k" * size)
    assert info.value.hint and "cluster.secret" in info.value.hint


@pytest.mark.parametrize("endpoint", ["discovery.example", "host:", ":3000", "host:99999", "host:http"])
def test_client_refuses_an_endpoint_that_is_not_host_port(endpoint: str) -> None:
    with pytest.raises(DiscoveryConfigError, match="not host:port") as info:
        DiscoveryClient(endpoint, cluster_id="c", key=KEY, affiliate_id="n")
    assert info.value.hint and "registries.service.endpoint" in info.value.hint


# -- two nodes of one cluster -----------------------------------------------------------------


def test_two_clients_of_one_cluster_see_each_other_and_a_delete() -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async with client(server, "node-a") as a, client(server, "node-b") as b:
                hello = await a.hello()
                # The kernel picks 127.0.0.1 as the source of a loopback connection.
                assert hello.client_ip == ipaddress.ip_address("127.0.0.1") and hello.redirect is None
                await a.update(affiliate("node-a", "cp-1", "10.5.0.2"))
                await b.update(
                    affiliate("node-b", "worker-1", "10.5.0.3"),
                    [affiliate_pb2.Endpoint(ip=ipaddress.ip_address("10.5.0.3").packed, port=51820)],
                )
                seen_by_a = await a.list()
                seen_by_b = await b.list()
                assert list(seen_by_a) == ["node-b"] and list(seen_by_b) == ["node-a"]
                assert seen_by_a["node-b"].affiliate.hostname == "worker-1"
                assert [e.port for e in seen_by_a["node-b"].endpoints] == [51820]
                assert seen_by_b["node-a"].affiliate.addresses == [ipaddress.ip_address("10.5.0.2").packed]
                await b.delete()
                assert await a.list() == {}

    run(main)


def test_other_clusters_and_a_wrong_secret_see_nothing_and_nothing_crashes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async with (
                client(server, "a") as a,
                client(server, "x", key=os.urandom(32)) as intruder,
                client(server, "o", cluster="other") as other,
            ):
                await a.update(affiliate("a", "cp-1", "10.5.0.2"))
                await intruder.update(affiliate("x", "evil", "10.6.6.6"))
                with caplog.at_level(logging.WARNING, logger="ichor.discovery"):
                    assert await intruder.list() == {}
                    assert await a.list() == {}
                assert await other.list() == {}
                assert "dropping affiliate a of cluster c1" in caplog.text
                assert "does not decrypt" in caplog.text

    run(main)


def test_watch_sends_a_snapshot_then_updates_and_deletes() -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async with client(server, "a") as a, client(server, "b") as b:
                await b.update(affiliate("b", "worker-1", "10.5.0.3"))
                events = a.watch()
                first = await anext(events)
                assert first.snapshot and [x.id for x in first.affiliates] == ["b"]
                await b.update(affiliate("b", "worker-renamed", "10.5.0.3"))
                second = await anext(events)
                assert not second.snapshot and second.affiliates[0].affiliate.hostname == "worker-renamed"
                await a.update(affiliate("a", "cp-1", "10.5.0.2"))  # its own update is not reported
                await b.delete()
                third = await anext(events)
                assert third.affiliates == () and third.deleted == ("b",)
                await events.aclose()

    run(main)


def test_an_empty_cluster_still_gets_a_snapshot() -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async with client(server, "a") as a:
                events = a.watch()
                first = await anext(events)
                assert first.snapshot and first.affiliates == () and first.deleted == ()
                await events.aclose()

    run(main)


def test_affiliates_expire_after_their_ttl_and_watchers_hear_of_it() -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))

    async def main() -> None:
        async with server_with(clock) as server:
            await server.start(HOST, 0)
            async with client(server, "a") as a, client(server, "b") as b:
                b.ttl = timedelta(minutes=10)
                await b.update(affiliate("b", "worker-1", "10.5.0.3"))
                events = a.watch()
                assert [x.id for x in (await anext(events)).affiliates] == ["b"]
                clock.advance(9 * 60)
                assert list(await a.list()) == ["b"]
                clock.advance(61)
                assert server.store.expire() == 1
                gone = await anext(events)
                assert gone.deleted == ("b",)
                assert await a.list() == {}
                await events.aclose()

    run(main)


def test_run_keeps_the_local_affiliate_fresh_and_deletes_it_on_request() -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))

    async def main() -> None:
        async with server_with(clock) as server:
            await server.start(HOST, 0)
            a, b = client(server, "a"), client(server, "b")
            seen = asyncio.Event()
            try:
                async with asyncio.TaskGroup() as tg:
                    a.set_local(affiliate("a", "cp-1", "10.5.0.2"))
                    b.set_local(affiliate("b", "worker-1", "10.5.0.3"))
                    runs = [tg.create_task(a.run(seen.set)), tg.create_task(b.run())]
                    while "b" not in a.affiliates:
                        await seen.wait()
                        seen.clear()
                    assert a.affiliates["b"].affiliate.hostname == "worker-1"
                    b.delete_local()
                    await b.deleted.wait()
                    while "b" in a.affiliates:
                        await seen.wait()
                        seen.clear()
                    for task in runs:
                        task.cancel()
            finally:
                a.close()
                b.close()

    run(main)


# -- bad input, RPC by RPC ------------------------------------------------------------------


def _update(**fields: Any) -> server_pb2.AffiliateUpdateRequest:
    base: dict[str, Any] = {"cluster_id": "c1", "affiliate_id": "a", "affiliate_data": b"x", "ttl": ttl(60)}
    base.update(fields)
    return server_pb2.AffiliateUpdateRequest(**{k: v for k, v in base.items() if v is not None})


BAD_REQUESTS: list[tuple[str, Any, str]] = [
    ("Hello", server_pb2.HelloRequest(), "cluster ID can't be empty"),
    ("Hello", server_pb2.HelloRequest(cluster_id="c" * 257), "cluster ID is too long"),
    ("AffiliateUpdate", _update(cluster_id=""), "cluster ID can't be empty"),
    ("AffiliateUpdate", _update(affiliate_id=""), "affiliate ID can't be empty"),
    ("AffiliateUpdate", _update(affiliate_id="a" * 257), "affiliate ID is too long"),
    ("AffiliateUpdate", _update(affiliate_data=b"x" * 2049), "affiliate data is too big"),
    ("AffiliateUpdate", _update(affiliate_endpoints=[b"e" * 33]), "affiliate endpoint is too big"),
    ("AffiliateUpdate", _update(ttl=None), "ttl must be set"),
    ("AffiliateUpdate", _update(ttl=ttl(-5)), "ttl must be positive"),
    ("AffiliateUpdate", _update(ttl=ttl(31 * 60)), "ttl is too large"),
    ("AffiliateDelete", server_pb2.AffiliateDeleteRequest(cluster_id="c1"), "affiliate ID can't be empty"),
    ("AffiliateDelete", server_pb2.AffiliateDeleteRequest(affiliate_id="a"), "cluster ID can't be empty"),
    ("List", server_pb2.ListRequest(), "cluster ID can't be empty"),
]


@pytest.mark.parametrize(("rpc", "request_", "message"), BAD_REQUESTS)
def test_bad_input_is_invalid_argument_and_stores_nothing(rpc: str, request_: Any, message: str) -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async for stub in raw_stub(server):
                with pytest.raises(GRPCError) as info:
                    await getattr(stub, rpc)(request_, timeout=5)
                assert info.value.status is Status.INVALID_ARGUMENT
                assert message in (info.value.message or "")
                assert server.store.clusters() == []

    run(main)


def test_watch_without_a_cluster_id_is_invalid_argument() -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async for stub in raw_stub(server):
                async with stub.Watch.open() as stream:
                    await stream.send_message(server_pb2.WatchRequest(), end=True)
                    with pytest.raises(GRPCError) as info:
                        await stream.recv_message()
                assert info.value.status is Status.INVALID_ARGUMENT
                assert "cluster ID can't be empty" in (info.value.message or "")
                assert server.store.watcher_count("") == 0

    run(main)


def test_full_cluster_and_full_affiliate_are_resource_exhausted() -> None:
    limits = Limits(cluster_affiliates_max=2, affiliate_endpoints_max=2)

    async def main() -> None:
        async with server_with(limits=limits) as server:
            await server.start(HOST, 0)
            async for stub in raw_stub(server):
                for node in ("a", "b"):
                    await stub.AffiliateUpdate(_update(affiliate_id=node), timeout=5)
                with pytest.raises(GRPCError) as info:
                    await stub.AffiliateUpdate(_update(affiliate_id="c"), timeout=5)
                assert info.value.status is Status.RESOURCE_EXHAUSTED
                assert "too many affiliates" in (info.value.message or "")
                await stub.AffiliateUpdate(_update(affiliate_endpoints=[b"1", b"2"]), timeout=5)
                await stub.AffiliateUpdate(_update(affiliate_endpoints=[b"2"]), timeout=5)  # known: fine
                with pytest.raises(GRPCError) as info:
                    await stub.AffiliateUpdate(_update(affiliate_endpoints=[b"3"]), timeout=5)
                assert info.value.status is Status.RESOURCE_EXHAUSTED
                assert "too many endpoints" in (info.value.message or "")
                assert sorted(v.id for v in server.store.list("c1")) == ["a", "b"]
                assert server.store.list("c1")[0].endpoints == (b"1", b"2")

    run(main)


def test_update_without_data_keeps_the_data_and_merges_endpoints() -> None:
    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0)
            async for stub in raw_stub(server):
                await stub.AffiliateUpdate(_update(affiliate_endpoints=[b"1"]), timeout=5)
                request = _update(affiliate_endpoints=[b"2"])
                request.ClearField("affiliate_data")
                await stub.AffiliateUpdate(request, timeout=5)
                [view] = server.store.list("c1")
                assert view.data == b"x" and view.endpoints == (b"1", b"2")

    run(main)


# -- python -m ichor.discovery serve --------------------------------------------------------


def test_serve_prints_where_it_listens_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    log_file = tmp_path / "discovery.log"
    child = proc.start(
        [sys.executable, "-m", "ichor.discovery", "serve", "--listen", "127.44.0.8:3000"], output=log_file
    )
    try:
        deadline = time.monotonic() + 15
        while "listening on" not in (log_file.read_text() if log_file.exists() else ""):
            assert child.poll() is None, log_file.read_text()
            assert time.monotonic() < deadline, "the server never said where it listens"
            time.sleep(0.05)
        assert "discovery service listening on 127.44.0.8:3000" in log_file.read_text()

        async def main() -> None:
            c = DiscoveryClient("127.44.0.8:3000", cluster_id="c", key=KEY, affiliate_id="n", insecure=True)
            async with c:
                assert (await c.hello()).client_ip is not None

        run(main)
        assert child.stop(timeout=10) == 0
    finally:
        child.stop(timeout=5)


def test_serve_refuses_a_listen_address_without_a_port(capsys: pytest.CaptureFixture[str]) -> None:
    from ichor.discovery.__main__ import main

    assert main(["serve", "--listen", "127.44.0.8"]) == 2
    assert "error: --listen:" in capsys.readouterr().err


# -- TLS ---------------------------------------------------------------------------------------


def test_a_tls_server_is_reached_with_its_ca_and_refused_without_it(tmp_path: Path) -> None:
    """Talos's default discovery service is TLS: a client trusting the server's CA talks to it; a
    client that does not (the system roots) is refused with the certificate error, and no
    affiliate is stored for it."""
    import ssl

    from ichor.machinery.pki import new_ecdsa_ca, new_keypair

    ca = new_ecdsa_ca(organization="discovery test", ttl=timedelta(days=1))
    pair = new_keypair(ca, common_name="discovery", ttl=timedelta(days=1), server=True, client=False,
                       ip_addresses=[HOST])  # fmt: skip
    (tmp_path / "tls.crt").write_bytes(pair.crt)
    (tmp_path / "tls.key").write_bytes(pair.key)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    served.set_alpn_protocols(["h2"])
    trusting = ssl.create_default_context(cadata=ca.crt.decode())
    trusting.set_alpn_protocols(["h2"])

    async def main() -> None:
        async with server_with() as server:
            await server.start(HOST, 0, ssl=served)
            secure = DiscoveryClient(server.endpoint, cluster_id="c1", key=KEY, affiliate_id="node-a",
                                     ssl_context=trusting)  # fmt: skip
            async with secure:
                assert (await secure.hello()).redirect is None
                await secure.update(affiliate("node-a", "cp-1", "10.5.0.2"))
            stranger = DiscoveryClient(server.endpoint, cluster_id="c1", key=KEY, affiliate_id="node-b")
            async with stranger:
                with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
                    await stranger.update(affiliate("node-b", "cp-2", "10.5.0.3"))
            plain = client(server, "node-c")  # insecure: plain HTTP/2 to a TLS port
            async with plain:
                with pytest.raises((GRPCError, StreamTerminatedError, OSError, TimeoutError)):
                    await asyncio.wait_for(plain.hello(), 5)
            assert sorted(a.id for a in server.store.list("c1")) == ["node-a"]

    run(main)
