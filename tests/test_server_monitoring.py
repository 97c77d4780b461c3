"""SystemStat, CPUInfo, LoadAvg, NetworkDeviceStats, DiskStats, DiskUsage, LogsContainers and the
RPCs Talos refuses in container mode, on machined's MachineService (real grpclib server on a unix
socket, as apid reaches it); the /proc parsers on fixed kernel texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import empty_pb2
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from test_server_machine import run, serving

from ichor.api.gen.machine import machine_pb2
from ichor.machined.server import _monitoring

STAT = """cpu  333558 81578 70717 178167 1176 0 1227 7057 0 0
cpu0 165826 39413 33584 93923 265 0 229 3478 0 0
cpu2 167731 42165 37133 84244 910 0 997 3578 0 0
intr 4175148 0 7 9
ctxt 7374312
btime 1795722144
processes 67530
procs_running 5
procs_blocked 1
softirq 1742280 0 269546 10 273620 357435 0 5858 155240 8357 672214
"""

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2445.406
cache size\t: 512 KB
siblings\t: 2
cpu cores\t: 2
flags\t\t: fpu vme de
bugs\t\t: sysret_ss_attrs spectre_v1
bogomips\t: 4890.81
clflush size\t: 64
address sizes\t: 48 bits physical, 48 bits virtual
power management:

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
"""

NETDEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
  eth0: 1000  10    1    0    0     0          0         3 2000  20    0    0    0     0       0          0
    lo: 500  5    0    0    0     0          0         0 500  5    0    0    0     0       0          0
"""

DISKSTATS = """   7       0 loop0 4892 0 180882 1703 961 4002 14611034 1390 0 2876 4147 18 0 60473344 47 177 1006
 259       1 vda 10 1 20 30 40 5 60 70 0 80 90 1 2 3 4 5 6
   8       0 old 1 2 3 4 5 6 7 8 9 10 11
