"""Talos's ``KexecPrepare`` on a node booted from its own disk: before a reboot, load the kernel of the
slot GRUB would boot next, so PID 1's ``reboot(2)`` jumps straight into it (no firmware, no GRUB:
about 10-25 s less per reboot in a TCG guest, where OVMF and GRUB reading the 60 MB initramfs through
firmware I/O are slow).

The sequencer calls it after every service stopped, for the reboots Talos kexecs: ``reboot`` (not
``--mode powercycle``), an upgrade (not ``--reboot-mode powercycle``), a staged upgrade, ``apply-config``
with a reboot, a trial boot's reboot past its deadline, and a reset of some system partitions that
leaves BOOT. Not after an install: the first boot of a freshly installed disk goes through the
firmware, so a disk the firmware cannot boot shows at once, not at the next power cut.

Every outcome is one console line; anything that prevents the load (``kernel.kexec_load_disabled=1``,
a slot GRUB could not boot either, the kernel refusing the image) means the reboot
goes through the firmware as before, and GRUB counts the boot itself. Blocking: run it in a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ichor.machined.bootdisk import BootDisk
from ichor.machinery import kexec
from ichor.machinery.errors import MachineryError

__all__ = ["KexecPrepare"]

FIRMWARE = "rebooting through the firmware"


class KexecPrepare:
    """Load the next boot for kexec; calling it returns the console line saying what it did."""

    def __init__(
        self,
        disk: BootDisk,
        *,
        proc_sys: Path = Path("/proc/sys"),
        load: Callable[[Path, Path, str], None] = kexec.load,
    ) -> None:
        self._disk = disk
        self._proc_sys = proc_sys
        self._load = load

    def __call__(self) -> str:
        if kexec.is_disabled(self._proc_sys):
            return f"kexec: disabled by kernel.kexec_load_disabled=1: {FIRMWARE}"
        try:
            transition = self._disk.load_next_boot(self._load)
        except (MachineryError, OSError) as err:
            hint = f" ({err.hint})" if isinstance(err, MachineryError) and err.hint else ""
            return f"kexec: {err}{hint}: {FIRMWARE}"
        return f"kexec: loaded the next boot ({transition.message}): rebooting without the firmware"
