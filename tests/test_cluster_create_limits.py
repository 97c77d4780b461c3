"""``cluster create --cpus/--memory``: a container node's cgroup gets Docker's CFS quota and a memory
limit, in v1 and v2 hierarchies laid out in a temporary directory (no real cgroup touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.machinery.errors import MachineryError
from ichor.provision._cgroups import Hierarchy, Limits, create, limit, parse_cpus


def test_cpus_are_a_rational_share_in_nano_cpus_as_talos_parses_them() -> None:
    assert parse_cpus("2.0") == 2_000_000_000
    assert parse_cpus("0.5") == parse_cpus("1/2") == 500_000_000
    with pytest.raises(
        MachineryError, match="error parsing --cpus-workers: failed to parsing as a rational number: two"
    ):
        parse_cpus("two", flag="--cpus-workers")
    with pytest.raises(MachineryError, match="value is too precise"):
        parse_cpus("0.0000000001")
    with pytest.raises(MachineryError, match="above 0"):
        parse_cpus("0")


def _v1(tmp_path: Path) -> list[Hierarchy]:
    found = []
    for options in ("cpu,cpuacct", "memory", "pids"):
        mount = tmp_path / options
        mount.mkdir()
        found.append(Hierarchy(mount, options, ""))
    return found


def test_v1_limits_go_into_the_cpu_and_memory_hierarchies(tmp_path: Path) -> None:
    found = _v1(tmp_path)
    dirs = create(found, "c", "c-controlplane-1")
    done = limit(found, dirs, Limits.of("1.5", 3072))
    cpu, memory, pids = dirs
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000\n"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000\n"
    assert (memory / "memory.limit_in_bytes").read_text() == f"{3072 * 1024 * 1024}\n"
    assert list(pids.iterdir()) == []
    assert done == [
        "CPU limit 1.5 (150000 us every 100000 us)",
        "memory limit 3072 MiB (memory.limit_in_bytes)",
    ]


def test_no_flag_no_limit(tmp_path: Path) -> None:
    found = _v1(tmp_path)
    dirs = create(found, "c", "n")
    assert limit(found, dirs, Limits.of("", 0)) == []
    assert all(list(d.iterdir()) == [] for d in dirs)


def test_v2_enables_the_controllers_down_to_the_node(tmp_path: Path) -> None:
    mount = tmp_path / "unified"
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpu io memory pids\n")
    found = [Hierarchy(mount, "", "")]
    (node,) = create(found, "c", "n")
    (node / "cgroup.controllers").write_text("cpu memory\n")  # what the kernel shows once enabled above
    limit(found, [node], Limits.of("0.25", 512))
    assert (node / "cpu.max").read_text() == "25000 100000\n"
    assert (node / "memory.max").read_text() == f"{512 * 1024 * 1024}\n"
    for level in (mount, mount / "ichor", mount / "ichor/c"):
        assert (level / "cgroup.subtree_control").read_text() == "+memory\n"  # the last write (cpu first)


def test_a_limit_no_hierarchy_can_take_is_refused(tmp_path: Path) -> None:
    mount = tmp_path / "pids"
    mount.mkdir()
    found = [Hierarchy(mount, "pids", "")]
    dirs = create(found, "c", "n")
    with pytest.raises(
        MachineryError, match="--memory: no cgroup hierarchy on this machine has the memory controller"
    ):
        limit(found, dirs, Limits.of("", 1024))
    with pytest.raises(MachineryError, match="below the kernel's smallest CFS quota"):
        limit(found, dirs, Limits.of("0.001", 0))
