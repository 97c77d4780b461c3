"""GPT read and write: protective MBR, primary and backup headers, 128 entries of 128 bytes, CRC32s.

What is written matches Talos 1.7's installer (go-blockdevice v0.4.7's ``gpt`` package): entries at
LBA 2, first usable LBA 34, backup entries right after the last usable LBA, protective MBR entry
``0xEE`` from LBA 1 (``0x80`` when the disk must boot under legacy BIOS), the MBR's boot code kept.
One deliberate difference: the backup header points at the backup entries, as the UEFI spec wants
(Talos copies the primary's entry LBA into it).
"""

from __future__ import annotations

import itertools
import os
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ichor.machinery.errors import PartitionTableError

__all__ = [
    "ATTR_LEGACY_BIOS_BOOTABLE",
    "ATTR_REQUIRED",
    "ENTRY_COUNT",
    "ENTRY_SIZE",
    "Partition",
    "PartitionTable",
    "new_table",
    "protective_mbr",
    "read_table",
    "validate",
    "write_table",
]

SIGNATURE = b"EFI PART"
REVISION = 0x00010000
HEADER_SIZE = 92
ENTRY_COUNT = 128
ENTRY_SIZE = 128
ENTRIES_LBA = 2
ATTR_REQUIRED = 1 << 0
"""Platform required partition (bit 0)."""
ATTR_LEGACY_BIOS_BOOTABLE = 1 << 2
"""Legacy BIOS bootable (bit 2): Talos sets it on the BIOS partition."""


@dataclass(frozen=True)
class Partition:
    """One GPT entry. ``number`` is 1-based (``/dev/sda<number>``); LBAs are inclusive."""

    number: int
    name: str
    type_guid: uuid.UUID
    guid: uuid.UUID
    first_lba: int
    last_lba: int
    attributes: int = 0

    def size_sectors(self) -> int:
        return self.last_lba - self.first_lba + 1

    def offset(self, sector_size: int = 512) -> int:
        return self.first_lba * sector_size

    def size(self, sector_size: int = 512) -> int:
        return self.size_sectors() * sector_size

    @property
    def legacy_bios_bootable(self) -> bool:
        return bool(self.attributes & ATTR_LEGACY_BIOS_BOOTABLE)


@dataclass(frozen=True)
class PartitionTable:
    """A disk's GPT: its geometry, GUID and partitions (in entry order)."""

    total_sectors: int
    disk_guid: uuid.UUID
    partitions: tuple[Partition, ...] = ()
    sector_size: int = 512
    mbr_bootable: bool = False
    entries_lba: int = ENTRIES_LBA
    primary_ok: bool = True
    """False when the primary header was damaged and this table was read from the backup."""
    problems: tuple[str, ...] = field(default=())

    @property
    def backup_lba(self) -> int:
        return self.total_sectors - 1

    @property
    def first_usable_lba(self) -> int:
        return self.entries_lba + ENTRY_COUNT * ENTRY_SIZE // self.sector_size

    @property
    def last_usable_lba(self) -> int:
        return self.backup_lba - ENTRY_COUNT * ENTRY_SIZE // self.sector_size - 1

    def by_name(self, name: str) -> Partition | None:
        """The first partition with this GPT name (Talos's ``partition.Locate``), or None."""
        return next((p for p in self.partitions if p.name == name), None)

    def names(self) -> list[str]:
        return [p.name for p in self.partitions]


# -- encoding ----------------------------------------------------------------------------------


def _encode_name(name: str) -> bytes:
    raw = name.encode("utf-16-le")
    if len(raw) > 72:
        raise PartitionTableError(f"partition name is too long: {name!r}")
    return raw.ljust(72, b"\0")


