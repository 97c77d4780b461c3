"""``SystemStat``, ``CPUInfo``, ``LoadAvg``, ``NetworkDeviceStats`` and ``DiskStats`` of
``machine.MachineService``, as a mixin: the kernel's counters read from ``/proc`` as Talos reads them
(``prometheus/procfs``), field for field.

What a node may claim as its own: a container or process node shares the host's kernel, so
``/proc/stat``, ``/proc/cpuinfo``, ``/proc/loadavg`` and ``/proc/diskstats`` are the **host's**
figures (Talos in docker answers the same way). The replies carry them unchanged, because the
protocol has no field to say so; the dashboard says "host-wide" beside them. ``/proc/net/dev`` is
per network namespace: a container node's reply lists its own links (``lo``, ``eth0``), a process
node's the host's, which it shares. Nothing here divides or estimates a per-node share.

This module only reads ``/proc``; it must not cache or invent a value the kernel did not give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpclib.server import Stream

from ichor.api.gen.machine import machine_pb2

PROC = Path("/proc")

USER_HZ = 100
"""Ticks per second of ``/proc/stat``'s CPU times (procfs divides by it: the reply is in seconds)."""

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "soft_irq", "steal", "guest", "guest_nice")
_SOFTIRQ_FIELDS = ("hi", "timer", "net_tx", "net_rx", "block", "block_io_poll", "tasklet", "sched",
                   "hrtimer", "rcu")  # fmt: skip
_NETDEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo", "rx_frame",
                  "rx_compressed", "rx_multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped",
                  "tx_fifo", "tx_collisions", "tx_carrier", "tx_compressed")  # fmt: skip
_DISK_FIELDS = ("read_completed", "read_merged", "read_sectors", "read_time_ms", "write_completed",
                "write_merged", "write_sectors", "write_time_ms", "io_in_progress", "io_time_ms",
                "io_time_weighted_ms", "discard_completed", "discard_merged", "discard_sectors",
                "discard_time_ms")  # fmt: skip


def _cpu_stat(values: list[str]) -> machine_pb2.CPUStat:
    seconds = [int(v) / USER_HZ for v in values[: len(_CPU_FIELDS)]]
    return machine_pb2.CPUStat(**dict(zip(_CPU_FIELDS, seconds, strict=False)))


def system_stat(proc: Path = PROC) -> machine_pb2.SystemStat:
    """``/proc/stat``: CPU times in seconds (total and per CPU), interrupts, context switches,
    processes, soft IRQs."""
    reply = machine_pb2.SystemStat()
    per_cpu: dict[int, machine_pb2.CPUStat] = {}
    for line in (proc / "stat").read_text().splitlines():
        name, *values = line.split()
        if not values:
            continue
        if name == "cpu":
            reply.cpu_total.CopyFrom(_cpu_stat(values))
        elif name.startswith("cpu") and name[3:].isdigit():
            per_cpu[int(name[3:])] = _cpu_stat(values)
        elif name == "intr":
            reply.irq_total = int(values[0])
            reply.irq.extend(int(v) for v in values[1:])
        elif name == "softirq":
            reply.soft_irq_total = int(values[0])
            counts = [int(v) for v in values[1 : 1 + len(_SOFTIRQ_FIELDS)]]
            reply.soft_irq.CopyFrom(
                machine_pb2.SoftIRQStat(**dict(zip(_SOFTIRQ_FIELDS, counts, strict=False)))
            )
        else:
            field = {"btime": "boot_time", "ctxt": "context_switches", "processes": "process_created",
                     "procs_running": "process_running", "procs_blocked": "process_blocked"}.get(name)  # fmt: skip
            if field is not None:
                setattr(reply, field, int(values[0]))
    # Talos sends a dense list indexed by CPU number (an offline CPU is an empty entry).
    for index in range(max(per_cpu, default=-1) + 1):
        reply.cpu.append(per_cpu.get(index, machine_pb2.CPUStat()))
    return reply


