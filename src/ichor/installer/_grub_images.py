"""GRUB's boot images made with ``grub-mkimage`` (no grub-install: it cannot probe loop devices).

Both images carry an early config that finds the partition labelled BOOT and runs its
``grub/grub.cfg``, so the same images serve every disk: ``BOOTX64.EFI`` (x86_64-efi, for
``EFI/BOOT/`` on the EFI partition) and ``core.img`` (i386-pc, for the BIOS partition) with
``boot.img`` (for the MBR). Host-side only (the imager); the node never needs GRUB's tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import InstallError

__all__ = ["EARLY_CONFIG", "GrubImages", "build_grub_images"]

EARLY_CONFIG = """search --no-floppy --set=root --label BOOT
set prefix=($root)/grub
configfile ($root)/grub/grub.cfg
"""
_COMMON = ["part_gpt", "xfs", "normal", "linux", "echo", "test", "search", "search_label", "configfile",
           "loadenv", "xzio", "gzio", "all_video", "serial", "terminal"]  # fmt: skip
GRUB_LIB = Path("/usr/lib/grub")


@dataclass(frozen=True)
class GrubImages:
    efi: Path
    """``BOOTX64.EFI``: goes to ``EFI/BOOT/BOOTX64.EFI`` on EFI."""
    core: Path
    """``core.img``: goes into the BIOS partition."""
    boot: Path
    """``boot.img``: its code goes into the MBR."""


def build_grub_images(out_dir: Path, *, grub_lib: Path = GRUB_LIB) -> GrubImages:
    """Build both images into ``out_dir``; InstallError names the missing GRUB platform package."""
    for platform, package in (("x86_64-efi", "grub-efi-amd64-bin"), ("i386-pc", "grub-pc-bin")):
        if not (grub_lib / platform / "moddep.lst").exists():
            raise InstallError(
                f"GRUB's {platform} modules are missing from {grub_lib}", hint=f"install {package}"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    early = out_dir / "early.cfg"
    early.write_text(EARLY_CONFIG)
    images = GrubImages(efi=out_dir / "BOOTX64.EFI", core=out_dir / "core.img", boot=out_dir / "boot.img")
    base = ["grub-mkimage", "-c", str(early), "-p", "/grub"]
    proc.run(
        [
            *base,
            "-d",
            str(grub_lib / "x86_64-efi"),
            "-O",
            "x86_64-efi",
            "-o",
            str(images.efi),
            "fat",
            *_COMMON,
        ]
    )
    proc.run(
        [
            *base,
            "-d",
            str(grub_lib / "i386-pc"),
            "-O",
            "i386-pc",
            "-o",
            str(images.core),
            "biosdisk",
            *_COMMON,
        ]
    )
    images.boot.write_bytes((grub_lib / "i386-pc" / "boot.img").read_bytes())
    early.unlink()
    return images
