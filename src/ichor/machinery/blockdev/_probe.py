"""Superblock probes: which filesystem a partition holds, with its label and UUID (a small blkid).

Talos probes superblocks to decide "format on first mount" and to find partitions by filesystem
label; these probes read at most 68 KiB from the start of the device.
"""

from __future__ import annotations

import os
import struct
import uuid
from dataclasses import dataclass

__all__ = ["Superblock", "probe", "probe_bytes"]

_READ = 68 * 1024


@dataclass(frozen=True)
class Superblock:
    """A recognised filesystem: ``type`` as blkid names it (xfs, vfat, ext4, squashfs, crypto_LUKS)."""

    type: str
    label: str = ""
    uuid: str = ""
    block_size: int = 0


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace").rstrip()


def _xfs(b: bytes) -> Superblock | None:
    if b[:4] != b"XFSB":
        return None
    (block_size,) = struct.unpack_from(">I", b, 4)
    return Superblock("xfs", _text(b[108:120]), str(uuid.UUID(bytes=b[32:48])), block_size)


def _ext(b: bytes) -> Superblock | None:
    sb = b[1024:2048]
    if len(sb) < 256 or struct.unpack_from("<H", sb, 56)[0] != 0xEF53:
        return None
    compat, incompat = struct.unpack_from("<II", sb, 92)
    kind = "ext4" if incompat & (0x40 | 0x80 | 0x200) else "ext3" if compat & 0x4 else "ext2"
    (log_block,) = struct.unpack_from("<I", sb, 24)
    return Superblock(kind, _text(sb[120:136]), str(uuid.UUID(bytes=sb[104:120])), 1024 << log_block)


def _vfat(b: bytes) -> Superblock | None:
    if b[510:512] != b"\x55\xaa" or b[0] not in (0xEB, 0xE9):
        return None
    (bytes_per_sector,) = struct.unpack_from("<H", b, 11)
    if b[82:87] == b"FAT32":
        label, serial = b[71:82], b[67:71]
    elif b[54:59] in (b"FAT16", b"FAT12"):
        label, serial = b[43:54], b[39:43]
    else:
        return None
    text = label.decode(errors="replace").rstrip()
    (sn,) = struct.unpack("<I", serial)
    return Superblock(
        "vfat", "" if text == "NO NAME" else text, f"{sn >> 16:04X}-{sn & 0xFFFF:04X}", bytes_per_sector
    )


def _squashfs(b: bytes) -> Superblock | None:
    if b[:4] != b"hsqs":
        return None
    (block_size,) = struct.unpack_from("<I", b, 12)
    return Superblock("squashfs", block_size=block_size)


def _luks(b: bytes) -> Superblock | None:
    if b[:6] != b"LUKS\xba\xbe":
        return None
    (version,) = struct.unpack_from(">H", b, 6)
    label = _text(b[24:72]) if version == 2 else ""
    return Superblock("crypto_LUKS", label, _text(b[168:208]))


def probe_bytes(head: bytes) -> Superblock | None:
    """Recognise a filesystem from the first bytes of a device (at least 68 KiB for every probe)."""
    for check in (_xfs, _squashfs, _luks, _ext, _vfat):
        found = check(head)
        if found is not None:
            return found
    return None


def probe(path: str | os.PathLike[str], offset: int = 0) -> Superblock | None:
    """Probe a device or image file at ``offset`` (a partition's byte offset in a whole-disk image)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        head = os.pread(fd, _READ, offset)
    finally:
        os.close(fd)
    return probe_bytes(head.ljust(_READ, b"\0"))
