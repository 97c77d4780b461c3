"""``mount(2)``/``umount2(2)`` through libc, for the few places that mount a partition for a moment.

The OS image has no ``mount`` binary (machined mounts through libc as Talos's does), so the
installer's upgrade mode and machined's boot-slot operations mount BOOT with :func:`mounted`.
Failures raise :class:`~ichor.machinery.errors.DiskError` naming the device and the mount point.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ichor.machinery.errors import DiskError

__all__ = ["MS_RDONLY", "mount", "mounted", "umount"]

MS_RDONLY = 1
_libc = ctypes.CDLL(None, use_errno=True)


def mount(source: str, target: Path, fstype: str, flags: int = 0) -> None:
    if _libc.mount(source.encode(), os.fsencode(target), fstype.encode(), ctypes.c_ulong(flags), None) != 0:
        err = ctypes.get_errno()
        raise DiskError(f"mounting {source} on {target}: {os.strerror(err)}")


def umount(target: Path) -> None:
    if _libc.umount2(os.fsencode(target), 0) != 0:
        err = ctypes.get_errno()
        raise DiskError(f"unmounting {target}: {os.strerror(err)}")


@contextlib.contextmanager
def mounted(source: str, fstype: str, *, parent: Path | None = None, flags: int = 0) -> Iterator[Path]:
    """``source`` mounted on a new temporary directory (under ``parent``) for the ``with`` block."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ichor-mnt-", dir=parent) as tmp:
        target = Path(tmp)
        mount(source, target, fstype, flags)
        try:
            yield target
        finally:
            os.sync()
            umount(target)
