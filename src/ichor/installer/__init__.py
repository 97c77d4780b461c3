"""The installer: Talos 1.7's system disk made from a kernel, an initramfs and a command line.

:func:`install` partitions a disk (a block device as root, or an image file: the imager's ``metal``
output) with Talos's layout, zeroes BIOS/META/STATE/EPHEMERAL, formats EFI (vfat, filled with
mtools) and BOOT (xfs, filled from a prototype file: no mount needed), puts the kernel and
initramfs in a slot directory (``/A``), writes ``grub/grub.cfg`` (Talos's entries plus Ichor's
boot counting) and ``grub/grubenv``, and META's keys. Upgrades and the other installer modes build
on the same steps: :func:`upgrade_disk` writes the slot that is not good (``--preserve``
semantics; re-partitioning upgrades are not here yet); :func:`reset_partitions` wipes chosen system partitions as
Talos's reset does.

``python -m ichor.installer install`` is the command line (Talos's installer flags).

Errors are :class:`~ichor.machinery.errors.InstallError`. This package never picks the disk (the
config's ``machine.install.disk`` does) and never reboots.
"""

from ichor.installer._filesystems import format_if_blank
from ichor.installer._grub_images import GrubImages, build_grub_images
from ichor.installer._install import InstallResult, InstallSpec, install
from ichor.installer._reset import reset_partitions
from ichor.installer._upgrade import upgrade_disk
from ichor.machinery.errors import InstallError

__all__ = [
    "GrubImages",
    "InstallError",
    "InstallResult",
    "InstallSpec",
    "build_grub_images",
    "format_if_blank",
    "install",
    "reset_partitions",
    "upgrade_disk",
]
