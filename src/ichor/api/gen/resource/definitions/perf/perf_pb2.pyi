from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CPUSpec(_message.Message):
    __slots__ = ("cpu", "cpu_total", "irq_total", "context_switches", "process_created", "process_running", "process_blocked", "soft_irq_total")
    CPU_FIELD_NUMBER: _ClassVar[int]
    CPU_TOTAL_FIELD_NUMBER: _ClassVar[int]
    IRQ_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_CREATED_FIELD_NUMBER: _ClassVar[int]
    PROCESS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    PROCESS_BLOCKED_FIELD_NUMBER: _ClassVar[int]
    SOFT_IRQ_TOTAL_FIELD_NUMBER: _ClassVar[int]
    cpu: _containers.RepeatedCompositeFieldContainer[CPUStat]
    cpu_total: CPUStat
    irq_total: int
    context_switches: int
    process_created: int
    process_running: int
    process_blocked: int
    soft_irq_total: int
    def __init__(self, cpu: _Optional[_Iterable[_Union[CPUStat, _Mapping]]] = ..., cpu_total: _Optional[_Union[CPUStat, _Mapping]] = ..., irq_total: _Optional[int] = ..., context_switches: _Optional[int] = ..., process_created: _Optional[int] = ..., process_running: _Optional[int] = ..., process_blocked: _Optional[int] = ..., soft_irq_total: _Optional[int] = ...) -> None: ...

class CPUStat(_message.Message):
    __slots__ = ("user", "nice", "system", "idle", "iowait", "irq", "soft_irq", "steal", "guest", "guest_nice")
    USER_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    IOWAIT_FIELD_NUMBER: _ClassVar[int]
    IRQ_FIELD_NUMBER: _ClassVar[int]
    SOFT_IRQ_FIELD_NUMBER: _ClassVar[int]
    STEAL_FIELD_NUMBER: _ClassVar[int]
    GUEST_FIELD_NUMBER: _ClassVar[int]
    GUEST_NICE_FIELD_NUMBER: _ClassVar[int]
    user: float
    nice: float
    system: float
    idle: float
    iowait: float
    irq: float
    soft_irq: float
    steal: float
    guest: float
    guest_nice: float
    def __init__(self, user: _Optional[float] = ..., nice: _Optional[float] = ..., system: _Optional[float] = ..., idle: _Optional[float] = ..., iowait: _Optional[float] = ..., irq: _Optional[float] = ..., soft_irq: _Optional[float] = ..., steal: _Optional[float] = ..., guest: _Optional[float] = ..., guest_nice: _Optional[float] = ...) -> None: ...