def _entries(table: PartitionTable) -> bytes:
    if len(table.partitions) > ENTRY_COUNT:
        raise PartitionTableError(f"{len(table.partitions)} partitions; a GPT holds {ENTRY_COUNT}")
    buf = bytearray(ENTRY_COUNT * ENTRY_SIZE)
    for slot, p in enumerate(table.partitions):
        struct.pack_into(
            "<16s16sQQQ72s",
            buf,
            slot * ENTRY_SIZE,
            p.type_guid.bytes_le,
            p.guid.bytes_le,
            p.first_lba,
            p.last_lba,
            p.attributes,
            _encode_name(p.name),
        )
    return bytes(buf)


def _header(table: PartitionTable, entries_crc: int, *, backup: bool) -> bytes:
    current, other = (table.backup_lba, 1) if backup else (1, table.backup_lba)
    entries_lba = table.last_usable_lba + 1 if backup else table.entries_lba
    head = bytearray(table.sector_size)
    struct.pack_into(
        "<8sIIIIQQQQ16sQIII",
        head,
        0,
        SIGNATURE,
        REVISION,
        HEADER_SIZE,
        0,
        0,
        current,
        other,
        table.first_usable_lba,
        table.last_usable_lba,
        table.disk_guid.bytes_le,
        entries_lba,
        ENTRY_COUNT,
        ENTRY_SIZE,
        entries_crc,
    )
    struct.pack_into("<I", head, 16, zlib.crc32(head[:HEADER_SIZE]))
    return bytes(head)


def protective_mbr(table: PartitionTable, existing: bytes) -> bytes:
    """Sector 0: ``existing`` (boot code and all) with the protective 0xEE entry and 0x55AA."""
    mbr = bytearray(existing[: table.sector_size].ljust(table.sector_size, b"\0"))
    length = min(table.backup_lba, 0xFFFFFFFF)
    entry = struct.pack(
        "<B3sB3sII", 0x80 if table.mbr_bootable else 0, b"\x00\x02\x00", 0xEE, b"\xff" * 3, 1, length
    )
    mbr[446:462] = entry
    mbr[510:512] = b"\x55\xaa"
    return bytes(mbr)


def validate(table: PartitionTable) -> None:
    """Refuse overlaps, partitions outside the usable area and empty names/types."""
    spans = sorted((p.first_lba, p.last_lba, p.name) for p in table.partitions)
    for first, last, name in spans:
        if first < table.first_usable_lba or last > table.last_usable_lba or last < first:
            raise PartitionTableError(
                f"partition {name!r} ({first}-{last}) is outside the usable sectors "
                f"{table.first_usable_lba}-{table.last_usable_lba}"
            )
    for (_, last, a), (first, _, b) in itertools.pairwise(spans):
        if first <= last:
            raise PartitionTableError(f"partitions {a!r} and {b!r} overlap")


def write_table(fd: int, table: PartitionTable, *, sync: bool = True) -> None:
    """Write PMBR, both entry arrays and both headers to an open disk (file or block device), fsync.

    The caller tells the kernel about the new partitions (:func:`~ichor.machinery.blockdev.sync_partitions`).
    """
    validate(table)
    ss = table.sector_size
    existing = os.pread(fd, ss, 0)
    entries = _entries(table)
    crc = zlib.crc32(entries)
    writes = [
        (0, protective_mbr(table, existing)),
        (table.entries_lba * ss, entries),
        ((table.last_usable_lba + 1) * ss, entries),
        (1 * ss, _header(table, crc, backup=False)),
        (table.backup_lba * ss, _header(table, crc, backup=True)),
    ]
    for offset, data in writes:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            view, offset = view[n:], offset + n
    if sync:
        os.fsync(fd)


# -- decoding ----------------------------------------------------------------------------------


