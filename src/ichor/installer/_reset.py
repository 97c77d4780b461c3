"""Reset of chosen system partitions (``--system-labels-to-wipe``, ``talos.experimental.wipe=system:...``).

Talos's ``ResetSystemDiskSpec`` re-runs each target's format step: EFI becomes an empty vfat, BOOT
an empty xfs, and BIOS, META, STATE and EPHEMERAL are zeroed (machined formats STATE and EPHEMERAL
again on their next mount). Which labels may be wiped is :mod:`ichor.machinery.reset`'s business.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ichor.installer._filesystems import Target, make_boot_xfs, make_efi_vfat
from ichor.machinery.blockdev import (
    FileSystem,
    device_size,
    is_block_device,
    open_device,
    partition_path,
    read_table,
    sector_size,
    talos_layout,
    zero_range,
)
from ichor.machinery.errors import InstallError

__all__ = ["reset_partitions"]


def reset_partitions(disk: Path, labels: Sequence[str], *, printf: Callable[[str], None] = print) -> None:
    """Wipe the partitions named ``labels`` on the system disk ``disk`` (device or image file)."""
    formats = {spec.label: spec.filesystem for spec in talos_layout()}
    with open_device(disk, write=True) as fd:
        table = read_table(fd, device_size(fd), sector_size(fd))
        block = is_block_device(fd)
        if table is None:
            raise InstallError(f"{disk} has no partition table")
        parts = []
        for label in labels:
            part = table.by_name(label)
            if part is None or label not in formats:
                raise InstallError(f"failed location partition with label {label!r}".replace("'", '"'))
            parts.append(part)
        for part in parts:
            if formats[part.name] == FileSystem.NONE:
                zero_range(fd, part.offset(table.sector_size), part.size(table.sector_size))
                printf(f"zeroed {part.name}")
    for part in parts:
        ss = table.sector_size
        target = (
            Target(Path(partition_path(disk, part.number)), 0, part.size(ss), True)
            if block
            else Target(disk, part.offset(ss), part.size(ss), False)
        )
        if formats[part.name] == FileSystem.XFS:
            make_boot_xfs(target, {}, label=part.name)
            printf(f"formatted {part.name} (xfs)")
        elif formats[part.name] == FileSystem.VFAT:
            make_efi_vfat(target, {}, label=part.name)
            printf(f"formatted {part.name} (vfat)")
