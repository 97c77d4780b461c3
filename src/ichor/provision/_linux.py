"""The few Linux system calls a container node needs that Python 3.11's ``os`` lacks.

``unshare(2)``, ``setns(2)``, ``mount(2)``, ``umount2(2)`` and ``pivot_root(2)`` through libc (ctypes); a failure is an
:class:`OSError` with the errno and what was attempted. Nothing here decides what to mount or
unshare: that is :mod:`ichor.provision._rootfs`'s and the launcher's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

__all__ = [
    "CLONE_NEWCGROUP",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUTS",
    "MNT_DETACH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SHARED",
    "MS_SLAVE",
    "mount",
    "pivot_root",
    "setns",
    "umount",
    "unshare",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
MS_SHARED = 0x100000

MNT_DETACH = 0x2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
"""glibc has no ``pivot_root`` wrapper: the system call by number, per architecture."""

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """Move the calling process into new namespaces (``CLONE_NEWPID``: its next children)."""
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), f"setns({nstype:#x})")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None
) -> None:
    def raw(text: str | None) -> bytes | None:
        return os.fsencode(text) if text is not None else None

    result = _libc.mount(raw(source), raw(target), raw(fstype), ctypes.c_ulong(flags), raw(data))
    _check(result, f"mounting {source or fstype} on {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(os.fsencode(target), ctypes.c_int(flags)), f"unmounting {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(0, f"pivot_root: no system call number known for {platform.machine()}")
    result = _libc.syscall(ctypes.c_long(number), os.fsencode(new_root), os.fsencode(put_old))
    _check(result, f"pivot_root({new_root}, {put_old})")
