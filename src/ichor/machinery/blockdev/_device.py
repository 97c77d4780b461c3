"""Block-device ioctls: size, sector size, BLKPG partition add/delete, re-read, zeroing and fast wipe.

The host kernel has no partition parser (os-design §3.6), so after writing a GPT to a loop device the
kernel is told about each partition with ``BLKPG_ADD_PARTITION`` (what ``partx -a`` does); a real
disk is asked to re-read its table with ``BLKRRPART`` first. Every function takes an open fd and
works on regular files as well (as image files), where the partition calls are no-ops.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ichor.machinery.blockdev._gpt import PartitionTable
from ichor.machinery.errors import PartitionTableError

__all__ = [
    "FAST_WIPE_RANGE",
    "add_partition",
    "delete_partition",
    "device_size",
    "fast_wipe",
    "is_block_device",
    "kernel_partitions",
    "open_device",
    "partition_path",
    "sector_size",
    "sync_partitions",
    "zero_range",
]

BLKRRPART = 0x125F
BLKGETSIZE64 = 0x80081272
BLKSSZGET = 0x1268
BLKPG = 0x1269
BLKDISCARD = 0x1277
BLKZEROOUT = 0x127F
BLKPG_ADD_PARTITION = 1
BLKPG_DEL_PARTITION = 2
FAST_WIPE_RANGE = 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


@contextmanager
def open_device(path: str | os.PathLike[str], *, write: bool = False) -> Iterator[int]:
    """An fd on a disk or image file (O_RDWR when ``write``), closed on exit."""
    try:
        fd = os.open(path, (os.O_RDWR if write else os.O_RDONLY) | os.O_CLOEXEC)
    except OSError as e:
        raise PartitionTableError(f"cannot open {path}: {e.strerror}") from e
    try:
        yield fd
    finally:
        os.close(fd)


def is_block_device(fd: int) -> bool:
    return stat.S_ISBLK(os.fstat(fd).st_mode)


def device_size(fd: int) -> int:
    """Bytes on a block device (BLKGETSIZE64) or in a file."""
    if is_block_device(fd):
        buf = fcntl.ioctl(fd, BLKGETSIZE64, bytes(8))
        return int(struct.unpack("Q", buf)[0])
    return os.fstat(fd).st_size


def sector_size(fd: int) -> int:
    """The logical sector size (BLKSSZGET); 512 for files."""
    if is_block_device(fd):
        return int(struct.unpack("i", fcntl.ioctl(fd, BLKSSZGET, bytes(4)))[0])
    return 512


def _blkpg(fd: int, op: int, number: int, start: int, length: int) -> None:
    part = ctypes.create_string_buffer(struct.pack("qqi64s64s4x", start, length, number, b"", b""))
    arg = struct.pack("iiiiP", op, 0, len(part.raw), 0, ctypes.addressof(part))
    fcntl.ioctl(fd, BLKPG, arg)


def add_partition(fd: int, number: int, start: int, length: int) -> None:
    """Tell the kernel about partition ``number`` at byte ``start`` of ``length`` bytes."""
    _blkpg(fd, BLKPG_ADD_PARTITION, number, start, length)


def delete_partition(fd: int, number: int) -> None:
    """Remove the kernel's partition ``number``; absent is fine."""
    try:
        _blkpg(fd, BLKPG_DEL_PARTITION, number, 0, 0)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise


def _sys_dir(fd: int) -> Path:
    rdev = os.fstat(fd).st_rdev
    return Path(f"/sys/dev/block/{os.major(rdev)}:{os.minor(rdev)}")


def kernel_partitions(fd: int) -> dict[int, tuple[int, int]]:
    """The partitions the kernel knows for this disk: number -> (start, size) in bytes."""
    base = _sys_dir(fd)
    out: dict[int, tuple[int, int]] = {}
    if not base.exists():
        return out
    for child in base.iterdir():
        number = child / "partition"
        if number.exists():
            start = int((child / "start").read_text()) * 512
            size = int((child / "size").read_text()) * 512
            out[int(number.read_text())] = (start, size)
    return out


def partition_path(disk: str | os.PathLike[str], number: int) -> str:
    """``/dev/sda`` + 3 -> ``/dev/sda3``; ``/dev/loop0``/``nvme0n1`` + 3 -> ``...p3``."""
    name = os.fspath(disk)
    return f"{name}p{number}" if name[-1:].isdigit() else f"{name}{number}"


def sync_partitions(fd: int, table: PartitionTable) -> None:
    """Make the kernel's partitions match ``table`` on a block device; nothing for a file.

    Tries ``BLKRRPART`` (a disk the kernel can parse); when that does not give the table's
    partitions (loop devices, a kernel without GPT support) it deletes the kernel's partitions that
    differ and adds the table's with BLKPG.
    """
    if not is_block_device(fd):
        return
    ss = table.sector_size
    want = {p.number: (p.first_lba * ss, p.size(ss)) for p in table.partitions}
    # Loop devices without partscan and busy disks refuse BLKRRPART; BLKPG below does the work.
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, BLKRRPART)
    have = kernel_partitions(fd)
    for number, span in have.items():
        if want.get(number) != span:
            delete_partition(fd, number)
    for number, (start, length) in sorted(want.items()):
        if have.get(number) != (start, length):
            add_partition(fd, number, start, length)


def zero_range(fd: int, start: int, length: int) -> str:
    """Zero ``[start, start+length)``; returns how: blkzeroout, punchhole or writezeroes."""
    if length <= 0:
        return "none"
    if is_block_device(fd):
        try:
            fcntl.ioctl(fd, BLKZEROOUT, struct.pack("QQ", start, length))
            return "blkzeroout"
        except OSError:
            pass
    elif _libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, start, length) == 0:
        return "punchhole"
    chunk = bytes(min(length, 4 * 1024 * 1024))
    offset, end = start, start + length
    while offset < end:
        n = os.pwrite(fd, chunk[: end - offset], offset)
        offset += n
    return "writezeroes"


def fast_wipe(fd: int) -> None:
    """Talos's FastWipe plus the backup GPT: discard all (if supported), zero the first and last MiB."""
    size = device_size(fd)
    if is_block_device(fd):
        # Discard is optional; the zeroing below is what must happen.
        with contextlib.suppress(OSError):
            fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", 0, size))
    head = min(FAST_WIPE_RANGE, size)
    zero_range(fd, 0, head)
    tail_start = max(head, size - FAST_WIPE_RANGE)
    zero_range(fd, tail_start, size - tail_start)
    os.fsync(fd)
