"""A reset's wipe of real system partitions (:class:`~ichor.machined.partitions.DiskPartitions`) on a
loop device (root) holding the GPT the installer writes: the wiped partition reads back as zeros
even while a file on it is still open, the other keeps its files, STATE's wipe drops META's
StateEncryptionConfig tag, and a wiped partition is formatted again on its next mount. The
directory form (container nodes) is checked beside it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest
from disk_helpers import GIB, loop_device, need, sparse

from ichor.installer import format_if_blank
from ichor.machined.partitions import DirectoryPartitions, DiskPartitions
from ichor.machined.platform import Layout
from ichor.machinery import proc
from ichor.machinery.blockdev import (
    Label,
    partition_path,
    plan,
    read_disk_table,
    talos_layout,
    write_disk_table,
)
from ichor.machinery.meta import MetaKey

CHUNK = 8 << 20
DISK = 1400 << 20
"""Talos's layout with an EPHEMERAL of ~190 MiB: reading it back stays well under a second."""


BLKFLSBUF = 0x1261  # linux/fs.h: _IO(0x12, 97)


def _zeros(device: str) -> bool:
    """Every byte of ``device`` reads back as zero. The wipe writes through the whole disk's device;
    a partition device keeps its own page cache while anything else (a host's udev probe) holds it
    open, so that cache is dropped first (BLKFLSBUF) and the read sees the disk."""
    fd = os.open(device, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, BLKFLSBUF)
        blank = bytes(CHUNK)
        while chunk := os.read(fd, CHUNK):
            if chunk != blank[: len(chunk)]:
                return False
        return True
    finally:
        os.close(fd)


def test_a_reset_zeroes_the_chosen_partition_and_leaves_the_others(tmp_path: Path) -> None:
    need("mkfs.xfs", "blkid")
    with loop_device(sparse(tmp_path / "disk.raw", DISK), "wipes partitions of a loop device") as dev:
        write_disk_table(dev, plan(DISK, talos_layout()))
        table = read_disk_table(dev)
        assert table is not None
        state = partition_path(dev, table.by_name(Label.STATE).number)  # type: ignore[union-attr]
        ephemeral = partition_path(dev, table.by_name(Label.EPHEMERAL).number)  # type: ignore[union-attr]
        mounts = {Label.STATE.value: tmp_path / "state", Label.EPHEMERAL.value: tmp_path / "var"}
        for label, device in ((Label.STATE, state), (Label.EPHEMERAL, ephemeral)):
            assert format_if_blank(Path(device), label)
            mounts[label].mkdir()
            proc.run(["mount", "-t", "xfs", device, str(mounts[label])])
        deleted: list[int] = []
        disk = DiskPartitions(str(dev), Layout(tmp_path, "127.0.0.1"), mountpoints=mounts,
                              delete_meta_key=deleted.append)  # fmt: skip
        said: list[str] = []
        try:
            (mounts[Label.STATE] / "config.yaml").write_text("kept\n")
            held = (mounts[Label.EPHEMERAL] / "console.log").open("w")  # busy, as machined's log is
            held.write("x" * 100_000)
            held.flush()
            assert set(disk.labels()) == {"EFI", "BIOS", "BOOT", "META", "STATE", "EPHEMERAL"}

            disk.wipe(["EPHEMERAL"], said.append)
            assert not os.path.ismount(mounts[Label.EPHEMERAL])
            assert any("shut down and detached" in line for line in said), said
            assert "zeroed EPHEMERAL" in said
            held.write("after the wipe")  # the shut-down filesystem takes no more writes to the device
            with pytest.raises(OSError):
                held.flush()
            with contextlib.suppress(OSError):  # its buffer still cannot be written
                held.close()
            assert _zeros(ephemeral), "EPHEMERAL reads back as zeros"
            assert (mounts[Label.STATE] / "config.yaml").read_text() == "kept\n"
            assert proc.run(["blkid", "-p", "-o", "value", "-s", "TYPE", state]).stdout.strip() == "xfs"
            assert deleted == []

            disk.wipe(["STATE"], said.append)
            assert not os.path.ismount(mounts[Label.STATE])
            assert _zeros(state)
            assert deleted == [MetaKey.StateEncryptionConfig], "STATE without META drops tag 9"
            assert format_if_blank(Path(state), Label.STATE), "formatted again on its next mount"
        finally:
            for mountpoint in mounts.values():
                if os.path.ismount(mountpoint):
                    proc.run(["umount", "-l", str(mountpoint)], check=False)


def test_the_whole_disk_reset_fast_wipes_the_table(tmp_path: Path) -> None:
    image = tmp_path / "disk.raw"
    sparse(image, 2 * GIB)
    write_disk_table(image, plan(2 * GIB, talos_layout()))
    said: list[str] = []
    DiskPartitions(str(image), Layout(tmp_path, "127.0.0.1"), mountpoints={}).wipe(None, said.append)
    assert read_disk_table(image) is None
    assert said == [f"wiped the system disk {image}"]


def test_directories_stand_in_for_partitions_on_a_container_node(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.console_log.parent.mkdir(parents=True)
    layout.console_log.write_text("console\n")
    (layout.partition("EPHEMERAL") / "lib/etcd").mkdir(parents=True)
    layout.partition("STATE").mkdir(parents=True)
    layout.config_file.write_text("config\n")
    parts = DirectoryPartitions(layout)
    assert set(parts.labels()) == {"STATE", "EPHEMERAL", "META"}
    parts.wipe(["EPHEMERAL"], lambda _: None)
    assert not (layout.partition("EPHEMERAL") / "lib").exists()
    assert layout.console_log.read_text() == "console\n", "the console log survives, as a serial console"
    assert layout.config_file.read_text() == "config\n"
    parts.wipe(None, lambda _: None)
    assert not layout.config_file.exists()
    with pytest.raises(OSError, match="no disks of its own"):
        parts.wipe_disks(["/dev/vdb"], lambda _: None)
