"""Talos's ``perf`` namespace: ``CPUStats`` and ``MemoryStats`` (id ``latest``), what the dashboard
and ``talosctl get cpustats|memorystats`` read.

Both are the kernel's counters: ``/proc/stat`` (CPU times in seconds, as Go's procfs divides the
ticks by USER_HZ) and ``/proc/meminfo`` (kB, ``used`` = total - free, as Talos computes it). On a
container or process node the kernel is the host's, so these figures are **host-wide** (every
node on the machine shows the same), exactly as a Talos node in a Docker container shows them.
Types only; ``controllers.perf`` fills them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "CPU_STATS",
    "MEMORY_STATS",
    "PERF_NAMESPACE",
    "PERF_STATS_ID",
    "PERF_TYPES",
    "CPUStat",
    "CPUStatsSpec",
    "MemoryStatsSpec",
]

PERF_NAMESPACE = "perf"
PERF_STATS_ID = "latest"


@dataclasses.dataclass(frozen=True)
class CPUStat:
    """One CPU's (or the total's) times, in seconds since boot."""

    user: float = 0.0
    nice: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    iowait: float = 0.0
    irq: float = 0.0
    soft_irq: float = 0.0
    steal: float = 0.0
    guest: float = 0.0
    guest_nice: float = 0.0


@dataclasses.dataclass(frozen=True)
class CPUStatsSpec:
    cpu: tuple[CPUStat, ...] = ()
    cpu_total: CPUStat = CPUStat()
    irq_total: int = 0
    context_switches: int = 0
    process_created: int = 0
    process_running: int = 0
    process_blocked: int = 0
    soft_irq_total: int = 0


def _key(yaml: str) -> Any:
    return dataclasses.field(default=0, metadata={"yaml": yaml})


@dataclasses.dataclass(frozen=True)
class MemoryStatsSpec:
    """``/proc/meminfo`` in kB under Talos's YAML keys (some are Talos's own spellings)."""

    mem_total: int = _key("total")
    mem_used: int = _key("used")
    mem_available: int = _key("available")
    buffers: int = 0
    cached: int = 0
    swap_cached: int = 0
    active: int = 0
    inactive: int = 0
    active_anon: int = 0
    inactive_anon: int = 0
    active_file: int = 0
    inactive_file: int = 0
    unevictable: int = 0
    mlocked: int = 0
    swap_total: int = 0
    swap_free: int = 0
    dirty: int = 0
    writeback: int = 0
    anon_pages: int = 0
    mapped: int = 0
    shmem: int = 0
    slab: int = 0
    s_reclaimable: int = _key("sreclaimable")
    s_unreclaim: int = _key("sunreclaim")
    kernel_stack: int = 0
    page_tables: int = 0
    nfs_unstable: int = _key("nfsunstable")
    bounce: int = 0
    writeback_tmp: int = _key("writeBacktmp")
    commit_limit: int = 0
    committed_as: int = _key("commitTedas")
    vmalloc_total: int = 0
    vmalloc_used: int = 0
    vmalloc_chunk: int = 0
    hardware_corrupted: int = 0
    anon_huge_pages: int = 0
    shmem_huge_pages: int = 0
    shmem_pmd_mapped: int = 0
    cma_total: int = 0
    cma_free: int = 0
    huge_pages_total: int = 0
    huge_pages_free: int = 0
    huge_pages_rsvd: int = 0
    huge_pages_surp: int = 0
    hugepagesize: int = 0
    direct_map4k: int = _key("directMap4k")
    direct_map2m: int = _key("directMap2m")
    direct_map1g: int = _key("directMap1g")


CPU_STATS: ResourceType[CPUStatsSpec] = ResourceType(
    type="CPUStats.perf.talos.dev", default_namespace=PERF_NAMESPACE, spec_class=CPUStatsSpec,
    print_columns=(PrintColumn("User", "{.cpuTotal.user}"), PrintColumn("System", "{.cpuTotal.system}")),
)  # fmt: skip
MEMORY_STATS: ResourceType[MemoryStatsSpec] = ResourceType(
    type="MemoryStats.perf.talos.dev", default_namespace=PERF_NAMESPACE, spec_class=MemoryStatsSpec,
    print_columns=(PrintColumn("Used", "{.used}"), PrintColumn("Total", "{.total}")),
)  # fmt: skip

PERF_TYPES: tuple[ResourceType[Any], ...] = (CPU_STATS, MEMORY_STATS)
