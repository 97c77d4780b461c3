"""GPT, Talos's layout, superblock probes and /sys/block listing, checked against sgdisk/sfdisk/mkfs.

Unit tests work on sparse image files (no root). The loop-device test (marker ``root``) checks the
BLKPG path; it detaches its loop device and removes its file even when it fails.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_helpers import loop_device, need, sparse
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ichor.machinery import proc
from ichor.machinery.blockdev import (
    MIB,
    DiskType,
    Label,
    PartitionSpec,
    PartitionTableError,
    PartitionType,
    device_size,
    fast_wipe,
    find_partition,
    is_system_disk,
    kernel_partitions,
    list_disks,
    open_device,
    partition_path,
    plan,
    probe,
    read_disk_table,
    read_table,
    sync_partitions,
    talos_layout,
    write_disk_table,
    write_table,
    zero_range,
)

GIB = 1024 * MIB


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    return sparse(tmp_path / "disk.img", 2 * GIB)


def test_talos_layout_geometry(disk: Path) -> None:
    table = plan(2 * GIB, talos_layout(), mbr_bootable=True)
    mib = [(p.name, p.first_lba * 512 // MIB, p.size() // MIB) for p in table.partitions]
    assert mib == [
        ("EFI", 1, 100),
        ("BIOS", 101, 1),
        ("BOOT", 102, 1000),
        ("META", 1102, 1),
        ("STATE", 1103, 100),
        ("EPHEMERAL", 1203, 2047 - 1203),  # the rest, its end aligned down to a MiB before the backup GPT
    ]
    assert [p.legacy_bios_bootable for p in table.partitions] == [False, True, False, False, False, False]
    assert str(table.partitions[0].type_guid).upper() == PartitionType.EFI_SYSTEM
    assert table.first_usable_lba == 34 and table.last_usable_lba == 2 * GIB // 512 - 34
    uki = [(s.label, s.size // MIB) for s in talos_layout(uki=True)]
    assert uki == [("EFI", 1101), ("META", 1), ("STATE", 100), ("EPHEMERAL", 0)]


def test_gpt_written_is_what_sgdisk_and_sfdisk_read(disk: Path) -> None:
    need("sgdisk", "sfdisk")
    guid = uuid.UUID("8f1c8a9e-2d0b-4c43-9b6e-0d8f6f5a1e01")
    table = plan(2 * GIB, talos_layout(), mbr_bootable=True, disk_guid=guid)
    write_disk_table(disk, table)

    verify = proc.run(["sgdisk", "-v", str(disk)])
    assert "No problems found" in verify.stdout
    printed = proc.run(["sgdisk", "-p", str(disk)]).stdout
    assert f"Disk identifier (GUID): {str(guid).upper()}" in printed
    rows = [line.split() for line in printed.splitlines() if line.strip()[:1].isdigit()]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        (str(p.number), str(p.first_lba), p.name) for p in table.partitions
    ]
    assert [r[-2] for r in rows] == ["EF00", "EF02", "8300", "8300", "8300", "8300"]

    sf = json.loads(proc.run(["sfdisk", "--json", str(disk)]).stdout)["partitiontable"]
    assert sf["label"] == "gpt" and sf["id"] == str(guid).upper() and sf["firstlba"] == 34
    assert [(p["start"], p["size"], p["type"], p["name"], p.get("attrs")) for p in sf["partitions"]] == [
        (
            p.first_lba,
            p.size_sectors(),
            str(p.type_guid).upper(),
            p.name,
            "LegacyBIOSBootable" if p.legacy_bios_bootable else None,
        )
        for p in table.partitions
    ]
    assert [p["uuid"] for p in sf["partitions"]] == [str(p.guid).upper() for p in table.partitions]
    with disk.open("rb") as f:
        mbr = f.read(512)
    assert mbr[446] == 0x80 and mbr[450] == 0xEE and mbr[510:] == b"\x55\xaa"


def test_reads_what_sgdisk_writes(disk: Path) -> None:
    need("sgdisk")
    proc.run(
        ["sgdisk", "-n1:0:+100M", "-t1:EF00", "-c1:EFI", "-n2:0:+1M", "-t2:EF02", "-c2:BIOS", "-A2:set:2",
         "-n3:0:+1000M", "-t3:8300", "-c3:BOOT", "-n4:0:0", "-t4:8300", "-c4:EPHEMERAL", str(disk)]
    )  # fmt: skip
    table = read_disk_table(disk)
    assert table is not None and table.primary_ok
    assert table.names() == ["EFI", "BIOS", "BOOT", "EPHEMERAL"]
    bios = table.by_name("BIOS")
    assert bios is not None and bios.legacy_bios_bootable and bios.size() == MIB
    assert str(bios.type_guid).upper() == PartitionType.BIOS_BOOT


def test_backup_header_is_used_when_primary_is_damaged(disk: Path) -> None:
    table = plan(2 * GIB, talos_layout())
    write_disk_table(disk, table)
    with open_device(disk, write=True) as fd:
        os.pwrite(fd, b"garbage!", 512)
    again = read_disk_table(disk)
    assert again is not None and not again.primary_ok
    assert again.partitions == table.partitions and again.disk_guid == table.disk_guid


def test_damaged_entries_are_an_error_and_blank_disk_has_no_table(disk: Path) -> None:
    assert read_disk_table(disk) is None
    write_disk_table(disk, plan(2 * GIB, talos_layout()))
    with open_device(disk, write=True) as fd:
        os.pwrite(fd, b"\x01", 2 * 512 + 200)  # inside the primary entries
        os.pwrite(fd, b"\x01", 2 * GIB - 33 * 512 + 200)  # and the backup's
    with pytest.raises(PartitionTableError, match="fail their CRC32"):
        read_disk_table(disk)


def test_layout_that_does_not_fit_says_so() -> None:
    with pytest.raises(PartitionTableError, match=r"BOOT: requested partition size 1048576000, available is"):
        plan(512 * MIB, talos_layout())
    with pytest.raises(PartitionTableError, match="maximum size, but no space available"):
        plan(1203 * MIB + 40 * 512, talos_layout())


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 8),
            st.text(
                alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                min_size=1,
                max_size=36,
            ),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_gpt_round_trip(tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[int, str]]) -> None:
    disk = sparse(tmp_path_factory.mktemp("gpt") / "d.img", 64 * MIB)
    assume(all(len(name.encode("utf-16-le")) <= 72 for _, name in specs))
    layout = [PartitionSpec(name, PartitionType.LINUX_FILESYSTEM, mib * MIB or MIB) for mib, name in specs]
    try:
        table = plan(64 * MIB, layout)
    except PartitionTableError:
        return
    with open_device(disk, write=True) as fd:
        write_table(fd, table, sync=False)
        assert read_table(fd, 64 * MIB) == table


def test_probes_know_what_mkfs_made(tmp_path: Path) -> None:
    need("mkfs.xfs", "mkfs.vfat", "mkfs.ext4", "mksquashfs")
    xfs = sparse(tmp_path / "xfs", 300 * MIB)
    proc.run(["mkfs.xfs", "-q", "-f", "-L", "BOOT", str(xfs)])
    vfat = sparse(tmp_path / "vfat", 100 * MIB)
    proc.run(["mkfs.vfat", "-F", "32", "-n", "EFI", "-i", "1234ABCD", str(vfat)])
    ext4 = sparse(tmp_path / "ext4", 16 * MIB)
    proc.run(["mkfs.ext4", "-q", "-F", "-L", "data", "-U", "0b4d4f41-2b2c-4d1e-9e1a-5c3e6a7b8c9d", str(ext4)])
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree/file").write_text("x")
    sq = tmp_path / "sq"
    proc.run(["mksquashfs", str(tmp_path / "tree"), str(sq), "-noappend", "-quiet"])

    found = probe(xfs)
    assert found is not None and (found.type, found.label) == ("xfs", "BOOT")
    blkid = proc.run(["blkid", "-o", "value", "-s", "UUID", str(xfs)]).stdout.strip()
    assert found.uuid == blkid
    assert probe(vfat) == probe(vfat) is not None
    v = probe(vfat)
    assert v is not None and (v.type, v.label, v.uuid) == ("vfat", "EFI", "1234-ABCD")
    e = probe(ext4)
    assert e is not None and (e.type, e.label, e.uuid) == (
        "ext4",
        "data",
        "0b4d4f41-2b2c-4d1e-9e1a-5c3e6a7b8c9d",
    )
    s = probe(sq)
    assert s is not None and s.type == "squashfs"
    assert probe(sparse(tmp_path / "zero", MIB)) is None


def test_zero_range_and_fast_wipe_on_a_file(disk: Path) -> None:
    write_disk_table(disk, plan(2 * GIB, talos_layout()))
    with open_device(disk, write=True) as fd:
        os.pwrite(fd, b"\xaa" * 4096, 500 * MIB)
        assert zero_range(fd, 500 * MIB, 4096) == "punchhole"
        assert os.pread(fd, 4096, 500 * MIB) == bytes(4096)
        assert device_size(fd) == 2 * GIB
        fast_wipe(fd)
    assert read_disk_table(disk) is None
    assert disk.stat().st_size == 2 * GIB


def test_list_disks_reads_sys_block_like_talos(tmp_path: Path) -> None:
    sysblock = tmp_path / "sys/block"
    devices = tmp_path / "sys/devices/pci0000:00/0000:00:04.0/virtio2/block"

    def dev(name: str, size: str, **files: str) -> None:
        real = devices / name
        for rel, text in {"size": size, **files}.items():
            (real / rel).parent.mkdir(parents=True, exist_ok=True)
            (real / rel).write_text(text + "\n")
        sysblock.mkdir(parents=True, exist_ok=True)
        (sysblock / name).symlink_to(os.path.relpath(real, sysblock))

    dev("vda", "12582912", **{"queue/rotational": "1", "serial": "ichor-0", "device/model": "QEMU"})
    dev("nvme0n1", "2048", **{"queue/rotational": "0", "wwid": "eui.1", "ro": "1"})
    dev("loop0", "4096")
    dev("sr0", "2048")
    dev("vdb", "0")
    disks = list_disks(sysblock)
    assert [(d.device_name, d.size, d.type, d.serial, d.model, d.read_only) for d in disks] == [
        ("/dev/nvme0n1", 2048 * 512, DiskType.NVME, "", "", True),
        ("/dev/vda", 6 * GIB, DiskType.HDD, "ichor-0", "QEMU", False),
    ]
    assert disks[0].wwid == "eui.1"
    assert disks[1].bus_path.startswith("/../") or "virtio2" in disks[1].bus_path
    assert list_disks(tmp_path / "missing") == []
    assert partition_path("/dev/loop3", 2) == "/dev/loop3p2" and partition_path("/dev/sda", 2) == "/dev/sda2"


# -- loop devices (root) -------------------------------------------------------------------------


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[str]:
    with loop_device(sparse(tmp_path / "loop.img", 2 * GIB), "attaches a loop device") as device:
        yield str(device)


@pytest.mark.root
def test_loop_device_gets_partitions_by_blkpg(loop_disk: str) -> None:
    table = plan(2 * GIB, talos_layout(), mbr_bootable=True)
    write_disk_table(loop_disk, table)
    with open_device(loop_disk) as fd:
        have = kernel_partitions(fd)
    assert have == {p.number: (p.first_lba * 512, p.size()) for p in table.partitions}
    meta = partition_path(loop_disk, 4)
    with open_device(meta) as fd:
        assert device_size(fd) == MIB
    assert read_disk_table(loop_disk) == table
    # a second, different layout replaces the kernel's partitions
    smaller = plan(2 * GIB, [PartitionSpec(Label.EPHEMERAL, PartitionType.LINUX_FILESYSTEM, 0)])
    write_disk_table(loop_disk, smaller)
    with open_device(loop_disk, write=True) as fd:
        assert set(kernel_partitions(fd)) == {1}
        fast_wipe(fd)
        sync_partitions(fd, plan(2 * GIB, []))
        assert kernel_partitions(fd) == {}


def test_find_partition_and_installed(tmp_path: Path) -> None:
    blank = sparse(tmp_path / "blank.img", 64 * MIB)
    data = sparse(tmp_path / "data.img", 64 * MIB)
    write_disk_table(data, plan(64 * MIB, [PartitionSpec("DATA", PartitionType.LINUX_FILESYSTEM, 0)]))
    system = sparse(tmp_path / "system.img", 2 * GIB)
    write_disk_table(system, plan(2 * GIB, talos_layout()))
    found = find_partition("META", [blank, data, tmp_path / "missing.img", system])
    assert found is not None
    disk, device, part = found
    assert (disk, device, part.number) == (str(system), f"{system}4", 4)
    assert find_partition("STATE", [blank, data]) is None
    assert is_system_disk(read_disk_table(system)) and not is_system_disk(read_disk_table(data))
    assert not is_system_disk(read_disk_table(blank))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3 * 512 + 128 * 128 - 1), st.integers(0, 255)), min_size=1, max_size=6)
)
def test_damaged_gpt_reads_or_refuses_cleanly(
    tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]]
) -> None:
    disk = sparse(tmp_path_factory.mktemp("gpt") / "d.img", 64 * MIB)
    table = plan(
        64 * MIB,
        [
            PartitionSpec("A", PartitionType.LINUX_FILESYSTEM, 8 * MIB),
            PartitionSpec("B", PartitionType.EFI_SYSTEM, 0),
        ],
    )
    with open_device(disk, write=True) as fd:
        write_table(fd, table, sync=False)
        for offset, value in flips:  # damage the MBR, the primary header and its entries
            os.pwrite(fd, bytes([value]), offset)
        try:
            again = read_table(fd, 64 * MIB)
        except PartitionTableError:
            return
    # a damaged primary is never trusted: what is read is the table written (from either copy)
    assert again is not None and again.partitions == table.partitions