def _parse_header(sector: bytes, lba: int) -> tuple[dict[str, int], uuid.UUID] | str:
    if sector[:8] != SIGNATURE:
        return f"no GPT signature at LBA {lba}"
    size = struct.unpack_from("<I", sector, 12)[0]
    if not HEADER_SIZE <= size <= len(sector):
        return f"GPT header at LBA {lba} has size {size}"
    raw = bytearray(sector[:size])
    stored = struct.unpack_from("<I", raw, 16)[0]
    raw[16:20] = bytes(4)
    if zlib.crc32(raw) != stored:
        return f"GPT header at LBA {lba} fails its CRC32"
    current, backup, first, last, guid, entries_lba, count, esize, ecrc = struct.unpack_from(
        "<QQQQ16sQIII", sector, 24
    )
    if current != lba:
        return f"GPT header at LBA {lba} says it is at LBA {current}"
    if esize < ENTRY_SIZE or esize % 8 or count > 1024:
        return f"GPT header at LBA {lba} has {count} entries of {esize} bytes"
    fields = {
        "backup": backup,
        "first": first,
        "last": last,
        "entries_lba": entries_lba,
        "count": count,
        "esize": esize,
        "ecrc": ecrc,
    }
    return fields, uuid.UUID(bytes_le=bytes(guid))


def _parse_entries(raw: bytes, count: int, esize: int) -> tuple[Partition, ...]:
    parts = []
    for slot in range(count):
        chunk = raw[slot * esize : slot * esize + ENTRY_SIZE]
        tguid, pguid, first, last, attrs, name = struct.unpack("<16s16sQQQ72s", chunk)
        if tguid == bytes(16):
            continue
        decoded = name.decode("utf-16-le", errors="replace").split("\0", 1)[0]
        parts.append(
            Partition(
                number=slot + 1,
                name=decoded,
                type_guid=uuid.UUID(bytes_le=tguid),
                guid=uuid.UUID(bytes_le=pguid),
                first_lba=first,
                last_lba=last,
                attributes=attrs,
            )
        )
    return tuple(parts)


def read_table(fd: int, size: int, sector_size: int = 512) -> PartitionTable | None:
    """The GPT of an open disk of ``size`` bytes; None when it has none (no header, primary or backup).

    A damaged primary falls back to the backup (``primary_ok`` False); a header whose entries fail
    their CRC raises :class:`PartitionTableError`.
    """
    total = size // sector_size
    if total < 2 * (ENTRY_COUNT * ENTRY_SIZE // sector_size) + 3:
        return None
    problems: list[str] = []
    for lba in (1, total - 1):
        parsed = _parse_header(os.pread(fd, sector_size, lba * sector_size), lba)
        if isinstance(parsed, str):
            problems.append(parsed)
            continue
        fields, guid = parsed
        raw = os.pread(fd, fields["count"] * fields["esize"], fields["entries_lba"] * sector_size)
        if zlib.crc32(raw) != fields["ecrc"]:
            problems.append(f"GPT entries at LBA {fields['entries_lba']} fail their CRC32")
            continue
        mbr = os.pread(fd, 512, 0)
        return PartitionTable(
            total_sectors=fields["backup"] + 1 if lba == 1 else total,
            disk_guid=guid,
            partitions=_parse_entries(raw, fields["count"], fields["esize"]),
            sector_size=sector_size,
            mbr_bootable=mbr[446] == 0x80,
            entries_lba=fields["entries_lba"] if lba == 1 else ENTRIES_LBA,
            primary_ok=lba == 1,
            problems=tuple(problems),
        )
    if any("CRC32" in p or "says it is" in p for p in problems):
        raise PartitionTableError("damaged GPT: " + "; ".join(problems))
    return None


def new_table(
    total_sectors: int,
    partitions: Sequence[Partition] = (),
    *,
    disk_guid: uuid.UUID | None = None,
    sector_size: int = 512,
    mbr_bootable: bool = False,
) -> PartitionTable:
    """A table for a disk of ``total_sectors``; a random disk GUID unless given."""
    return PartitionTable(
        total_sectors=total_sectors,
        disk_guid=disk_guid or uuid.uuid4(),
        partitions=tuple(partitions),
        sector_size=sector_size,
        mbr_bootable=mbr_bootable,
    )
