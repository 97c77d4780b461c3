"""``talosctl pcap``'s capture: a real AF_PACKET capture in a network namespace of the test's own."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ichor.machined import pcap

SRC = Path(__file__).parent.parent / "src"

CHILD = """
import asyncio, socket, subprocess, sys
from ichor.machined import pcap

async def main():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    out = bytearray()
    stream = pcap.capture("lo")
    out += await anext(stream)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"ichor-pcap-probe", ("127.0.0.1", 9999))
    out += await asyncio.wait_for(anext(stream), 5)
    await stream.aclose()
    sys.stdout.buffer.write(bytes(out))

asyncio.run(main())
"""


def read_pcap(data: bytes) -> tuple[int, list[bytes]]:
    """A tiny pcap reader: the link type and every packet's captured bytes."""
    magic, major, minor, _, _, snaplen, linktype = struct.unpack_from("<IHHiIII", data)
    assert (magic, major, minor) == (0xA1B2C3D4, 2, 4)
    packets, offset = [], 24
    while offset < len(data):
        _, _, caplen, origlen = struct.unpack_from("<IIII", data, offset)
        assert caplen <= min(origlen, snaplen)
        packets.append(data[offset + 16 : offset + 16 + caplen])
        offset += 16 + caplen
    assert offset == len(data)
    return linktype, packets


def test_records_carry_truncated_bytes_and_the_original_length() -> None:
    data = pcap.global_header(4) + pcap.record(b"abcdefgh", 4, 12.5)
    linktype, packets = read_pcap(data)
    assert linktype == 1 and packets == [b"abcd"]
    assert struct.unpack_from("<IIII", data, 24) == (12, 500000, 4, 8)


def test_bad_requests_are_refused_with_the_flag_to_fix() -> None:
    import asyncio

    async def first(**kwargs: object) -> None:
        await anext(pcap.capture(**kwargs))  # type: ignore[arg-type]

    with pytest.raises(pcap.CaptureError, match="-i"):
        asyncio.run(first(interface="no-such-link0"))
    with pytest.raises(pcap.CaptureError, match="--bpf-filter"):
        asyncio.run(first(interface="lo", bpf_filter=1))
    with pytest.raises(pcap.CaptureError, match="--snaplen"):
        asyncio.run(first(interface="lo", snaplen=10**7))


def test_the_cli_summary_reassembles_records_split_across_chunks() -> None:
    import io

    from ichor.cli._pcap import _Summary, summarize

    udp = (
        bytes(12) + b"\x08\x00" + bytes([0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0, 10, 5, 0, 2, 10, 5, 0, 1])
    )
    udp += struct.pack("!HHHH", 5353, 53, 12, 0) + b"abcd"
    stream = (
        pcap.global_header(65535)
        + pcap.record(udp, 65535, 7.25)
        + pcap.record(b"\x00" * 12 + b"\x08\x06", 65535, 8)
    )
    out = io.StringIO()
    summary = _Summary(out)
    for i in range(0, len(stream), 7):
        summary.feed(stream[i : i + 7])
    assert out.getvalue() == ("7.250000 IP 10.5.0.2.5353 > 10.5.0.1.53: UDP, length 46\n"
                              "8.000000 ARP, length 14\n")  # fmt: skip
    assert summarize(b"\x01") == "short frame, length 1"


def test_a_process_node_refuses_capture_and_says_why() -> None:
    import asyncio
    from types import SimpleNamespace

    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    from ichor.api.gen.machine import machine_pb2
    from ichor.machined.server._netstat import NetstatMethods

    class Service(NetstatMethods):
        _node = SimpleNamespace(layout=SimpleNamespace(own_netns=False))

        async def _request(self, stream: object, name: str) -> object:
            return machine_pb2.PacketCaptureRequest(interface="eth0")

    with pytest.raises(GRPCError) as caught:
        asyncio.run(Service().PacketCapture(None))  # type: ignore[arg-type]
    assert caught.value.status is Status.FAILED_PRECONDITION
    assert "--provisioner container" in str(caught.value.message)


def test_the_cli_refuses_a_bpf_filter_with_a_hint() -> None:
    from click.testing import CliRunner

    from ichor.cli._pcap import pcap as command

    result = CliRunner().invoke(command, ["--bpf-filter", "tcp port 80"])
    assert result.exit_code != 0 and "--bpf-filter is not supported" in result.output