_CPUINFO_KEYS: dict[str, tuple[str, type]] = {
    "processor": ("processor", int), "vendor_id": ("vendor_id", str), "cpu family": ("cpu_family", str),
    "model": ("model", str), "model name": ("model_name", str), "stepping": ("stepping", str),
    "microcode": ("microcode", str), "cpu MHz": ("cpu_mhz", float), "cache size": ("cache_size", str),
    "physical id": ("physical_id", str), "siblings": ("siblings", int), "core id": ("core_id", str),
    "cpu cores": ("cpu_cores", int), "apicid": ("apic_id", str), "initial apicid": ("initial_apic_id", str),
    "fpu": ("fpu", str), "fpu_exception": ("fpu_exception", str), "cpuid level": ("cpu_id_level", int),
    "wp": ("wp", str), "bogomips": ("bogo_mips", float), "clflush size": ("cl_flush_size", int),
    "cache_alignment": ("cache_alignment", int), "address sizes": ("address_sizes", str),
    "power management": ("power_management", str),
}  # fmt: skip


def cpu_info(proc: Path = PROC) -> list[machine_pb2.CPUInfo]:
    """``/proc/cpuinfo``: one entry per logical CPU (x86 layout; unknown keys are skipped)."""
    cpus: list[machine_pb2.CPUInfo] = []
    for block in (proc / "cpuinfo").read_text().split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if not sep:
                continue
            if key in ("flags", "bugs"):
                fields[key] = value.split()
            elif key in _CPUINFO_KEYS:
                name, kind = _CPUINFO_KEYS[key]
                try:
                    fields[name] = kind(value) if value or kind is str else kind()
                except ValueError:
                    continue
        if "processor" in fields:
            cpus.append(machine_pb2.CPUInfo(**fields))
    return cpus


def load_avg(proc: Path = PROC) -> machine_pb2.LoadAvg:
    """``/proc/loadavg``: the 1, 5 and 15 minute load averages."""
    load1, load5, load15 = (float(v) for v in (proc / "loadavg").read_text().split()[:3])
    return machine_pb2.LoadAvg(load1=load1, load5=load5, load15=load15)


def network_device_stats(proc: Path = PROC) -> machine_pb2.NetworkDeviceStats:
    """``/proc/net/dev`` of the reader's network namespace, devices by name and their sum as
    ``total`` (named by its devices joined with ", ", as procfs names it)."""
    devices: list[machine_pb2.NetDev] = []
    for line in (proc / "net/dev").read_text().splitlines()[2:]:
        name, sep, rest = line.partition(":")
        values = rest.split()
        if not sep or len(values) < len(_NETDEV_FIELDS):
            continue
        counts = [int(v) for v in values[: len(_NETDEV_FIELDS)]]
        devices.append(
            machine_pb2.NetDev(name=name.strip(), **dict(zip(_NETDEV_FIELDS, counts, strict=True)))
        )
    devices.sort(key=lambda d: d.name)
    total = machine_pb2.NetDev(name=", ".join(d.name for d in devices))
    for field in _NETDEV_FIELDS:
        setattr(total, field, sum(getattr(d, field) for d in devices))
    return machine_pb2.NetworkDeviceStats(total=total, devices=devices)


def disk_stats(proc: Path = PROC) -> machine_pb2.DiskStats:
    """``/proc/diskstats``: lines with all 18 fields (kernels from 4.18 on), and their sum."""
    reply = machine_pb2.DiskStats(total=machine_pb2.DiskStat())
    for line in (proc / "diskstats").read_text().splitlines():
        fields = line.split()
        if len(fields) < 18:
            continue
        counts = [int(v) for v in fields[3:18]]
        reply.devices.append(
            machine_pb2.DiskStat(name=fields[2], **dict(zip(_DISK_FIELDS, counts, strict=True)))
        )
        for field, count in zip(_DISK_FIELDS, counts, strict=True):
            setattr(reply.total, field, getattr(reply.total, field) + count)
    return reply


class MonitoringMethods:
    """The five RPCs; mixed into ``MachineService`` (``_request`` authorizes and reads the request)."""

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:  # provided by MachineService
        raise NotImplementedError

    async def SystemStat(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "SystemStat")
        await stream.send_message(machine_pb2.SystemStatResponse(messages=[system_stat()]))

    async def CPUInfo(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "CPUInfo")
        reply = machine_pb2.CPUsInfo(cpu_info=cpu_info())
        await stream.send_message(machine_pb2.CPUInfoResponse(messages=[reply]))

    async def LoadAvg(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "LoadAvg")
        await stream.send_message(machine_pb2.LoadAvgResponse(messages=[load_avg()]))

    async def NetworkDeviceStats(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "NetworkDeviceStats")
        await stream.send_message(machine_pb2.NetworkDeviceStatsResponse(messages=[network_device_stats()]))

    async def DiskStats(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "DiskStats")
        await stream.send_message(machine_pb2.DiskStatsResponse(messages=[disk_stats()]))
