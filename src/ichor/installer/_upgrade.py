"""The installer's upgrade mode with ``--preserve`` semantics: write the slot that is not good, keep the rest.

BOOT is mounted through libc (a block device only: this is the node's installed disk; the OS image
has no ``mount`` binary), the new kernel and
initramfs go to the slot :func:`~ichor.machinery.bootloader.upgrade` picks, grub.cfg keeps the
good slot's entry with its command line, the grubenv puts the new slot on trial, and META's
``Upgrade`` tag names the good slot (Talos's "previous label", for ``get metakeys``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ichor.machinery.blockdev import Label, partition_path, read_disk_table
from ichor.machinery.bootloader import DEFAULT_TRIES, BootDir, Transition, parse_cmdlines
from ichor.machinery.errors import InstallError
from ichor.machinery.meta import Meta, MetaKey
from ichor.machinery.mounts import mounted

__all__ = ["upgrade_disk"]


def upgrade_disk(
    disk: Path,
    *,
    version: str,
    kernel: Path,
    initramfs: Path,
    cmdline: str,
    force: bool = False,
    meta: Mapping[int, bytes] | None = None,
    printf: Callable[[str], None] = print,
    tries: int = DEFAULT_TRIES,
    work_dir: Path | None = None,
) -> Transition:
    """Upgrade the installed system on ``disk``; SlotError when a trial is pending and not ``force``."""
    table = read_disk_table(disk)
    boot = table.by_name(Label.BOOT) if table else None
    meta_part = table.by_name(Label.META) if table else None
    if boot is None or meta_part is None:
        raise InstallError(f"{disk} holds no installed system (no BOOT and META partitions)")
    with mounted(partition_path(disk, boot.number), "xfs", parent=work_dir) as mountpoint:
        boot_dir = BootDir(mountpoint)
        cmdlines = parse_cmdlines(boot_dir.grub_cfg.read_text())
        good = boot_dir.state().good
        cmdlines[good.other] = cmdline
        transition = boot_dir.upgrade(version, kernel, initramfs, cmdlines, force=force, tries=tries)
    printf(transition.message)
    store = Meta.open(partition_path(disk, meta_part.number), printer=printf)
    store.set(MetaKey.Upgrade, transition.state.good.value)
    for tag, value in (meta or {}).items():
        store.set(tag, value)
    store.flush()
    return transition
