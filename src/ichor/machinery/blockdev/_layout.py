"""Talos 1.7's system disk layout: labels, type GUIDs, sizes, filesystems, and the planner that places it.

From Talos's ``internal/pkg/partition`` and the installer's targets: EFI 100 MiB (vfat), BIOS 1 MiB
(no filesystem, legacy-BIOS-bootable), BOOT 1000 MiB (xfs), META 1 MiB, STATE 100 MiB, EPHEMERAL the
rest. The installer formats EFI and BOOT and leaves the others zeroed; machined formats STATE and
EPHEMERAL as xfs on first mount. Partitions start on 1 MiB boundaries, as go-blockdevice aligns them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ichor.machinery.blockdev._gpt import ATTR_LEGACY_BIOS_BOOTABLE, Partition, PartitionTable, new_table
from ichor.machinery.errors import PartitionTableError

__all__ = [
    "ALIGNMENT",
    "MIB",
    "FileSystem",
    "Label",
    "PartitionSpec",
    "PartitionType",
    "plan",
    "talos_layout",
]

MIB = 1024 * 1024
ALIGNMENT = MIB
"""Partition starts (and the last partition's end) are multiples of 1 MiB."""


class PartitionType(enum.StrEnum):
    """GPT type GUIDs Talos uses (uppercase, as Talos spells them)."""

    EFI_SYSTEM = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
    BIOS_BOOT = "21686148-6449-6E6F-744E-656564454649"
    LINUX_FILESYSTEM = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


class Label(enum.StrEnum):
    """Talos's partition labels (GPT names and filesystem labels)."""

    EFI = "EFI"
    BIOS = "BIOS"
    BOOT = "BOOT"
    META = "META"
    STATE = "STATE"
    EPHEMERAL = "EPHEMERAL"


class FileSystem(enum.StrEnum):
    """What the installer puts on a partition (Talos's ``FilesystemType``)."""

    NONE = "none"
    XFS = "xfs"
    VFAT = "vfat"


@dataclass(frozen=True)
class PartitionSpec:
    """A partition to create: ``size`` bytes, 0 = the rest of the disk."""

    label: str
    type: PartitionType
    size: int
    filesystem: FileSystem = FileSystem.NONE
    legacy_bios_bootable: bool = False


def talos_layout(*, uki: bool = False) -> list[PartitionSpec]:
    """Talos 1.7's partitions in install order; ``uki`` is the SecureBoot layout (EFI 1101 MiB, no BIOS/BOOT)."""
    if uki:
        efi = [PartitionSpec(Label.EFI, PartitionType.EFI_SYSTEM, 1101 * MIB, FileSystem.VFAT)]
    else:
        efi = [
            PartitionSpec(Label.EFI, PartitionType.EFI_SYSTEM, 100 * MIB, FileSystem.VFAT),
            PartitionSpec(Label.BIOS, PartitionType.BIOS_BOOT, 1 * MIB, legacy_bios_bootable=True),
            PartitionSpec(Label.BOOT, PartitionType.LINUX_FILESYSTEM, 1000 * MIB, FileSystem.XFS),
        ]
    return [
        *efi,
        PartitionSpec(Label.META, PartitionType.LINUX_FILESYSTEM, 1 * MIB),
        PartitionSpec(Label.STATE, PartitionType.LINUX_FILESYSTEM, 100 * MIB),
        PartitionSpec(Label.EPHEMERAL, PartitionType.LINUX_FILESYSTEM, 0),
    ]


def plan(
    disk_size: int,
    specs: Sequence[PartitionSpec],
    *,
    sector_size: int = 512,
    mbr_bootable: bool = False,
    disk_guid: uuid.UUID | None = None,
    partition_guids: Sequence[uuid.UUID] | None = None,
) -> PartitionTable:
    """Place ``specs`` one after another on a disk of ``disk_size`` bytes, 1 MiB aligned.

    GUIDs are random unless given (give them for reproducible images). A layout that does not fit
    raises :class:`PartitionTableError` with go-blockdevice's text.
    """
    table = new_table(
        disk_size // sector_size, disk_guid=disk_guid, sector_size=sector_size, mbr_bootable=mbr_bootable
    )
    if table.last_usable_lba <= table.first_usable_lba:
        raise PartitionTableError(f"a disk of {disk_size} bytes is too small for a GPT")
    align = ALIGNMENT // sector_size
    guids = list(partition_guids or [])
    parts: list[Partition] = []
    next_lba = table.first_usable_lba
    for number, spec in enumerate(specs, start=1):
        start = -(-next_lba // align) * align
        if spec.size == 0:
            end = (table.last_usable_lba + 1) // align * align - 1
            if end < start:
                raise PartitionTableError(
                    f"{spec.label}: requested partition with maximum size, but no space available"
                )
        else:
            end = start + spec.size // sector_size - 1
            if end > table.last_usable_lba:
                available = max(0, (table.last_usable_lba - start) * sector_size)
                raise PartitionTableError(
                    f"{spec.label}: requested partition size {spec.size}, available is {available} "
                    f"({spec.size - available} too many bytes)"
                )
        parts.append(
            Partition(
                number=number,
                name=spec.label,
                type_guid=uuid.UUID(spec.type),
                guid=guids[number - 1] if number <= len(guids) else uuid.uuid4(),
                first_lba=start,
                last_lba=end,
                attributes=ATTR_LEGACY_BIOS_BOOTABLE if spec.legacy_bios_bootable else 0,
            )
        )
        next_lba = end + 1
    return PartitionTable(
        total_sectors=table.total_sectors,
        disk_guid=table.disk_guid,
        partitions=tuple(parts),
        sector_size=sector_size,
        mbr_bootable=mbr_bootable,
    )
