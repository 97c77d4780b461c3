"""The dashboard's CPU, load, network and disk lines from SystemStat, CPUInfo, LoadAvg,
NetworkDeviceStats and DiskStats: rates between two polls, and whose figures they are."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rich.console import Console

from ichor.api.gen.machine import machine_pb2
from ichor.cli.dashboard import _render
from ichor.cli.dashboard._data import NodeSnapshot, NodeSource


class _Machine:
    """Counters that grow by a known amount per poll (two polls 2 s apart)."""

    def __init__(self) -> None:
        self.polls = 0

    async def Version(self, _: Any) -> Any:
        reply = machine_pb2.VersionResponse()
        message = reply.messages.add()
        message.version.tag, message.platform.name = "v1.7.6", "container"
        return reply

    async def SystemStat(self, _: Any) -> Any:
        self.polls += 1
        n = self.polls
        stat = machine_pb2.SystemStat(
            cpu_total=machine_pb2.CPUStat(user=10.0 * n, system=5.0 * n, idle=100.0 + 5 * n)
        )
        stat.cpu.add()
        stat.cpu.add()
        return machine_pb2.SystemStatResponse(messages=[stat])

    async def LoadAvg(self, _: Any) -> Any:
        return machine_pb2.LoadAvgResponse(messages=[machine_pb2.LoadAvg(load1=1.5, load5=0.75, load15=0.25)])

    async def CPUInfo(self, _: Any) -> Any:
        cpus = [machine_pb2.CPUInfo(processor=i, model_name="AMD EPYC") for i in range(2)]
        return machine_pb2.CPUInfoResponse(messages=[machine_pb2.CPUsInfo(cpu_info=cpus)])

    async def NetworkDeviceStats(self, _: Any) -> Any:
        n = self.polls
        stats = machine_pb2.NetworkDeviceStats(
            total=machine_pb2.NetDev(name="eth0, lo", rx_bytes=4000 * n, tx_bytes=2000 * n),
            devices=[machine_pb2.NetDev(name="eth0"), machine_pb2.NetDev(name="lo")],
        )
        return machine_pb2.NetworkDeviceStatsResponse(messages=[stats])

    async def DiskStats(self, _: Any) -> Any:
        n = self.polls
        stats = machine_pb2.DiskStats(
            total=machine_pb2.DiskStat(read_sectors=100 * n, write_sectors=1000 * n)
        )
        return machine_pb2.DiskStatsResponse(messages=[stats])

    def __getattr__(self, name: str) -> Any:  # the other parts answer nothing: empty replies
        async def empty(_: Any) -> Any:
            from ichor.client import RPCError

            raise RPCError(14, "not part of this test")

        return empty


class _Client:
    def __init__(self) -> None:
        self.machine = _Machine()

    async def list_resources(self, namespace: str, rtype: str) -> list[Any]:
        return []


def _text(renderable: Any) -> str:
    console = Console(width=200, record=True, file=None, force_terminal=False)
    with console.capture() as capture:
        console.print(renderable)
    return " ".join(capture.get().split())  # one space between words: columns width with the labels


def test_rates_come_from_two_polls_and_say_whose_they_are() -> None:
    clock = iter([100.0, 102.0])
    source = NodeSource(_Client(), "10.5.0.2", monotonic=lambda: next(clock))
    first = asyncio.run(source.poll())
    assert first.system is not None and "system" not in first.errors
    assert (first.system.cores, first.system.model, first.system.load) == (2, "AMD EPYC", (1.5, 0.75, 0.25))
    assert first.system.cpu_busy is None and first.system.network is None and first.system.disk is None
    text = _text(_render.monitor_facts(first))
    assert (
        "CORES / LOAD 2 x AMD EPYC, load 1.50 0.75 0.25 (host-wide: the node shares the host's kernel)"
        in text
    )
    assert "NET I/O measuring (eth0, lo; the node's own links)" in text

    second = asyncio.run(source.poll())
    facts = second.system
    assert facts is not None
    assert facts.cpu_busy == pytest.approx(75.0)  # 15 s busy of 20 s of CPU time
    assert facts.network is not None and (facts.network.received, facts.network.sent) == (2000.0, 1000.0)
    assert facts.disk is not None and (facts.disk.received, facts.disk.sent) == (
        100 * 512 / 2,
        1000 * 512 / 2,
    )
    text = _text(_render.monitor_facts(second))
    assert "HOST CPU 75.0% busy (host-wide: the node shares the host's kernel)" in text
    assert "NET I/O rx 2.0 kB/s tx 1.0 kB/s (eth0, lo; the node's own links)" in text
    assert "DISK I/O read 26 kB/s write 256 kB/s (every block device, host-wide" in text


def test_a_process_node_says_the_links_are_the_hosts() -> None:
    snap = asyncio.run(NodeSource(_Client(), "10.5.0.2").poll())
    snap.platform = "process"
    assert "the host's links: a process node shares its network" in _text(_render.monitor_facts(snap))


def test_without_system_facts_the_lines_say_why() -> None:
    text = _text(_render.monitor_facts(NodeSnapshot(node="10.5.0.2")))
    assert "CORES / LOAD n/a (the node serves no SystemStat/CPUInfo)" in text
