"""Boot an image under QEMU (TCG) for the VM tests and ``benchmarks/boot.py``; one VM at a time.

:func:`qemu_command` is the measured recipe (os-design §3.3): ``-accel tcg -cpu max -machine q35
-nographic -no-reboot``, direct ``-kernel/-initrd``, serial to a file, no network unless a tap is
given (then a virtio NIC with the MAC given: every VM needs its own). :class:`SerialLog` waits for
console lines and times them from QEMU's start. Callers hold ``/tmp/ichor-heavy.lock``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SerialLog", "VMSpec", "qemu_command"]


@dataclass(frozen=True)
class VMSpec:
    kernel: Path
    initrd: Path
    cmdline: str
    serial: Path
    memory_mb: int = 1024
    disk: Path | None = None
    tap: str | None = None
    mac: str = "52:54:00:49:43:02"


def qemu_command(spec: VMSpec) -> list[str]:
    command = [
        "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-machine", "q35", "-m", str(spec.memory_mb),
        "-nographic", "-no-reboot", "-monitor", "none", "-serial", f"file:{spec.serial}",
        "-kernel", str(spec.kernel), "-initrd", str(spec.initrd), "-append", spec.cmdline,
    ]  # fmt: skip
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

    def wait_for(self, pattern: str, timeout: float, *, alive: Callable[[], bool] | None = None) -> float:
        """Seconds from start until ``pattern`` (a regex) appears; TimeoutError with the log's tail.

        ``alive`` is a callable returning False once the VM has exited (then waiting stops)."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            if regex.search(self.text()):
                return time.monotonic() - self.started
            if alive is not None and not alive():
                break
            time.sleep(0.1)
        tail = "\n".join(self.text().splitlines()[-40:])
        raise TimeoutError(f"no {pattern!r} on the serial console within {timeout:g} s; last lines:\n{tail}")
