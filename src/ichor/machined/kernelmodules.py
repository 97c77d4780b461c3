"""Loading a kernel module (``machine.kernel.modules``) with kmod's ``modprobe``, and saying why
one failed in modprobe's and the kernel's words.

``modprobe -- <name> <param>...`` resolves the name through the image's merged module index (the
kernel's modules and every extension's, ``depmod``'d by the imager), loads its dependencies and
honours soft dependencies and ``/etc/modprobe.d`` (busybox's modprobe does not, which is why the
image ships kmod). A module already loaded is left as it is: its parameters change at the next boot,
as Talos documents for ``parameters``. When modprobe fails, the kernel's own lines about the module
(``hello: Unknown parameter `bogus'``) are read from ``/dev/kmsg`` and added to modprobe's message.

Errors::

    KernelModuleError          a module that is not loaded, and why (the name is in the message)
    └── InvalidModuleError     a name or parameter modprobe would take for an option (``-r``)

This module loads only what it is asked to; whether the node may load anything at all (it must
never load into a kernel it shares with the host) is the platform's answer
(:meth:`ichor.machined.platform.Layout.kernel_module_refusal`), asked by the controller first.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import ProcessError

__all__ = [
    "KMSG",
    "MODPROBE",
    "InvalidModuleError",
    "KernelModuleError",
    "check_module",
    "kernel_lines",
    "load_module",
]

MODPROBE = Path("/sbin/modprobe")
KMSG = Path("/dev/kmsg")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_MAX_KERNEL_LINES = 5
_TIMEOUT = 120.0


class KernelModuleError(Exception):
    """A module that did not load; the message names it and gives modprobe's and the kernel's reason."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f'error loading module "{name}": {reason}')  # Talos's words
        self.name = name
        self.reason = reason


class InvalidModuleError(KernelModuleError):
    """A module name or parameter that is not one (it would reach modprobe as an option)."""


def check_module(name: str, parameters: Sequence[str]) -> None:
    """Refuse what modprobe would read as something else: a name that is not a module name (kernel
    module names are letters, digits, ``_`` and ``-``, never first) and a parameter starting ``-``."""
    if not _NAME.fullmatch(name):
        raise InvalidModuleError(
            name,
            "not a kernel module name (letters, digits, '_' and '-', not first; fix machine.kernel.modules)",
        )
    for parameter in parameters:
        if not parameter or parameter.startswith("-") or "\n" in parameter:
            raise InvalidModuleError(
                name, f"parameter {parameter!r} is not <name>[=<value>] (fix machine.kernel.modules)"
            )


class _KernelLog:
    """``/dev/kmsg`` from the moment it was opened: what the kernel says during one load."""

    def __init__(self, path: Path | None) -> None:
        self._fd: int | None = None
        if path is None:
            return
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.lseek(self._fd, 0, os.SEEK_END)
        except OSError:
            self.close()

    def read(self) -> bytes:
        """Every record since opening (``/dev/kmsg`` gives one per read; a file gives them all)."""
        if self._fd is None:
            return b""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.EPIPE:  # records overwritten while we read: skip them
                    continue
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def kernel_lines(records: bytes, name: str) -> list[str]:
    """The messages of ``/dev/kmsg`` records (``<prio>,<seq>,<usec>,<flags>;<text>``) that are about
    module ``name`` (the kernel prefixes them ``<name>:``, with ``-`` as ``_``), oldest first."""
    prefix = name.replace("-", "_") + ":"
    lines: list[str] = []
    for line in records.decode(errors="replace").splitlines():
        if not line or line.startswith(" "):  # continuation lines (KEY=value) carry no message
            continue
        _, _, text = line.partition(";")
        if text.startswith(prefix) or text.startswith(name + ":"):
            lines.append(text.strip())
    return lines[-_MAX_KERNEL_LINES:]


def load_module(
    name: str, parameters: Sequence[str], *, modprobe: Path = MODPROBE, kmsg: Path | None = KMSG
) -> None:
    """``modprobe -- name parameters...``; raises :class:`KernelModuleError` with modprobe's message
    and the kernel's lines about the module when it does not load. Blocking (run it in a thread)."""
    check_module(name, parameters)
    log = _KernelLog(kmsg)
    try:
        try:
            proc.run([str(modprobe), "--", name, *parameters], timeout=_TIMEOUT)
        except ProcessError as err:
            said = " ".join(err.stderr_tail.split()) if err.stderr_tail else str(err)
            kernel = kernel_lines(log.read(), name)
            reason = said + (f" (kernel: {'; '.join(kernel)})" if kernel else "")
            raise KernelModuleError(name, reason) from None
    finally:
        log.close()
