"""kexec: load the next boot's kernel into the running one, so a reboot skips firmware and bootloader.

Talos 1.7 reboots this way when it can (its ``KexecPrepare`` step after the services stopped, for a
reboot, an upgrade and a reset of some partitions): ``kexec_file_load(2)`` hands the kernel the
kernel image, the initramfs and the command line; ``reboot(2)`` with ``LINUX_REBOOT_CMD_KEXEC`` later
jumps into it. ``kernel.kexec_load_disabled=1`` turns it off for good (the load then fails with
``EPERM``); ``talosctl reboot --mode powercycle`` and ``upgrade --reboot-mode powercycle`` skip it.

Only the Linux system calls, through ctypes: :func:`load`, :func:`unload`, :func:`is_loaded` and
:func:`is_disabled` (the last two read ``/sys`` and ``/proc/sys``, so tests give other roots).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

from ichor.machinery.errors import KexecError

__all__ = ["LINUX_REBOOT_CMD_KEXEC", "is_disabled", "is_loaded", "load", "syscall_number", "unload"]

LINUX_REBOOT_CMD_KEXEC = 0x45584543
"""``reboot(2)``'s command that starts the kernel loaded by :func:`load`."""
KEXEC_FILE_UNLOAD = 0x1
KEXEC_FILE_NO_INITRAMFS = 0x4
_SYSCALLS = {"x86_64": 320, "aarch64": 294}
"""``kexec_file_load``'s number per architecture (arch/x86/entry/syscalls, include/uapi/asm-generic)."""


def syscall_number(machine: str | None = None) -> int:
    """``kexec_file_load``'s system call number on ``machine`` (this one's by default)."""
    machine = machine or platform.machine()
    try:
        return _SYSCALLS[machine]
    except KeyError:
        raise KexecError(f"kexec is not supported on {machine}") from None


def _call(kernel_fd: int, initrd_fd: int, cmdline: bytes, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(cmdline)  # NUL-terminated; the length counts the NUL
    length = len(cmdline) + 1 if cmdline else 0
    if libc.syscall(syscall_number(), kernel_fd, initrd_fd, ctypes.c_ulong(length), buf if cmdline else None,
                    ctypes.c_ulong(flags)) != 0:  # fmt: skip
        err = ctypes.get_errno()
        hint = None
        if err == errno.EPERM:
            hint = "kexec is disabled (kernel.kexec_load_disabled=1) or this process lacks CAP_SYS_BOOT"
        elif err in (errno.ENOEXEC, errno.EKEYREJECTED):
            hint = "the kernel image is not one this kernel can start (or its signature is refused)"
        raise KexecError(f"kexec_file_load: {os.strerror(err)}", hint=hint)


def load(kernel: Path, initramfs: Path | None, cmdline: str) -> None:
    """Load ``kernel`` (a bzImage), ``initramfs`` and ``cmdline`` for the next ``reboot(2)`` with
    :data:`LINUX_REBOOT_CMD_KEXEC`. Raises :class:`KexecError` naming what failed."""
    if "\0" in cmdline:
        raise KexecError("a kernel command line cannot hold a NUL byte")
    try:
        kernel_fd = os.open(kernel, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise KexecError(f"cannot open the kernel {kernel}: {err.strerror}") from err
    try:
        flags, initrd_fd = KEXEC_FILE_NO_INITRAMFS, -1
        if initramfs is not None:
            try:
                initrd_fd = os.open(initramfs, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as err:
                raise KexecError(f"cannot open the initramfs {initramfs}: {err.strerror}") from err
            flags = 0
        try:
            _call(kernel_fd, initrd_fd, cmdline.encode(), flags)
        finally:
            if initrd_fd >= 0:
                os.close(initrd_fd)
    finally:
        os.close(kernel_fd)


def unload() -> None:
    """Forget a loaded kernel (a reboot then goes through the firmware again)."""
    _call(-1, -1, b"", KEXEC_FILE_UNLOAD)


def is_loaded(sys_kernel: Path = Path("/sys/kernel")) -> bool:
    """A kernel is loaded for kexec (``/sys/kernel/kexec_loaded`` reads 1)."""
    try:
        return (sys_kernel / "kexec_loaded").read_text().strip() == "1"
    except OSError:
        return False


def is_disabled(proc_sys: Path = Path("/proc/sys")) -> bool:
    """``kernel.kexec_load_disabled`` is set (it cannot be unset until the next boot)."""
    try:
        return (proc_sys / "kernel" / "kexec_load_disabled").read_text().strip() == "1"
    except OSError:
        return False
