"""Area ``perf``: ``perf.StatsController``, the kernel's CPU and memory counters -> CPUStats and
MemoryStats ``latest``, read every :data:`UPDATE_INTERVAL` seconds as Talos does.

It reads ``/proc/stat`` and ``/proc/meminfo`` of the node's own ``/proc``. Those two files are the
kernel's, not the PID namespace's: on a container or process node they are the host's figures
(every node on the machine shows the same), as on Talos in Docker. It must never write anything.
"""

from __future__ import annotations

from pathlib import Path

from ichor.machined.cosi import Controller, ControllerContext, Output
from ichor.machined.resources._perf import (
    CPU_STATS,
    MEMORY_STATS,
    PERF_STATS_ID,
    CPUStat,
    CPUStatsSpec,
    MemoryStatsSpec,
)

__all__ = ["UPDATE_INTERVAL", "StatsController", "cpu_stats", "memory_stats"]

UPDATE_INTERVAL = 30.0
"""Seconds between two reads (Talos's ``updateInterval``)."""
USER_HZ = 100
"""Ticks per second of ``/proc/stat`` (``sysconf(_SC_CLK_TCK)`` on Linux, which Go's procfs assumes)."""

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "soft_irq", "steal", "guest", "guest_nice")


def _cpu_stat(numbers: list[str]) -> CPUStat:
    values = [int(n) / USER_HZ for n in numbers[: len(_CPU_FIELDS)]]
    return CPUStat(**dict(zip(_CPU_FIELDS, values, strict=False)))


def cpu_stats(text: str) -> CPUStatsSpec:
    """``/proc/stat`` as Talos's CPUStats: per-CPU times by CPU number (a CPU missing from the file,
    offline, is all zeros, as Go's procfs leaves it), the total, and the kernel's counters."""
    total = CPUStat()
    per_cpu: dict[int, CPUStat] = {}
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, *rest = line.split()
        if not rest:
            continue
        if name == "cpu":
            total = _cpu_stat(rest)
        elif name.startswith("cpu") and name[3:].isdigit():
            per_cpu[int(name[3:])] = _cpu_stat(rest)
        elif name in ("intr", "softirq", "ctxt", "processes", "procs_running", "procs_blocked"):
            counters[name] = int(rest[0])
    cpus = tuple(per_cpu.get(i, CPUStat()) for i in range(max(per_cpu, default=-1) + 1))
    return CPUStatsSpec(
        cpu=cpus,
        cpu_total=total,
        irq_total=counters.get("intr", 0),
        context_switches=counters.get("ctxt", 0),
        process_created=counters.get("processes", 0),
        process_running=counters.get("procs_running", 0),
        process_blocked=counters.get("procs_blocked", 0),
        soft_irq_total=counters.get("softirq", 0),
    )


_MEMINFO_KEYS = {
    "MemTotal": "mem_total", "MemAvailable": "mem_available", "Buffers": "buffers", "Cached": "cached",
    "SwapCached": "swap_cached", "Active": "active", "Inactive": "inactive", "Active(anon)": "active_anon",
    "Inactive(anon)": "inactive_anon", "Active(file)": "active_file", "Inactive(file)": "inactive_file",
    "Unevictable": "unevictable", "Mlocked": "mlocked", "SwapTotal": "swap_total", "SwapFree": "swap_free",
    "Dirty": "dirty", "Writeback": "writeback", "AnonPages": "anon_pages", "Mapped": "mapped", "Shmem": "shmem",
    "Slab": "slab", "SReclaimable": "s_reclaimable", "SUnreclaim": "s_unreclaim", "KernelStack": "kernel_stack",
    "PageTables": "page_tables", "NFS_Unstable": "nfs_unstable", "Bounce": "bounce",
    "WritebackTmp": "writeback_tmp", "CommitLimit": "commit_limit", "Committed_AS": "committed_as",
    "VmallocTotal": "vmalloc_total", "VmallocUsed": "vmalloc_used", "VmallocChunk": "vmalloc_chunk",
    "HardwareCorrupted": "hardware_corrupted", "AnonHugePages": "anon_huge_pages",
    "ShmemHugePages": "shmem_huge_pages", "ShmemPmdMapped": "shmem_pmd_mapped", "CmaTotal": "cma_total",
    "CmaFree": "cma_free", "HugePages_Total": "huge_pages_total", "HugePages_Free": "huge_pages_free",
    "HugePages_Rsvd": "huge_pages_rsvd", "HugePages_Surp": "huge_pages_surp", "Hugepagesize": "hugepagesize",
    "DirectMap4k": "direct_map4k", "DirectMap2M": "direct_map2m", "DirectMap1G": "direct_map1g",
}  # fmt: skip
"""``/proc/meminfo``'s names -> the spec's fields (the values stay in kB, as Talos keeps them)."""


def memory_stats(text: str) -> MemoryStatsSpec:
    """``/proc/meminfo`` as Talos's MemoryStats: ``used`` is total minus free, as Talos computes it."""
    values: dict[str, int] = {}
    free = 0
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        number = rest.split()
        if not number:
            continue
        if name == "MemFree":
            free = int(number[0])
        elif name in _MEMINFO_KEYS:
            values[_MEMINFO_KEYS[name]] = int(number[0])
    total = values.get("mem_total", 0)
    return MemoryStatsSpec(mem_used=max(total - free, 0), **values)


class StatsController(Controller):
    name = "perf.StatsController"
    reads = "(/proc/stat, /proc/meminfo)"
    outputs = (Output(CPU_STATS), Output(MEMORY_STATS))

    def __init__(self, proc: Path = Path("/proc"), *, interval: float = UPDATE_INTERVAL) -> None:
        self._proc = proc
        self._interval = interval

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed(timeout=self._interval)
            try:
                memory = memory_stats((self._proc / "meminfo").read_text())
                cpu = cpu_stats((self._proc / "stat").read_text())
            except (OSError, ValueError) as exc:
                ctx.waiting(
                    "kernel statistics", f"cannot read {self._proc}: {exc}", retry_after=self._interval
                )
                continue
            ctx.clear_waiting()
            ctx.modify(MEMORY_STATS, PERF_STATS_ID, memory)
            ctx.modify(CPU_STATS, PERF_STATS_ID, cpu)
