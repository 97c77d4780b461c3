"""Boot an image under QEMU (TCG) for the VM tests and ``benchmarks/boot.py``; one VM at a time.

:func:`qemu_command` is the measured recipe (os-design §3.3): ``-accel tcg -cpu max -machine q35
-nographic -no-reboot``, serial to a file, no network unless a tap is given (then a virtio NIC with
the MAC given: every VM needs its own). It boots a direct ``-kernel/-initrd``, or through the
firmware from a CD (``cdrom``: the ``iso`` output) or the disk (the ``metal`` output): SeaBIOS by
default, UEFI (OVMF, with a private copy of its variable store) when ``uefi_vars`` is given.
:class:`SerialLog` waits for console lines and times them from QEMU's start. Callers hold
``/tmp/ichor-heavy.lock``.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OVMF_CODE", "OVMF_VARS", "SerialLog", "VMSpec", "qemu_command", "uefi_vars_copy"]


OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


@dataclass(frozen=True)
class VMSpec:
    kernel: Path | None
    initrd: Path | None
    cmdline: str
    serial: Path
    memory_mb: int = 1024
    disk: Path | None = None
    tap: str | None = None
    mac: str = "52:54:00:49:43:02"
    cdrom: Path | None = None
    """Boot this ISO through the firmware (no ``kernel``)."""
    uefi_vars: Path | None = None
    """Boot under UEFI with this writable copy of ``OVMF_VARS`` (see :func:`uefi_vars_copy`)."""


def uefi_vars_copy(target: Path) -> Path:
    """A fresh copy of OVMF's variable store for one VM (OVMF writes boot entries into it)."""
    shutil.copyfile(OVMF_VARS, target)
    return target


def qemu_command(spec: VMSpec) -> list[str]:
    command = [
        "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-machine", "q35", "-m", str(spec.memory_mb),
        "-nographic", "-no-reboot", "-monitor", "none", "-serial", f"file:{spec.serial}",
    ]  # fmt: skip
    if spec.uefi_vars is not None:
        command += ["-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
                    "-drive", f"if=pflash,format=raw,file={spec.uefi_vars}"]  # fmt: skip
    if spec.kernel is not None and spec.initrd is not None:
        command += ["-kernel", str(spec.kernel), "-initrd", str(spec.initrd), "-append", spec.cmdline]
    if spec.cdrom is not None:
        command += ["-drive", f"file={spec.cdrom},media=cdrom,readonly=on", "-boot", "d"]
    if spec.disk is not None:
        command += ["-drive", f"file={spec.disk},if=none,id=disk0,format=raw,cache=unsafe",
                    "-device", "virtio-blk-pci,drive=disk0,serial=ichor-disk0"]  # fmt: skip
    if spec.tap is not None:
        command += ["-netdev", f"tap,id=net0,ifname={spec.tap},script=no,downscript=no",
                    "-device", f"virtio-net-pci,netdev=net0,mac={spec.mac}"]  # fmt: skip
    else:
        command += ["-nic", "none"]
    return command


class SerialLog:
    """The VM's serial console file, read as it grows; times are seconds since ``started``."""

    def __init__(self, path: Path, started: float) -> None:
        self.path = path
        self.started = started

    def text(self) -> str:
        try:
            return self.path.read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for(
        self, pattern: str, timeout: float, *, alive: Callable[[], bool] | None = None, since: int = 0
    ) -> float:
        """Seconds from start until ``pattern`` (a regex) appears at or after offset ``since`` (a
        later boot in the same file: ``len(log.text())`` before it); TimeoutError with the log's tail.

        ``alive`` is a callable returning False once the VM has exited (then waiting stops)."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            if regex.search(self.text(), since):
                return time.monotonic() - self.started
            if alive is not None and not alive():
                break
            time.sleep(0.1)
        tail = "\n".join(self.text()[since:].splitlines()[-40:])
        raise TimeoutError(f"no {pattern!r} on the serial console within {timeout:g} s; last lines:\n{tail}")