class MemorySpec(_message.Message):
    __slots__ = ("mem_total", "mem_used", "mem_available", "buffers", "cached", "swap_cached", "active", "inactive", "active_anon", "inactive_anon", "active_file", "inactive_file", "unevictable", "mlocked", "swap_total", "swap_free", "dirty", "writeback", "anon_pages", "mapped", "shmem", "slab", "s_reclaimable", "s_unreclaim", "kernel_stack", "page_tables", "nf_sunstable", "bounce", "writeback_tmp", "commit_limit", "committed_as", "vmalloc_total", "vmalloc_used", "vmalloc_chunk", "hardware_corrupted", "anon_huge_pages", "shmem_huge_pages", "shmem_pmd_mapped", "cma_total", "cma_free", "huge_pages_total", "huge_pages_free", "huge_pages_rsvd", "huge_pages_surp", "hugepagesize", "direct_map4k", "direct_map2m", "direct_map1g")
    MEM_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MEM_USED_FIELD_NUMBER: _ClassVar[int]
    MEM_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    BUFFERS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    SWAP_CACHED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    INACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_ANON_FIELD_NUMBER: _ClassVar[int]
    INACTIVE_ANON_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FILE_FIELD_NUMBER: _ClassVar[int]
    INACTIVE_FILE_FIELD_NUMBER: _ClassVar[int]
    UNEVICTABLE_FIELD_NUMBER: _ClassVar[int]
    MLOCKED_FIELD_NUMBER: _ClassVar[int]
    SWAP_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SWAP_FREE_FIELD_NUMBER: _ClassVar[int]
    DIRTY_FIELD_NUMBER: _ClassVar[int]
    WRITEBACK_FIELD_NUMBER: _ClassVar[int]
    ANON_PAGES_FIELD_NUMBER: _ClassVar[int]
    MAPPED_FIELD_NUMBER: _ClassVar[int]
    SHMEM_FIELD_NUMBER: _ClassVar[int]
    SLAB_FIELD_NUMBER: _ClassVar[int]
    S_RECLAIMABLE_FIELD_NUMBER: _ClassVar[int]
    S_UNRECLAIM_FIELD_NUMBER: _ClassVar[int]
    KERNEL_STACK_FIELD_NUMBER: _ClassVar[int]
    PAGE_TABLES_FIELD_NUMBER: _ClassVar[int]
    NF_SUNSTABLE_FIELD_NUMBER: _ClassVar[int]
    BOUNCE_FIELD_NUMBER: _ClassVar[int]
    WRITEBACK_TMP_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_AS_FIELD_NUMBER: _ClassVar[int]
    VMALLOC_TOTAL_FIELD_NUMBER: _ClassVar[int]
    VMALLOC_USED_FIELD_NUMBER: _ClassVar[int]
    VMALLOC_CHUNK_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_CORRUPTED_FIELD_NUMBER: _ClassVar[int]
    ANON_HUGE_PAGES_FIELD_NUMBER: _ClassVar[int]
    SHMEM_HUGE_PAGES_FIELD_NUMBER: _ClassVar[int]
    SHMEM_PMD_MAPPED_FIELD_NUMBER: _ClassVar[int]
    CMA_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CMA_FREE_FIELD_NUMBER: _ClassVar[int]
    HUGE_PAGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    HUGE_PAGES_FREE_FIELD_NUMBER: _ClassVar[int]
    HUGE_PAGES_RSVD_FIELD_NUMBER: _ClassVar[int]
    HUGE_PAGES_SURP_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGESIZE_FIELD_NUMBER: _ClassVar[int]
    DIRECT_MAP4K_FIELD_NUMBER: _ClassVar[int]
    DIRECT_MAP2M_FIELD_NUMBER: _ClassVar[int]
    DIRECT_MAP1G_FIELD_NUMBER: _ClassVar[int]
    mem_total: int
    mem_used: int
    mem_available: int
    buffers: int
    cached: int
    swap_cached: int
    active: int
    inactive: int
    active_anon: int
    inactive_anon: int
    active_file: int
    inactive_file: int
    unevictable: int
    mlocked: int
    swap_total: int
    swap_free: int
    dirty: int
    writeback: int
    anon_pages: int
    mapped: int
    shmem: int
    slab: int
    s_reclaimable: int
    s_unreclaim: int
    kernel_stack: int
    page_tables: int
    nf_sunstable: int
    bounce: int
    writeback_tmp: int
    commit_limit: int
    committed_as: int
    vmalloc_total: int
    vmalloc_used: int
    vmalloc_chunk: int
    hardware_corrupted: int
    anon_huge_pages: int
    shmem_huge_pages: int
    shmem_pmd_mapped: int
    cma_total: int
    cma_free: int
    huge_pages_total: int
    huge_pages_free: int
    huge_pages_rsvd: int
    huge_pages_surp: int
    hugepagesize: int
    direct_map4k: int
    direct_map2m: int
    direct_map1g: int
    def __init__(self, mem_total: _Optional[int] = ..., mem_used: _Optional[int] = ..., mem_available: _Optional[int] = ..., buffers: _Optional[int] = ..., cached: _Optional[int] = ..., swap_cached: _Optional[int] = ..., active: _Optional[int] = ..., inactive: _Optional[int] = ..., active_anon: _Optional[int] = ..., inactive_anon: _Optional[int] = ..., active_file: _Optional[int] = ..., inactive_file: _Optional[int] = ..., unevictable: _Optional[int] = ..., mlocked: _Optional[int] = ..., swap_total: _Optional[int] = ..., swap_free: _Optional[int] = ..., dirty: _Optional[int] = ..., writeback: _Optional[int] = ..., anon_pages: _Optional[int] = ..., mapped: _Optional[int] = ..., shmem: _Optional[int] = ..., slab: _Optional[int] = ..., s_reclaimable: _Optional[int] = ..., s_unreclaim: _Optional[int] = ..., kernel_stack: _Optional[int] = ..., page_tables: _Optional[int] = ..., nf_sunstable: _Optional[int] = ..., bounce: _Optional[int] = ..., writeback_tmp: _Optional[int] = ..., commit_limit: _Optional[int] = ..., committed_as: _Optional[int] = ..., vmalloc_total: _Optional[int] = ..., vmalloc_used: _Optional[int] = ..., vmalloc_chunk: _Optional[int] = ..., hardware_corrupted: _Optional[int] = ..., anon_huge_pages: _Optional[int] = ..., shmem_huge_pages: _Optional[int] = ..., shmem_pmd_mapped: _Optional[int] = ..., cma_total: _Optional[int] = ..., cma_free: _Optional[int] = ..., huge_pages_total: _Optional[int] = ..., huge_pages_free: _Optional[int] = ..., huge_pages_rsvd: _Optional[int] = ..., huge_pages_surp: _Optional[int] = ..., hugepagesize: _Optional[int] = ..., direct_map4k: _Optional[int] = ..., direct_map2m: _Optional[int] = ..., direct_map1g: _Optional[int] = ...) -> None: ...
