"""The disks of a node: GPT, Talos 1.7's partition layout, superblock probes, /sys/block, BLKPG.

Pure Python (struct + ioctls), usable on image files without root and on block devices as root:

- :func:`plan` places :func:`talos_layout` (EFI, BIOS, BOOT, META, STATE, EPHEMERAL) on a disk,
  :func:`write_table`/:func:`read_table` encode and decode the GPT (both headers, CRC32s),
  :func:`read_disk_table`/:func:`write_disk_table` do it by path and tell the kernel (BLKPG).
- :func:`find_partition` finds a labelled partition on the node's disks; :func:`is_system_disk`.
- :func:`probe` says which filesystem a partition holds (xfs, vfat, ext4, squashfs, LUKS).
- :func:`list_disks` is what ``talosctl disks`` shows.
- :func:`fast_wipe`, :func:`zero_range` wipe; :func:`sync_partitions` adds/removes kernel partitions.

Errors are :class:`~ichor.machinery.errors.PartitionTableError`. This package never decides which
disk to install to or what to wipe; the installer and the reset rules do.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ichor.machinery.blockdev._device import (
    FAST_WIPE_RANGE,
    add_partition,
    delete_partition,
    device_size,
    fast_wipe,
    is_block_device,
    kernel_partitions,
    open_device,
    partition_path,
    sector_size,
    sync_partitions,
    zero_range,
)
from ichor.machinery.blockdev._gpt import (
    ATTR_LEGACY_BIOS_BOOTABLE,
    ENTRY_COUNT,
    Partition,
    PartitionTable,
    new_table,
    read_table,
    write_table,
)
from ichor.machinery.blockdev._layout import (
    ALIGNMENT,
    MIB,
    FileSystem,
    Label,
    PartitionSpec,
    PartitionType,
    plan,
    talos_layout,
)
from ichor.machinery.blockdev._probe import Superblock, probe, probe_bytes
from ichor.machinery.blockdev._sysblock import Disk, DiskType, get_disk, list_disks
from ichor.machinery.errors import MachineryError, PartitionTableError

__all__ = [
    "ALIGNMENT",
    "ATTR_LEGACY_BIOS_BOOTABLE",
    "ENTRY_COUNT",
    "FAST_WIPE_RANGE",
    "INSTALLED_LABELS",
    "MIB",
    "Disk",
    "DiskType",
    "FileSystem",
    "Label",
    "Partition",
    "PartitionSpec",
    "PartitionTable",
    "PartitionTableError",
    "PartitionType",
    "Superblock",
    "add_partition",
    "delete_partition",
    "device_size",
    "fast_wipe",
    "find_partition",
    "find_system_disk",
    "get_disk",
    "is_block_device",
    "is_system_disk",
    "kernel_partitions",
    "list_disks",
    "new_table",
    "open_device",
    "partition_path",
    "plan",
    "probe",
    "probe_bytes",
    "read_disk_table",
    "read_table",
    "sector_size",
    "sync_partitions",
    "talos_layout",
    "write_disk_table",
    "write_table",
    "zero_range",
]


INSTALLED_LABELS = (Label.EPHEMERAL, Label.BOOT, Label.EFI, Label.STATE)
"""A disk whose GPT has one of these is a Talos system disk (machined's ``probeDisks``)."""


def is_system_disk(table: PartitionTable | None) -> bool:
    """Whether a GPT is a Talos install: it names EPHEMERAL, BOOT, EFI or STATE."""
    return table is not None and any(table.by_name(label) for label in INSTALLED_LABELS)


def find_system_disk(sysblock: str | os.PathLike[str] = "/sys/block") -> tuple[str, PartitionTable] | None:
    """The first disk holding a Talos install (:func:`is_system_disk`) and its GPT. Disks that cannot
    be opened or hold a damaged GPT are skipped."""
    for disk in list_disks(sysblock):
        try:
            table = read_disk_table(disk.device_name)
        except (MachineryError, OSError):
            continue
        if table is not None and is_system_disk(table):
            return disk.device_name, table
    return None


def find_partition(
    label: str, disks: Iterable[str | os.PathLike[str]] | None = None
) -> tuple[str, str, Partition] | None:
    """The first disk holding a GPT partition named ``label``: (disk, partition device, partition).

    Talos's ``probe.GetDevWithPartitionName``; ``disks`` defaults to :func:`list_disks`. Disks that
    cannot be opened or hold a damaged GPT are skipped.
    """
    candidates = [d.device_name for d in list_disks()] if disks is None else [os.fspath(d) for d in disks]
    for disk in candidates:
        try:
            table = read_disk_table(disk)
        except PartitionTableError:
            continue
        part = table.by_name(label) if table else None
        if part is not None:
            return disk, partition_path(disk, part.number), part
    return None


def read_disk_table(path: str | os.PathLike[str]) -> PartitionTable | None:
    """The GPT of a disk or image file by path; None when it has none."""
    with open_device(path) as fd:
        return read_table(fd, device_size(fd), sector_size(fd))


def write_disk_table(path: str | os.PathLike[str], table: PartitionTable) -> None:
    """Write ``table`` to a disk or image file and, on a block device, sync the kernel's partitions."""
    with open_device(path, write=True) as fd:
        write_table(fd, table)
        sync_partitions(fd, table)
