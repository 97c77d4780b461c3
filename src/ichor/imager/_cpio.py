"""A reproducible ``newc`` cpio writer (the format the kernel unpacks as an initramfs).

Entries are written in the order given, owned by root, with mtime 0 and inode numbers counted
from 1, so the archive depends only on the names, modes and contents: the same tree gives the same
bytes. The archive is left uncompressed: the squashfs layers inside are already compressed and a
TCG guest pays for every byte it decompresses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["Entry", "write_newc"]

_TRAILER = "TRAILER!!!"
_S_IFDIR = 0o040000
_S_IFREG = 0o100000
_S_IFLNK = 0o120000
_S_IFCHR = 0o020000


@dataclass(frozen=True)
class Entry:
    """One archive member: a directory (``data`` None, no ``link``), a file, or a symlink."""

    name: str
    mode: int = 0o755
    data: bytes | None = None
    link: str | None = None
    path: str | None = None
    """A file whose bytes are the member's (streamed, for large layers) instead of ``data``."""
    char_device: tuple[int, int] | None = None
    """(major, minor) of a character device (``/dev/console``, so the kernel can give /init one)."""


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def _header(
    out: BinaryIO, ino: int, mode: int, nlink: int, size: int, name: str, rdev: tuple[int, int] = (0, 0)
) -> None:
    encoded = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, *rdev, len(encoded), 0)
    out.write(b"070701" + b"".join(b"%08X" % f for f in fields) + encoded)
    out.write(_pad(110 + len(encoded)))


def write_newc(out: BinaryIO, entries: Iterable[Entry]) -> None:
    for ino, entry in enumerate(entries, 1):
        name = entry.name.lstrip("/")
        if entry.char_device is not None:
            _header(out, ino, _S_IFCHR | entry.mode, 1, 0, name, entry.char_device)
        elif entry.link is not None:
            target = entry.link.encode()
            _header(out, ino, _S_IFLNK | 0o777, 1, len(target), name)
            out.write(target + _pad(len(target)))
        elif entry.path is not None:
            with open(entry.path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(0)
                _header(out, ino, _S_IFREG | entry.mode, 1, size, name)
                while chunk := f.read(1 << 20):
                    out.write(chunk)
            out.write(_pad(size))
        elif entry.data is not None:
            _header(out, ino, _S_IFREG | entry.mode, 1, len(entry.data), name)
            out.write(entry.data + _pad(len(entry.data)))
        else:
            _header(out, ino, _S_IFDIR | entry.mode, 2, 0, name)
    _header(out, 0, 0, 1, 0, _TRAILER)
