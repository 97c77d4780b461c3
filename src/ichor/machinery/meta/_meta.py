"""The META partition as Talos 1.7 reads and writes it: Talos's ADV at 0, the syslinux ADV at the end."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ichor.machinery.errors import MetaError
from ichor.machinery.meta._syslinux_adv import ADV_SIZE, SyslinuxADV
from ichor.machinery.meta._talos_adv import SIZE, TalosADV

__all__ = ["Meta"]

log = logging.getLogger("ichor.meta")

_LEGACY = 2 * ADV_SIZE


class Meta:
    """Read and write the key/value store on a META partition (a block device, or a range of an image).

    :meth:`reload` reads both ADVs from ``path``; :meth:`set`/:meth:`delete` change memory only and
    :meth:`flush` writes both copies of Talos's ADV, the legacy ADV at the end, then fsyncs. Values
    set before a reload survive it (Talos's rule: memory is laid over what the disk holds).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        printer: Callable[[str], None] | None = None,
        offset: int = 0,
        size: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.offset = offset
        self.size = size
        self._print = printer or log.info
        self._talos = TalosADV()
        self._legacy = SyslinuxADV()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        printer: Callable[[str], None] | None = None,
        offset: int = 0,
        size: int | None = None,
    ) -> Meta:
        """A :class:`Meta` loaded from ``path`` (the partition at ``offset``/``size`` of a disk image)."""
        meta = cls(path, printer=printer, offset=offset, size=size)
        meta.reload()
        return meta

    def _open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags | os.O_CLOEXEC)
        except OSError as e:
            raise MetaError(f"cannot open META {self.path}: {e.strerror}") from e

    def _size(self, fd: int) -> int:
        size = self.size if self.size is not None else os.lseek(fd, 0, os.SEEK_END) - self.offset
        if size < SIZE + _LEGACY:
            raise MetaError(
                f"META at {self.path} is {size} bytes; it needs at least {SIZE + _LEGACY}",
                hint="META is a 1 MiB partition",
            )
        return size

    def reload(self) -> None:
        """Read META from disk; a partition with no valid ADV (zeroed, new) reads as empty."""
        fd = self._open(os.O_RDONLY)
        try:
            size = self._size(fd)
            data = os.pread(fd, SIZE, self.offset)
            legacy = os.pread(fd, _LEGACY, self.offset + size - _LEGACY)
        finally:
            os.close(fd)
        try:
            loaded = TalosADV.load(data)
        except MetaError:
            loaded = TalosADV()
        for tag, value in self._talos.items().items():
            loaded.set(tag, value)
        self._talos = loaded
        self._legacy = SyslinuxADV(legacy)
        self._print(f"META: loaded {len(loaded.tags())} keys")

    def flush(self) -> None:
        """Write both ADV copies and the legacy ADV, then fsync; raises :class:`MetaError` on failure."""
        serialized = self._talos.to_bytes()
        fd = self._open(os.O_RDWR)
        try:
            size = self._size(fd)
            _write_all(fd, serialized, self.offset)
            _write_all(fd, self._legacy.to_bytes(), self.offset + size - _LEGACY)
            os.fsync(fd)
        except OSError as e:
            raise MetaError(f"cannot write META {self.path}: {e.strerror}") from e
        finally:
            os.close(fd)
        self._print(f"META: saved {len(self._talos.tags())} keys")

    def get(self, tag: int) -> bytes | None:
        """A tag's value from Talos's ADV, else from the legacy ADV, else None."""
        value = self._talos.get(tag)
        return value if value is not None else self._legacy.get(tag)

    def get_str(self, tag: int) -> str | None:
        value = self.get(tag)
        return None if value is None else value.decode(errors="replace")

    def set(self, tag: int, value: bytes | str) -> None:
        """Set a tag in memory; raises :class:`MetaError` ``meta write failed`` when it does not fit."""
        raw = value.encode() if isinstance(value, str) else value
        if not self._talos.set(tag, raw):
            raise MetaError("meta write failed", hint="delete META keys to make room")

    def delete(self, tag: int) -> bool:
        """Remove a tag (Talos's ADV first, the legacy one as a fallback); False when absent."""
        return self._talos.delete(tag) or self._legacy.delete(tag)

    def items(self) -> dict[int, bytes]:
        """Every key of Talos's ADV (what ``talosctl get metakeys`` lists), ascending."""
        return self._talos.items()


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n
