"""The disks of a node: GPT, Talos 1.7's partition layout, superblock probes, /sys/block, BLKPG.

Pure Python (struct + ioctls), usable on image files without root and on block devices as root:

- :func:`plan` places :func:`talos_layout` (EFI, BIOS, BOOT, META, STATE, EPHEMERAL) on a disk,
  :func:`write_table`/:func:`read_table` encode and decode the GPT (both headers, CRC32s),
  :func:`read_disk_table`/:func:`write_disk_table` do it by path and tell the kernel (BLKPG).
- :func:`probe` says which filesystem a partition holds (xfs, vfat, ext4, squashfs, LUKS).
- :func:`list_disks` is what ``talosctl disks`` shows.
- :func:`fast_wipe`, :func:`zero_range` wipe; :func:`sync_partitions` adds/removes kernel partitions.

Errors are :class:`~ichor.machinery.errors.PartitionTableError`. This package never decides which
disk to install to or what to wipe; the installer and the reset rules do.
"""

from __future__ import annotations

import os

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
from ichor.machinery.errors import PartitionTableError

__all__ = [
    "ALIGNMENT",
    "ATTR_LEGACY_BIOS_BOOTABLE",
    "ENTRY_COUNT",
    "FAST_WIPE_RANGE",
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
    "get_disk",
    "is_block_device",
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


def read_disk_table(path: str | os.PathLike[str]) -> PartitionTable | None:
    """The GPT of a disk or image file by path; None when it has none."""
    with open_device(path) as fd:
        return read_table(fd, device_size(fd), sector_size(fd))


def write_disk_table(path: str | os.PathLike[str], table: PartitionTable) -> None:
    """Write ``table`` to a disk or image file and, on a block device, sync the kernel's partitions."""
    with open_device(path, write=True) as fd:
        write_table(fd, table)
        sync_partitions(fd, table)
