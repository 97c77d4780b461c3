"""Legacy BIOS boot without grub-install: GRUB's ``boot.img`` into the MBR, ``core.img`` into BIOS.

What ``grub-bios-setup`` does for a GPT disk, measured to boot under SeaBIOS (os-design §3.3):
boot.img's first 440 bytes go into sector 0 (keeping the disk's BPB bytes 0x03-0x59, its signature
and the protective partition table), the LBA of core.img's first sector goes at 0x5C, the floppy
drive check at 0x66 becomes two NOPs, and core.img's first block list (the last 12 bytes of its
first sector) points at the rest of core.img: start LBA + 1, sectors - 1.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ichor.machinery.blockdev import Label, PartitionTable
from ichor.machinery.errors import InstallError

__all__ = ["install_bios_boot", "patch_boot_img", "patch_core_img"]

_KERNEL_SECTOR = 0x5C
_DRIVE_CHECK = 0x66
_BPB = slice(0x03, 0x5A)
_BLOCKLIST = 0x200 - 12


def patch_boot_img(boot_img: bytes, mbr: bytes, core_lba: int) -> bytes:
    """The new sector 0: boot.img's code with the disk's BPB, signature and partition table kept."""
    if len(boot_img) != 512 or len(mbr) < 512:
        raise InstallError(f"boot.img must be 512 bytes, not {len(boot_img)}")
    sector = bytearray(mbr[:512])
    code = bytearray(boot_img[:440])
    code[_BPB] = sector[_BPB]
    struct.pack_into("<Q", code, _KERNEL_SECTOR, core_lba)
    code[_DRIVE_CHECK : _DRIVE_CHECK + 2] = b"\x90\x90"
    sector[:440] = code
    sector[510:512] = b"\x55\xaa"
    return bytes(sector)


def patch_core_img(core_img: bytes, core_lba: int, sector_size: int = 512) -> bytes:
    """core.img with its first block list pointing at its own sectors after the first."""
    sectors = -(-len(core_img) // sector_size)
    if sectors < 2 or sectors - 1 > 0xFFFF:
        raise InstallError(f"core.img of {len(core_img)} bytes cannot be described by one block list")
    core = bytearray(core_img.ljust(sectors * sector_size, b"\0"))
    segment = struct.unpack_from("<H", core, _BLOCKLIST + 10)[0]
    struct.pack_into("<QHH", core, _BLOCKLIST, core_lba + 1, sectors - 1, segment or 0x820)
    return bytes(core)


def install_bios_boot(fd: int, table: PartitionTable, core_img: Path, boot_img: Path | None) -> None:
    """Write ``core_img`` into the BIOS partition and ``boot_img`` into the MBR of an open disk."""
    bios = table.by_name(Label.BIOS)
    if bios is None:
        raise InstallError("the disk has no BIOS partition for GRUB's core.img")
    if boot_img is None:
        raise InstallError("legacy BIOS boot needs GRUB's boot.img as well as core.img")
    core = Path(core_img).read_bytes()
    ss = table.sector_size
    if len(core) > bios.size(ss):
        raise InstallError(
            f"core.img ({len(core)} bytes) does not fit the BIOS partition ({bios.size(ss)} bytes)"
        )
    os.pwrite(fd, patch_core_img(core, bios.first_lba, ss), bios.offset(ss))
    os.pwrite(fd, patch_boot_img(Path(boot_img).read_bytes(), os.pread(fd, 512, 0), bios.first_lba), 0)
    os.fsync(fd)
