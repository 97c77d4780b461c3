"""CPUStats, MemoryStats and MountStatuses (issue 25 §3): the kernel's counters and the node's
mounted system partitions, read from a /proc-like tree and a mount table as Talos reads them, and
served in Talos's typed form (its field numbers) with its columns and aliases."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_helpers import run, running

from ichor.machined.controllers import mounts, perf
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.platform import Layout
from ichor.machined.resources import register_node_types
from ichor.machined.resources._mounts import MOUNT_STATUSES, MountStatusSpec
from ichor.machined.resources._perf import CPU_STATS, MEMORY_STATS, CPUStat
from ichor.machined.resources._protoenc import encode_spec, message_class
from ichor.machinery.jsonpath import render_jsonpath

STAT = """cpu  3718632 2323500 760992 3051759 46862 0 29353 63543 0 0
cpu0 1760227 1182238 363390 1633586 13758 0 11596 31184 0 0
cpu2 1958404 1141262 397602 1418173 33103 0 17757 32358 0 0
intr 94473250 0 0 0 1
ctxt 206737657
btime 1764000000
processes 412345
procs_running 3
procs_blocked 1
softirq 40123456 1 2 3
"""
MEMINFO = """MemTotal:       16318480 kB
MemFree:         1200000 kB
MemAvailable:    9876543 kB
Buffers:          123456 kB
Cached:          4567890 kB
Active(anon):    3123456 kB
SReclaimable:     500000 kB
NFS_Unstable:          7 kB
WritebackTmp:          9 kB
Committed_AS:   12000000 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
DirectMap2M:     9000000 kB
DirectMap1G:     8388608 kB
"""


def test_cpu_stats_are_procs_ticks_in_seconds_per_cpu_by_number() -> None:
    spec = perf.cpu_stats(STAT)
    assert spec.cpu_total == CPUStat(
        37186.32, 23235.0, 7609.92, 30517.59, 468.62, 0.0, 293.53, 635.43, 0.0, 0.0
    )
    # cpu1 is missing (offline): Go's procfs leaves a zero entry at its index
    assert [c.user for c in spec.cpu] == [17602.27, 0.0, 19584.04]
    assert (spec.irq_total, spec.context_switches, spec.process_created) == (94473250, 206737657, 412345)
    assert (spec.process_running, spec.process_blocked, spec.soft_irq_total) == (3, 1, 40123456)


def test_memory_stats_are_meminfo_in_kb_with_used_as_talos_computes_it() -> None:
    spec = perf.memory_stats(MEMINFO)
    assert (spec.mem_total, spec.mem_used, spec.mem_available) == (16318480, 16318480 - 1200000, 9876543)
    assert (spec.active_anon, spec.s_reclaimable, spec.nfs_unstable, spec.writeback_tmp) == (
        3123456,
        500000,
        7,
        9,
    )
    assert (spec.committed_as, spec.hugepagesize, spec.direct_map2m, spec.direct_map1g) == (
        12000000,
        2048,
        9000000,
        8388608,
    )
    plain = spec_to_plain(spec)  # Talos's own YAML spellings
    assert plain["total"] == 16318480 and plain["commitTedas"] == 12000000 and plain["writeBacktmp"] == 9
    assert plain["sreclaimable"] == 500000 and plain["nfsunstable"] == 7 and plain["directMap2m"] == 9000000


def test_stats_controller_fills_both_from_proc_and_follows_it(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "meminfo").write_text(MEMINFO)

    async def main() -> None:
        async with running(perf.StatsController(tmp_path, interval=0.05)) as state:
            await assert_resource(state, CPU_STATS, "latest", lambda r: r.spec.context_switches == 206737657)
            await assert_resource(state, MEMORY_STATS, "latest", lambda r: r.spec.mem_total == 16318480)
            assert state.list("perf", CPU_STATS)[0].metadata.namespace == "perf"
            (tmp_path / "meminfo").write_text(MEMINFO.replace("1200000", "200000"))
            await assert_resource(state, MEMORY_STATS, "latest", lambda r: r.spec.mem_used == 16118480)
            (tmp_path / "stat").unlink()
            await assert_resource(
                state, WAIT_STATUSES, "perf.StatsController", lambda r: "stat" in r.spec.reason
            )

    run(main)


def test_stats_of_this_machine_are_read(tmp_path: Path) -> None:
    """The real /proc of the machine running the test: the counters are there and plausible."""
    cpu = perf.cpu_stats(Path("/proc/stat").read_text())
    memory = perf.memory_stats(Path("/proc/meminfo").read_text())
    assert cpu.cpu and cpu.cpu_total.user + cpu.cpu_total.idle > 0 and cpu.context_switches > 0
    assert 0 < memory.mem_used <= memory.mem_total and memory.mem_available > 0


def test_perf_specs_decode_with_talos_field_numbers() -> None:
    cpu = perf.cpu_stats(STAT)
    message = message_class("talos.resource.definitions.perf.CPUSpec")()
    message.ParseFromString(encode_spec("CPUStats.perf.talos.dev", cpu))
    fields = {f.number: v for f, v in message.ListFields()}
    assert len(fields[1]) == 3 and fields[1][0].user == pytest.approx(17602.27)
    total = {f.number: v for f, v in fields[2].ListFields()}
    assert (
        total[1] == pytest.approx(37186.32)
        and total[7] == pytest.approx(293.53)
        and total[8] == pytest.approx(635.43)
    )
    assert (fields[3], fields[4], fields[5], fields[6], fields[7], fields[8]) == (
        94473250,
        206737657,
        412345,
        3,
        1,
        40123456,
    )

    memory = perf.memory_stats(MEMINFO)
    message = message_class("talos.resource.definitions.perf.MemorySpec")()
    message.ParseFromString(encode_spec("MemoryStats.perf.talos.dev", memory))
    fields = {f.number: v for f, v in message.ListFields()}
    assert (fields[1], fields[2], fields[3], fields[9]) == (16318480, 15118480, 9876543, 3123456)
    assert (fields[23], fields[27], fields[29], fields[31]) == (500000, 7, 9, 12000000)
    assert (fields[45], fields[47], fields[48]) == (2048, 9000000, 8388608)


def _columns(type_name: str) -> tuple[str, tuple[str, ...], list[tuple[str, str]]]:
    registry = Registry()
    register_node_types(registry)
    spec = registry.get(type_name).spec
    return spec.default_namespace, spec.aliases, [(c.name, c.json_path) for c in spec.print_columns]


def test_get_prints_talos_columns() -> None:
    assert _columns("CPUStats.perf.talos.dev")[::2] == (
        "perf",
        [("User", "{.cpuTotal.user}"), ("System", "{.cpuTotal.system}")],
    )
    assert _columns("MemoryStats.perf.talos.dev")[::2] == (
        "perf",
        [("Used", "{.used}"), ("Total", "{.total}")],
    )
    namespace, aliases, columns = _columns("MountStatuses.runtime.talos.dev")
    assert namespace == "runtime" and "mounts" in aliases
    assert columns == [
        ("Source", "{.source}"),
        ("Target", "{.target}"),
        ("Filesystem Type", "{.filesystemType}"),
    ]
    memory = spec_to_plain(perf.memory_stats(MEMINFO))
    assert [render_jsonpath(p, memory) for _, p in _columns("MemoryStats.perf.talos.dev")[2]] == [
        "15118480",
        "16318480",
    ]


MOUNTS = """/dev/sda1 /etc/hosts ext4 rw,relatime 0 0
tmpfs / tmpfs rw,nosuid 0 0
/dev/sda1 /system/state ext4 rw,relatime 0 0
/dev/sda1 /system/meta ext4 rw,relatime 0 0
/dev/vdb1 /var xfs rw,noatime 0 0
/dev/vdb2 /var xfs rw,noatime,nodiratime 0 0
/dev/sdc1 /other\\040dir ext4 rw 0 0
"""


def test_mount_statuses_are_the_mounted_system_partitions_never_meta() -> None:
    found = mounts.mount_statuses(MOUNTS, Layout(Path("/"), "10.5.0.2"))
    assert found == {
        "STATE": MountStatusSpec("/dev/sda1", "/system/state", "ext4", ("rw", "relatime")),
        # the topmost mount at /var is the one in use
        "EPHEMERAL": MountStatusSpec("/dev/vdb2", "/var", "xfs", ("rw", "noatime", "nodiratime")),
    }


def test_a_node_under_a_host_directory_matches_its_own_paths(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "127.0.0.1")
    table = f"/dev/sdz9 {tmp_path}/system/state ext4 rw 0 0\n/dev/sda1 /system/state ext4 rw 0 0\n"
    assert mounts.mount_statuses(table, layout) == {
        "STATE": MountStatusSpec("/dev/sdz9", "/system/state", "ext4", ("rw",))
    }
    # a process node's partitions are plain directories: nothing mounted, nothing listed
    assert mounts.mount_statuses(Path("/proc/self/mounts").read_text(), layout) == {}


def test_mount_status_controller_follows_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text(MOUNTS)

    async def main() -> None:
        controller = mounts.MountStatusController(
            Layout(Path("/"), "10.5.0.2"), mount_table=table, rescan=0.05
        )
        async with running(controller) as state:
            await assert_resource(state, MOUNT_STATUSES, "STATE", lambda r: r.spec.source == "/dev/sda1")
            await assert_resource(
                state, MOUNT_STATUSES, "EPHEMERAL", lambda r: r.spec.filesystem_type == "xfs"
            )
            table.write_text("/dev/sda1 /system/state ext4 rw 0 0\n")  # /var unmounted
            await assert_no_resource(state, MOUNT_STATUSES, "EPHEMERAL")
            assert [r.id for r in state.list("runtime", MOUNT_STATUSES)] == ["STATE"]

    run(main)


def test_mount_status_decodes_with_talos_field_numbers() -> None:
    spec = MountStatusSpec("/dev/sda1", "/system/state", "ext4", ("rw", "relatime"), True, ("static",))
    message = message_class("talos.resource.definitions.runtime.MountStatusSpec")()
    message.ParseFromString(encode_spec("MountStatuses.runtime.talos.dev", spec))
    fields = {f.number: v for f, v in message.ListFields()}
    assert fields == {
        1: "/dev/sda1",
        2: "/system/state",
        3: "ext4",
        4: ["rw", "relatime"],
        5: True,
        6: ["static"],
    }
