"""``talosctl pcap``: capture a node's interface (``PacketCapture``) into a pcap file or a summary.

With ``-o FILE`` (``-o -`` for stdout) the node's pcap stream is written as it comes, readable by
tcpdump and tshark; without it each packet is printed as a one-line summary. ``--duration`` ends
the capture (default: until interrupted). ``--bpf-filter`` is refused: Ichor does not compile
filters (capture everything and filter with ``tcpdump -r``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import struct
import sys
from typing import IO, Any

import click

from ichor.cli._nodecmd import parse_duration, run

_PROTOCOLS = {1: "ICMP", 6: "TCP", 17: "UDP"}


def summarize(frame: bytes) -> str:
    """One packet as ``<proto> <src> > <dst> length N``; what is not IPv4 by its EtherType."""
    if len(frame) < 14:
        return f"short frame, length {len(frame)}"
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x0806:
        return f"ARP, length {len(frame)}"
    if ethertype != 0x0800 or len(frame) < 34:
        return f"ethertype {ethertype:#06x}, length {len(frame)}"
    ip = frame[14:]
    header = (ip[0] & 0xF) * 4
    src, dst = ipaddress.IPv4Address(ip[12:16]), ipaddress.IPv4Address(ip[16:20])
    proto = _PROTOCOLS.get(ip[9], f"proto {ip[9]}")
    if ip[9] in (6, 17) and len(ip) >= header + 4:
        sport, dport = struct.unpack_from("!HH", ip, header)
        return f"IP {src}.{sport} > {dst}.{dport}: {proto}, length {len(frame)}"
    return f"IP {src} > {dst}: {proto}, length {len(frame)}"


class _Summary:
    """Turns the pcap stream back into packets and prints a line for each."""

    def __init__(self, out: IO[str]) -> None:
        self._buffer = b""
        self._out = out
        self._header_seen = False

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        if not self._header_seen and len(self._buffer) >= 24:
            self._buffer, self._header_seen = self._buffer[24:], True
        while self._header_seen and len(self._buffer) >= 16:
            seconds, micros, caplen, _ = struct.unpack_from("<IIII", self._buffer)
            if len(self._buffer) < 16 + caplen:
                return
            frame, self._buffer = self._buffer[16 : 16 + caplen], self._buffer[16 + caplen :]
            self._out.write(f"{seconds}.{micros:06d} {summarize(frame)}\n")
            self._out.flush()


@click.command("pcap", help="Capture the network packets from the node.")
@click.option(
    "-i", "--interface", default="eth0", show_default=True, help="interface name to capture packets on"
)
@click.option("--promiscuous", is_flag=True, help="put interface into promiscuous mode")
@click.option("-s", "--snaplen", default=65536, show_default=True, help="maximum packet size to capture")
@click.option(
    "-o",
    "--output",
    default="",
    help="if not set, decode packets to stdout; if set write raw pcap data to a file, use '-' for stdout",
)
@click.option("--duration", default="", help="duration of the capture")
@click.option("--bpf-filter", default="", help="bpf filter to apply, tcpdump -dd format")
def pcap(interface: str, promiscuous: bool, snaplen: int, output: str, duration: str, bpf_filter: str) -> None:  # fmt: skip
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import message_error

    if bpf_filter:
        raise click.UsageError("--bpf-filter is not supported by Ichor: capture without it and filter the "
                               "file with tcpdump -r")  # fmt: skip
    limit = parse_duration(duration, flag="--duration").total_seconds() if duration else None

    async def work(client: Any) -> None:
        request = machine_pb2.PacketCaptureRequest(
            interface=interface, promiscuous=promiscuous, snap_len=snaplen
        )
        with contextlib.ExitStack() as files:
            sink: IO[bytes] | None = None
            summary: _Summary | None = None
            if output == "-":
                sink = sys.stdout.buffer
            elif output:
                sink = files.enter_context(open(output, "wb"))
            else:
                summary = _Summary(sys.stdout)
            async with client.machine.PacketCapture.open() as call:
                await call.send_message(request, end=True)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(limit):
                        async for data in call:
                            error = message_error(data, client.peer_host)
                            if error is not None:
                                raise click.ClickException(str(error))
                            if sink is not None:
                                sink.write(data.bytes)
                                sink.flush()
                            elif summary is not None:
                                summary.feed(data.bytes)
                await call.cancel()

    run(work)