"""


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    (tmp_path / "net").mkdir()
    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    (tmp_path / "loadavg").write_text("7.35 9.01 9.84 5/142 2641\n")
    (tmp_path / "net/dev").write_text(NETDEV)
    (tmp_path / "diskstats").write_text(DISKSTATS)
    return tmp_path


def test_system_stat_is_proc_stat_in_seconds_with_a_dense_cpu_list(proc: Path) -> None:
    stat = _monitoring.system_stat(proc)
    assert stat.cpu_total.user == pytest.approx(3335.58) and stat.cpu_total.steal == pytest.approx(70.57)
    # cpu1 is missing (offline): Talos's dense list keeps its slot, empty
    assert len(stat.cpu) == 3 and stat.cpu[1] == machine_pb2.CPUStat()
    assert stat.cpu[2].idle == pytest.approx(842.44)
    assert (stat.irq_total, list(stat.irq)) == (4175148, [0, 7, 9])
    assert (stat.boot_time, stat.context_switches, stat.process_created) == (1795722144, 7374312, 67530)
    assert (stat.process_running, stat.process_blocked) == (5, 1)
    assert stat.soft_irq_total == 1742280 and stat.soft_irq.timer == 269546 and stat.soft_irq.rcu == 672214


def test_cpu_info_load_net_and_disk(proc: Path) -> None:
    first, second = _monitoring.cpu_info(proc)
    assert (first.processor, first.vendor_id, first.cpu_family, first.model_name) == (
        0,
        "AuthenticAMD",
        "25",
        "AMD EPYC",
    )
    assert first.cpu_mhz == pytest.approx(2445.406) and first.cache_size == "512 KB"
    assert (first.siblings, first.cpu_cores, first.cl_flush_size) == (2, 2, 64)
    assert list(first.flags) == ["fpu", "vme", "de"] and list(first.bugs) == ["sysret_ss_attrs", "spectre_v1"]
    assert first.address_sizes == "48 bits physical, 48 bits virtual" and first.power_management == ""
    assert second.processor == 1 and second.model_name == "AMD EPYC"

    load = _monitoring.load_avg(proc)
    assert (load.load1, load.load5, load.load15) == (7.35, 9.01, 9.84)

    net = _monitoring.network_device_stats(proc)
    assert [d.name for d in net.devices] == ["eth0", "lo"]
    assert (
        net.devices[0].rx_bytes == 1000 and net.devices[0].rx_errors == 1 and net.devices[0].rx_multicast == 3
    )
    assert net.devices[0].tx_packets == 20
    assert net.total.name == "eth0, lo" and net.total.rx_bytes == 1500 and net.total.tx_bytes == 2500

    disks = _monitoring.disk_stats(proc)
    assert [d.name for d in disks.devices] == ["loop0", "vda"]  # the 14-field line is skipped, as Talos does
    vda = disks.devices[1]
    assert (vda.read_completed, vda.write_time_ms, vda.io_time_weighted_ms, vda.discard_time_ms) == (
        10,
        70,
        90,
        4,
    )
    assert disks.total.read_completed == 4902 and disks.total.discard_sectors == 60473347


def test_the_rpcs_answer_from_this_kernel() -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, _):
            stat = (await stub.SystemStat(empty_pb2.Empty())).messages[0]
            assert stat.boot_time > 0 and stat.cpu_total.user > 0 and len(stat.cpu) >= 1
            cpus = (await stub.CPUInfo(empty_pb2.Empty())).messages[0].cpu_info
            assert len(cpus) == len(stat.cpu)
            load = (await stub.LoadAvg(empty_pb2.Empty())).messages[0]
            assert load.load1 >= 0
            net = (await stub.NetworkDeviceStats(empty_pb2.Empty())).messages[0]
            assert "lo" in [d.name for d in net.devices]
            disks = (await stub.DiskStats(empty_pb2.Empty())).messages[0]
            assert disks.HasField("total")

    run(go())


async def _usage(stub: Any, **fields: Any) -> list[tuple[str, int, str]]:
    async with stub.DiskUsage.open() as call:
        await call.send_message(machine_pb2.DiskUsageRequest(**fields), end=True)
        return [(m.relative_name, m.size, m.error) async for m in call]


def test_disk_usage_sums_directories_and_applies_talos_filters() -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, node):
            root = node.layout.path("/var/lib/u")
            (root / "a/b").mkdir(parents=True)
            (root / "top.bin").write_bytes(b"x" * 1000)
            (root / "a/one.bin").write_bytes(b"x" * 300)
            (root / "a/b/two.bin").write_bytes(b"x" * 20)
            dir_size = root.stat().st_size  # every directory counts its own size too, as in Talos
            total = 1320 + 3 * dir_size
            # talosctl usage's default: --depth 0 is recursion_depth 1: only the path itself
            assert await _usage(stub, paths=["/var/lib/u"], recursion_depth=1) == [(".", total, "")]
            # no depth limit, directories only: post-order, the path last
            everything = await _usage(stub, paths=["var/lib/u/"])
            assert everything == [("a/b", 20 + dir_size, ""), ("a", 320 + 2 * dir_size, ""), (".", total, "")]
            with_files = await _usage(stub, paths=["/var/lib/u"], all=True, recursion_depth=2)
            assert with_files == [("a", 320 + 2 * dir_size, ""), ("top.bin", 1000, ""), (".", total, "")]
            listing = await _usage(stub, paths=["/var/lib/u"], all=True)
            assert [name for name, _, _ in listing] == [
                "a/b/two.bin",
                "a/b",
                "a/one.bin",
                "a",
                "top.bin",
                ".",
            ]
            for threshold in (300, 301, 1000, -20, -300, -1000):
                kept = await _usage(stub, paths=["/var/lib/u"], all=True, threshold=threshold)
                expected = [
                    e for e in listing if (e[1] >= threshold if threshold > 0 else e[1] <= -threshold)
                ]
                assert kept == expected, threshold
            # under "/" the top-level directories are depth 0 (Talos counts separators): listed by default
            top = await _usage(stub, paths=["/"], recursion_depth=1)
            assert [name for name, _, _ in top][-1] == "." and "var" in [name for name, _, _ in top]
            assert "var/lib" not in [name for name, _, _ in top]
            assert dict((n, s) for n, s, _ in top)["."] >= total + 1000
            missing = await _usage(stub, paths=["/nope", "/var/lib/u/a/b"], recursion_depth=1)
            assert missing == [
                ("/nope", 0, "lstat /nope: no such file or directory"),
                (".", 20 + dir_size, ""),
            ]

    run(go())


def test_logs_containers_and_unknown_log_as_talos() -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, node):
            reply = await stub.LogsContainers(empty_pb2.Empty())
            assert list(reply.messages[0].ids) == ["chatty"]
            node.layout.controller_runtime_log.write_text("started\n")
            reply = await stub.LogsContainers(empty_pb2.Empty())
            assert list(reply.messages[0].ids) == ["chatty", "controller-runtime"]
            with pytest.raises(GRPCError) as unknown:
                async with stub.Logs.open() as call:
                    await call.send_message(
                        machine_pb2.LogsRequest(namespace="system", id="nosuch"), end=True
                    )
                    [m async for m in call]
            assert unknown.value.status is Status.UNKNOWN
            assert unknown.value.message == 'log "nosuch" was not registered'

    run(go())


@pytest.mark.parametrize(
    ("name", "request_type"),
    [
        ("Upgrade", machine_pb2.UpgradeRequest),
        ("Rollback", machine_pb2.RollbackRequest),
        ("MetaWrite", machine_pb2.MetaWriteRequest),
        ("MetaDelete", machine_pb2.MetaDeleteRequest),
    ],
)
def test_what_container_mode_lacks_is_failed_precondition(name: str, request_type: Any) -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, _):
            with pytest.raises(GRPCError) as denied:
                await getattr(stub, name)(request_type())
            assert denied.value.status is Status.PERMISSION_DENIED  # admin only, checked first
        async with serving() as (stub, node):
            assert node.layout.platform.mode == "container"
            with pytest.raises(GRPCError) as refused:
                await getattr(stub, name)(request_type())
            assert refused.value.status is Status.FAILED_PRECONDITION
            assert refused.value.message == "method is not supported in container mode"

    run(go())
