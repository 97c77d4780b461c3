"""The DHCPv4 client: messages to bytes and back, garbage refused, the lease's life on a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress

import pytest
from dhcp_helpers import MAC, SERVER, FakeServer, FakeTime, ack_options
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machined.dhcp4 import (
    BOOTREPLY,
    BOOTREQUEST,
    DHCP4Client,
    DHCPPacketError,
    Lease,
    MessageType,
    Option,
    Packet,
    decode,
    lease_of,
)
from ichor.machined.dhcp4._socket import ip_udp_datagram, udp_payload


def _ack(**extra: bytes) -> Packet:
    options = ((Option.MESSAGE_TYPE, bytes((MessageType.ACK,))), *ack_options(**extra))
    return Packet(op=BOOTREPLY, xid=7, chaddr=MAC, options=options, yiaddr=ipaddress.IPv4Address("10.77.0.2"))


# --- messages ------------------------------------------------------------------------------------


def test_a_packet_survives_encode_and_decode_and_long_options_are_split() -> None:
    long = bytes(range(256)) * 2  # 512 bytes: three instances of the option on the wire
    packet = Packet(op=BOOTREQUEST, xid=0xDEADBEEF, chaddr=MAC, secs=3, flags=0x8000,
                    options=((Option.MESSAGE_TYPE, b"\x01"), (Option.DOMAIN_SEARCH, long)))  # fmt: skip
    wire = packet.encode()
    assert len(wire) >= 300 and wire[236:240] == b"\x63\x82\x53\x63"
    assert decode(wire) == packet
    assert decode(wire).message_type is MessageType.DISCOVER


def test_an_ack_becomes_a_lease_with_every_option_talos_uses() -> None:
    # 10.0.0.0/8 via 10.77.0.1 and 0/0 via 10.77.0.254 (RFC 3442), a search list with a pointer.
    routes = bytes((8, 10, 10, 77, 0, 1, 0, 10, 77, 0, 254))
    search = b"\x03lab\x07example\x00\x04prod\xc0\x00"
    lease = lease_of(
        _ack(classless_routes=routes, domain_search=search, interface_mtu=(1400).to_bytes(2, "big"))
    )
    assert lease == Lease(
        address=ipaddress.IPv4Interface("10.77.0.2/24"), server=SERVER, lease_time=600, renew_after=300,
        rebind_after=525, routers=(SERVER,),
        classless_routes=((ipaddress.IPv4Network("10.0.0.0/8"), SERVER),
                          (ipaddress.IPv4Network("0.0.0.0/0"), ipaddress.IPv4Address("10.77.0.254"))),
        dns_servers=(SERVER, ipaddress.IPv4Address("10.77.0.53")), hostname="leased-node",
        domain_name="lab.example", search_domains=("lab.example", "prod.lab.example"),
        ntp_servers=(ipaddress.IPv4Address("10.77.0.123"),), mtu=1400,
    )  # fmt: skip


def test_names_that_would_inject_lines_into_etc_files_are_dropped_not_trusted() -> None:
    lease = lease_of(_ack(hostname=b"evil\n1.2.3.4 victim", domain_name=b"ok.example"))
    assert (lease.hostname, lease.domain_name) == ("", "ok.example")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: w[:200], "at least"),
        (lambda w: b"\x07" + w[1:], "op 7"),
        (lambda w: w[:236] + b"\0\0\0\0" + w[240:], "magic cookie"),
        (lambda w: w[:240] + b"\x35\x09\x05", "truncated"),
        (lambda w: w[:240] + b"\x35\x01\x05", "without an END"),
    ],
)
def test_malformed_packets_are_refused_saying_what_is_wrong(change, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DHCPPacketError, match=message):
        decode(change(_ack().encode()))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"server_id": b"\x0a\x00"}, "server identifier"),
        ({"subnet_mask": bytes((255, 0, 255, 0))}, "not a netmask"),
        ({"lease_time": b"\x01"}, "lease time"),
        ({"router": b"\x0a\x00\x00"}, "router option"),
        ({"classless_routes": bytes((33, 1, 2, 3, 4, 5, 6, 7, 8))}, "/33"),
        ({"classless_routes": bytes((24, 10, 0))}, "truncated"),
        ({"domain_search": b"\x03lab\xc0\x05"}, "point back"),
        ({"domain_search": b"\x03lab"}, "runs past"),
        ({"interface_mtu": b"\x05"}, "MTU"),
    ],
)
def test_an_ack_with_a_malformed_option_is_no_lease(extra: dict[str, bytes], message: str) -> None:
    with pytest.raises(DHCPPacketError, match=message):
        lease_of(_ack(**extra))


@settings(max_examples=300)
@given(st.binary(max_size=600))
def test_garbage_bytes_are_refused_cleanly_or_decode(data: bytes) -> None:
    try:
        packet = decode(data)
    except DHCPPacketError:
        return
    with contextlib.suppress(DHCPPacketError):
        lease_of(packet)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(1, 254), st.binary(max_size=40)), max_size=12))
def test_any_option_values_give_a_lease_or_a_packet_error(options: list[tuple[int, bytes]]) -> None:
    packet = Packet(op=BOOTREPLY, xid=1, chaddr=MAC, yiaddr=ipaddress.IPv4Address("10.77.0.9"),
                    options=tuple(dict(options).items()))  # fmt: skip
    decoded = decode(packet.encode())
    assert decoded.options == tuple((code, value) for code, value in dict(options).items())
    try:
        lease = lease_of(decoded)
    except DHCPPacketError:
        return
    assert lease.address.ip == ipaddress.IPv4Address("10.77.0.9")
    for name in (lease.hostname, lease.domain_name, *lease.search_domains):
        assert "\n" not in name and " " not in name


def test_ip_udp_framing_round_trips_and_foreign_datagrams_are_skipped() -> None:
    payload = _ack().encode()
    datagram = ip_udp_datagram(payload, ipaddress.IPv4Address(0), ipaddress.IPv4Address("255.255.255.255"))
    # Our own datagram goes to port 67; rewrite the destination port to 68 to read it back.
    as_reply = datagram[:22] + (68).to_bytes(2, "big") + datagram[24:]
    assert udp_payload(as_reply) == payload
    assert udp_payload(datagram) is None  # to the server's port, not ours
    assert udp_payload(b"\x45" + b"\0" * 10) is None
    fragment = as_reply[:6] + b"\x20\x00" + as_reply[8:]
    assert udp_payload(fragment) is None


# --- the state machine ---------------------------------------------------------------------------


def _client(server: FakeServer, time: FakeTime) -> DHCP4Client:
    xids = iter(range(100, 10_000))
    return DHCP4Client(MAC, server.open, clock=time.clock, sleep=time.sleep, xid=lambda: next(xids))


def test_discover_offer_request_ack_binds_a_lease() -> None:
    async def main() -> None:
        server, time = FakeServer(), FakeTime()
        lease = await _client(server, time).acquire()
        assert lease.address == ipaddress.IPv4Interface("10.77.0.2/24")
        assert [kind for kind, _, _ in server.got] == [MessageType.DISCOVER, MessageType.REQUEST]
        assert time.now == 1000.0  # answered at once: no retransmission waited

    asyncio.run(main())


def test_silence_is_retransmitted_with_backoff_and_a_nak_starts_over() -> None:
    async def main() -> None:
        server, time = FakeServer(), FakeTime()
        server.answer_discover = False
        client = _client(server, time)
        task = asyncio.create_task(client.acquire())
        while len(server.got) < 6:
            await asyncio.sleep(0)
        assert time.now == 1000.0 + 4 + 8 + 16 + 32 + 64  # five DISCOVERs, then a new round
        server.answer_discover = True
        server.answer_requests = "nak"
        while [k for k, _, _ in server.got].count(MessageType.REQUEST) < 1:
            await asyncio.sleep(0)
        server.answer_requests = "ack"
        lease = await task
        kinds = [kind for kind, _, _ in server.got]
        assert kinds[-3:] == [MessageType.REQUEST, MessageType.DISCOVER, MessageType.REQUEST]
        assert lease.address.ip == server.address

    asyncio.run(asyncio.wait_for(main(), 10))


def test_renews_at_t1_by_unicast_rebinds_at_t2_by_broadcast_and_reports_expiry() -> None:
    async def main() -> None:
        server, time = FakeServer(lease_time=600), FakeTime()
        client = _client(server, time)
        await client.acquire()
        seen: list[tuple[float, Lease | None]] = []
        # T1 (300 s): a unicast REQUEST from the leased address renews the lease.
        server.got.clear()
        keeper = asyncio.create_task(client.keep(lambda lease: seen.append((time.now, lease))))
        while not seen:
            await asyncio.sleep(0)
        assert seen[0][0] == 1300.0 and seen[0][1] is not None
        assert server.got == [(MessageType.REQUEST, server.address, SERVER)]
        # Next round: the server goes silent. Renewing until T2, rebinding (broadcast) until expiry.
        server.got.clear()
        server.answer_requests = "silent"
        await keeper
        assert seen[-1] == (1300.0 + 600, None)
        unicast = [to for _, _, to in server.got if to is not None]
        broadcast = [to for _, _, to in server.got if to is None]
        assert unicast and broadcast and set(unicast) == {SERVER}
        assert server.got.index((MessageType.REQUEST, server.address, None)) == len(unicast)
        assert client.bound is None

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_nak_while_renewing_loses_the_lease_at_once() -> None:
    async def main() -> None:
        server, time = FakeServer(), FakeTime()
        client = _client(server, time)
        await client.acquire()
        server.answer_requests = "nak"
        seen: list[Lease | None] = []
        await client.keep(seen.append)
        assert seen == [None] and time.now == 1300.0

    asyncio.run(asyncio.wait_for(main(), 10))


def test_stopping_the_client_releases_its_lease() -> None:
    async def main() -> None:
        server, time = FakeServer(), FakeTime()
        client = _client(server, time)
        leases: list[Lease | None] = []
        task = asyncio.create_task(client.run(leases.append))
        while not leases:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert server.got[-1] == (MessageType.RELEASE, server.address, SERVER)

    asyncio.run(asyncio.wait_for(main(), 10))
