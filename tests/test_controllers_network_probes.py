"""HardwareAddresses, DNSUpstreams and ProbeSpecs/ProbeStatuses (issue 25 §3), as Talos 1.7 fills
them: the first physical link, the host DNS's upstreams health-checked with a real DNS query (a
responder this test runs on 127.0.0.1), TCP probes against a listener of this test; each in Talos's
field numbers, with its columns and aliases."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from controller_helpers import run, running

from ichor.machined.controllers.network import platform, probes
from ichor.machined.cosi import Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOST_DNS_CONFIG_ID,
    HOST_DNS_CONFIGS,
    HOSTNAME_STATUSES,
    LINK_STATUSES,
    RESOLVER_ID,
    RESOLVER_STATUSES,
    HostDNSConfigSpec,
    HostnameStatusSpec,
    LinkStatusSpec,
    ResolverStatusSpec,
    register_node_types,
)
from ichor.machined.resources._network_probes import (
    DNS_UPSTREAMS,
    HARDWARE_ADDRESSES,
    PROBE_SPECS,
    PROBE_STATUSES,
    HardwareAddrSpec,
    ProbeSpecSpec,
    ProbeStatusSpec,
    TCPProbeSpec,
)
from ichor.machined.resources._protoenc import EMPTY_SPECS, encode_spec, message_class


def _link(index: int, type: str, mac: str, kind: str = "") -> LinkStatusSpec:
    return LinkStatusSpec(index=index, type=type, hardware_addr=mac, kind=kind)


def test_first_hardware_address_is_the_first_physical_link_never_a_veth() -> None:
    async def main() -> None:
        async with running(probes.hardware_addr_controller()) as state:
            state.create(LINK_STATUSES.new("lo", _link(1, "loopback", "00:00:00:00:00:00")))
            state.create(LINK_STATUSES.new("eth0", _link(2, "ether", "02:42:0a:05:00:02", kind="veth")))
            await asyncio.sleep(0.1)
            assert state.list("network", HARDWARE_ADDRESSES) == []  # a container node's links: none physical
            state.create(LINK_STATUSES.new("eth1", _link(3, "ether", "52:54:00:12:34:57")))
            await assert_resource(state, HARDWARE_ADDRESSES, "first", lambda r: r.spec.name == "eth1")
            state.create(LINK_STATUSES.new("enp1s0", _link(4, "ether", "52:54:00:12:34:56")))
            await assert_resource(
                state, HARDWARE_ADDRESSES, "first",
                lambda r: r.spec == HardwareAddrSpec("enp1s0", "52:54:00:12:34:56"),
            )  # fmt: skip
            state.destroy("network", LINK_STATUSES, "enp1s0")
            state.destroy("network", LINK_STATUSES, "eth1")
            await assert_no_resource(state, HARDWARE_ADDRESSES, "first")

    run(main)


class _Responder(asyncio.DatagramProtocol):
    """A DNS server answering every query with an empty NOERROR reply; records the questions."""

    def __init__(self) -> None:
        self.questions: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.questions.append(data[12:])
        (query_id,) = struct.unpack_from("!H", data)
        reply = struct.pack("!HHHHHH", query_id, 0x8180, 1, 0, 0, 0) + data[12:]
        self.transport.sendto(reply, addr)  # type: ignore[attr-defined]


@asynccontextmanager
async def _dns_server() -> AsyncIterator[tuple[_Responder, int]]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(_Responder, local_addr=("127.0.0.1", 0))
    try:
        yield protocol, transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


def test_dns_healthcheck_asks_for_the_root_ns_and_reads_the_answer() -> None:
    async def main() -> None:
        async with _dns_server() as (responder, port):
            assert await probes.dns_healthcheck("127.0.0.1", port, 2.0) is None
        assert responder.questions == [b"\x00" + struct.pack("!HH", 2, 1)]  # . IN NS
        # nobody listens there now: refused at once (ICMP) or no answer within the timeout
        assert await probes.dns_healthcheck("127.0.0.1", port, 0.3) is not None

    run(main)


def test_dns_upstreams_follow_the_resolvers_while_host_dns_is_enabled() -> None:
    async def main() -> None:
        async with _dns_server() as (_, port):
            controller = probes.DNSUpstreamController(port=port, interval=0.1)
            async with running(controller) as state:
                state.create(
                    RESOLVER_STATUSES.new(
                        RESOLVER_ID, ResolverStatusSpec(dns_servers=("127.0.0.1", "127.0.0.2"))
                    )
                )
                state.create(HOST_DNS_CONFIGS.new(HOST_DNS_CONFIG_ID, HostDNSConfigSpec(enabled=False)))
                await asyncio.sleep(0.2)
                assert state.list("network", DNS_UPSTREAMS) == []  # host DNS disabled: no upstreams
                config = state.get("network", HOST_DNS_CONFIGS, HOST_DNS_CONFIG_ID)
                state.update(config.with_spec(HostDNSConfigSpec(enabled=True)))
                await assert_resource(
                    state,
                    DNS_UPSTREAMS,
                    "127.0.0.1",
                    lambda r: (r.spec.healthy, r.spec.addr) == ("true", f"127.0.0.1:{port}"),
                )
                # nothing answers on 127.0.0.2
                await assert_resource(
                    state, DNS_UPSTREAMS, "127.0.0.2", lambda r: r.spec.healthy == "false", timeout=5
                )
                resolvers = state.get("network", RESOLVER_STATUSES, RESOLVER_ID)
                state.update(resolvers.with_spec(ResolverStatusSpec(dns_servers=("127.0.0.1",))))
                await assert_no_resource(state, DNS_UPSTREAMS, "127.0.0.2", timeout=5)

    run(main)


def test_join_host_port_is_gos() -> None:
    assert probes.join_host_port("8.8.8.8", 53) == "8.8.8.8:53"
    assert probes.join_host_port("2001:4860:4860::8888", 53) == "[2001:4860:4860::8888]:53"


@asynccontextmanager
async def _listener() -> AsyncIterator[tuple[asyncio.Server, int]]:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def test_a_tcp_probe_succeeds_then_fails_after_its_threshold() -> None:
    async def main() -> None:
        async with running(probes.ProbeController()) as state, _listener() as (server, port):
            endpoint = f"127.0.0.1:{port}"
            spec = ProbeSpecSpec(
                interval=timedelta(milliseconds=20), failure_threshold=3,
                tcp=TCPProbeSpec(endpoint=endpoint, timeout=timedelta(seconds=1)),
            )  # fmt: skip
            state.create(PROBE_SPECS.new(spec.id, spec))
            await assert_resource(
                state, PROBE_STATUSES, f"tcp:{endpoint}", lambda r: r.spec == ProbeStatusSpec(success=True)
            )
            server.close()
            await server.wait_closed()
            await assert_resource(
                state, PROBE_STATUSES, f"tcp:{endpoint}",
                lambda r: not r.spec.success and "refused" in r.spec.last_error.lower(), timeout=5,
            )  # fmt: skip
            state.destroy("network", PROBE_SPECS, spec.id)
            await assert_no_resource(state, PROBE_STATUSES, f"tcp:{endpoint}")

    run(main)


def test_platform_probes_become_probe_specs_of_the_platform_layer(tmp_path: Path) -> None:
    probe = ProbeSpecSpec(
        interval=timedelta(seconds=1),
        failure_threshold=3,
        tcp=TCPProbeSpec("10.5.0.1:6443", timedelta(seconds=10)),
    )

    async def main() -> None:
        async with running(
            platform.platform_config_controller(Layout(tmp_path, "10.5.0.2"), [probe])
        ) as state:
            state.create(HOSTNAME_STATUSES.new("hostname", HostnameStatusSpec("cp-1", "")))
            await assert_resource(
                state, PROBE_SPECS, "tcp:10.5.0.1:6443", lambda r: r.spec.layer == "platform"
            )
        async with running(platform.platform_config_controller(Layout(tmp_path, "10.5.0.2"))) as state:
            state.create(HOSTNAME_STATUSES.new("hostname", HostnameStatusSpec("cp-1", "")))
            await asyncio.sleep(0.1)
            assert state.list("network", PROBE_SPECS) == []  # Ichor's platforms have no probes

    run(main)


def _definition(type_name: str) -> tuple[str, tuple[str, ...], list[tuple[str, str]]]:
    registry = Registry()
    register_node_types(registry)
    spec = registry.get(type_name).spec
    return spec.default_namespace, spec.aliases, [(c.name, c.json_path) for c in spec.print_columns]


def test_definitions_and_columns_are_talos() -> None:
    assert _definition("HardwareAddresses.net.talos.dev")[2] == []
    assert _definition("DNSUpstreams.net.talos.dev")[2] == [("Healthy", "{.healthy}"), ("Address", "{.addr}")]
    assert _definition("ProbeSpecs.net.talos.dev")[2] == []
    namespace, aliases, columns = _definition("ProbeStatuses.net.talos.dev")
    assert (
        namespace == "network"
        and aliases[:2] == ("probe", "probes")
        and columns == [("Success", "{.success}")]
    )
    # Talos's DNSUpstream YAML: two strings; it has no protobuf form
    assert spec_to_plain(probes.DNSUpstreamSpec(healthy="true", addr="1.1.1.1:53")) == {
        "healthy": "true",
        "addr": "1.1.1.1:53",
    }
    assert "DNSUpstreams.net.talos.dev" in EMPTY_SPECS


def test_specs_decode_with_talos_field_numbers() -> None:
    message = message_class("talos.resource.definitions.network.HardwareAddrSpec")()
    message.ParseFromString(
        encode_spec("HardwareAddresses.net.talos.dev", HardwareAddrSpec("enp1s0", "52:54:00:12:34:56"))
    )
    assert {f.number: v for f, v in message.ListFields()} == {1: "enp1s0", 2: bytes.fromhex("525400123456")}

    spec = ProbeSpecSpec(interval=timedelta(seconds=2), failure_threshold=3,
                         tcp=TCPProbeSpec("10.5.0.1:6443", timedelta(seconds=10)), layer="platform")  # type: ignore[arg-type]  # fmt: skip
    message = message_class("talos.resource.definitions.network.ProbeSpecSpec")()
    message.ParseFromString(encode_spec("ProbeSpecs.net.talos.dev", spec))
    fields = {f.number: v for f, v in message.ListFields()}
    assert (
        fields[1].ToTimedelta() == timedelta(seconds=2) and fields[2] == 3 and fields[4] == 2
    )  # ConfigPlatform
    assert fields[3].endpoint == "10.5.0.1:6443" and fields[3].timeout.ToTimedelta() == timedelta(seconds=10)

    message = message_class("talos.resource.definitions.network.ProbeStatusSpec")()
    message.ParseFromString(
        encode_spec("ProbeStatuses.net.talos.dev", ProbeStatusSpec(False, "dial tcp: refused"))
    )
    assert {f.number: v for f, v in message.ListFields()} == {2: "dial tcp: refused"}
