"""The ``iso`` profile: a hybrid ISO that boots the kernel and initramfs under UEFI and legacy BIOS.

Laid out as Talos 1.7's GRUB ISO (``pkg/imager/iso``): ``/boot/vmlinuz``, ``/boot/initramfs.xz``
and ``/boot/grub/grub.cfg`` with the entries "Talos ISO" and "Reset Talos installation" (the same
command line plus ``talos.experimental.wipe=system``). Talos runs ``grub-mkrescue``; this module
makes the same boot structure itself so that every byte is pinned: GRUB's El Torito image
(``i386-pc-eltorito``, with ``boot_hybrid.img`` in the MBR for a USB stick) and an EFI system
partition image holding ``EFI/BOOT/BOOTX64.EFI`` (both ``grub-mkimage``, whose output depends only on
its inputs), a FAT image with a fixed volume id and ``SOURCE_DATE_EPOCH`` file times, and
``xorriso -as mkisofs`` with ``SOURCE_DATE_EPOCH`` and every file date set to it. The early config
both GRUB images carry finds the ISO by a marker file and reads its ``/boot/grub/grub.cfg``.

This module writes only the ``target`` path and files under ``work`` it is given.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ichor.imager import InputError
from ichor.machinery import proc
from ichor.machinery.bootloader import quote

__all__ = ["ISO_MARKER", "ISO_VOLUME_ID", "IsoBoot", "build_iso_boot", "make_iso", "render_iso_grub_cfg"]

ISO_VOLUME_ID = "TALOS"
ISO_MARKER = "/boot/grub/ichor-iso"
"""A file only Ichor's ISOs have: both GRUB images search for it to find the ISO's filesystem (an
installed disk's BOOT has ``/grub/grub.cfg``, never this)."""
GRUB_LIB = Path("/usr/lib/grub")
_EFI_IMAGE_KIB = 2048
_EFI_VOLUME_ID = "5441a05"  # "TALOS" spelled in hex digits: a fixed id makes the FAT image reproducible
_MODULES = ["iso9660", "part_msdos", "part_gpt", "normal", "linux", "echo", "test", "search", "search_fs_file",
            "configfile", "all_video", "serial", "terminal", "gzio", "xzio"]  # fmt: skip

_EARLY_CONFIG = f"""search --no-floppy --set=root --file {ISO_MARKER}
set prefix=($root)/boot/grub
configfile ($root)/boot/grub/grub.cfg
"""

_ENTRY = """menuentry "{title}" {{
\tset gfxmode=auto
\tset gfxpayload=text
\tlinux /boot/vmlinuz {cmdline}
\tinitrd /boot/initramfs.xz
}}
"""


def render_iso_grub_cfg(cmdline: str) -> str:
    """Talos 1.7's ISO grub.cfg for ``cmdline`` (quoted for GRUB's script, as Talos's ``quote``)."""
    head = "set default=0\nset timeout=3\n\ninsmod all_video\n\nterminal_input console\nterminal_output console\n\n"
    return (
        head
        + _ENTRY.format(title="Talos ISO", cmdline=quote(cmdline))
        + "\n"
        + _ENTRY.format(
            title="Reset Talos installation", cmdline=quote(cmdline) + " talos.experimental.wipe=system"
        )
    )


@dataclass(frozen=True)
class IsoBoot:
    eltorito: Path
    """GRUB for BIOS, loaded by El Torito (``boot/grub/i386-pc/eltorito.img`` in the ISO)."""
    efi_image: Path
    """A FAT image with ``EFI/BOOT/BOOTX64.EFI``: El Torito's EFI entry and the ISO's GPT partition."""
    hybrid_mbr: Path
    """GRUB's ``boot_hybrid.img``: the MBR code that boots the ISO written to a USB stick."""


def _require(tool: str, package: str) -> None:
    if shutil.which(tool) is None:
        raise InputError(
            f"{tool} is not installed (the iso profile needs it)", hint=f"apt-get install {package}"
        )


def build_iso_boot(work: Path, *, epoch: int, grub_lib: Path = GRUB_LIB) -> IsoBoot:
    """Both GRUB images and the EFI system partition image, under ``work``."""
    for platform, package in (("x86_64-efi", "grub-efi-amd64-bin"), ("i386-pc", "grub-pc-bin")):
        if not (grub_lib / platform / "moddep.lst").exists():
            raise InputError(
                f"GRUB's {platform} modules are missing from {grub_lib}", hint=f"apt-get install {package}"
            )
    for tool, package in (("grub-mkimage", "grub-common"), ("mkfs.vfat", "dosfstools"), ("mcopy", "mtools")):
        _require(tool, package)
    work.mkdir(parents=True, exist_ok=True)
    early = work / "early.cfg"
    early.write_text(_EARLY_CONFIG)
    eltorito, efi = work / "eltorito.img", work / "BOOTX64.EFI"
    base = ["grub-mkimage", "-c", str(early), "-p", "/boot/grub"]
    proc.run([*base, "-d", str(grub_lib / "i386-pc"), "-O", "i386-pc-eltorito", "-o", str(eltorito),
              "biosdisk", *_MODULES])  # fmt: skip
    proc.run(
        [*base, "-d", str(grub_lib / "x86_64-efi"), "-O", "x86_64-efi", "-o", str(efi), "fat", *_MODULES]
    )
    image = work / "efi.img"
    image.unlink(missing_ok=True)
    proc.run(["mkfs.vfat", "-C", "--invariant", "-i", _EFI_VOLUME_ID, "-n", "EFIBOOT", str(image),
              str(_EFI_IMAGE_KIB)])  # fmt: skip
    env = {"MTOOLS_SKIP_CHECK": "1", "SOURCE_DATE_EPOCH": str(epoch)}
    proc.run(["mmd", "-i", str(image), "::EFI", "::EFI/BOOT"], env=env)
    proc.run(["mcopy", "-i", str(image), str(efi), "::EFI/BOOT/BOOTX64.EFI"], env=env)
    return IsoBoot(eltorito=eltorito, efi_image=image, hybrid_mbr=grub_lib / "i386-pc" / "boot_hybrid.img")


def make_iso(
    target: Path,
    *,
    kernel: Path,
    initramfs: Path,
    cmdline: str,
    work: Path,
    epoch: int,
    version: str,
    grub_lib: Path = GRUB_LIB,
) -> None:
    """Write the ISO to ``target`` (a new file's path); scratch files go under ``work``."""
    _require("xorriso", "xorriso")
    for source in (kernel, initramfs):
        if not source.is_file():
            raise InputError(f"{source} does not exist or is not a file")
    boot = build_iso_boot(work / "grub", epoch=epoch, grub_lib=grub_lib)
    cfg, marker = work / "grub.cfg", work / "ichor-iso"
    cfg.write_text(render_iso_grub_cfg(cmdline))
    marker.write_text(f"Ichor ISO for Talos {version}\n")
    grafts = {
        "boot/vmlinuz": kernel,
        "boot/initramfs.xz": initramfs,
        "boot/grub/grub.cfg": cfg,
        ISO_MARKER.lstrip("/"): marker,
        "boot/grub/i386-pc/eltorito.img": boot.eltorito,
        "boot/grub/efi.img": boot.efi_image,
    }
    target.unlink(missing_ok=True)
    proc.run(
        [
            "xorriso", "-report_about", "SORRY", "-as", "mkisofs", "-o", str(target), "-iso-level", "3",
            "-r", "-V", ISO_VOLUME_ID, "-graft-points",
            "-b", "boot/grub/i386-pc/eltorito.img", "-no-emul-boot", "-boot-load-size", "4",
            "-boot-info-table", "--grub2-boot-info", "--grub2-mbr", str(boot.hybrid_mbr),
            "--efi-boot", "boot/grub/efi.img", "-efi-boot-part", "--efi-boot-image",
            "--protective-msdos-label",
            *(f"{path}={source.resolve()}" for path, source in grafts.items()),
            # back to native commands: every file's dates are the epoch, not the inputs' mtimes
            "--", "-volume_date", "all_file_dates", str(epoch),
        ],
        env={"SOURCE_DATE_EPOCH": str(epoch)},
        timeout=600,
        hint="xorriso could not write the ISO",
    )  # fmt: skip
