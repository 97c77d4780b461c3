"""The ``metal`` profile: an installed system disk as an image file (``metal-amd64.raw[.xz]``).

Talos's imager runs its installer in image mode on a loop device; Ichor's installer already works
on image files, so this is :func:`ichor.installer.install` on a sparse file of Talos's metal size
(1246 MiB, ``MinRAWDiskSize``): EFI with GRUB's ``BOOTX64.EFI``, BIOS with ``core.img`` (and
``boot.img`` in the MBR, marked bootable), BOOT with slot ``A`` and its grub.cfg/grubenv, META with
the ``--meta`` values, STATE and EPHEMERAL zeroed for machined to format on first mount. Every
identifier the installer would make random (disk and partition GUIDs, BOOT's xfs UUID, EFI's volume
id) is derived from a digest of the inputs and every file time is the build epoch, so the same
inputs give the same bytes. ``xz`` (Talos's default ``outFormat``) compresses it with a fixed thread
count, which fixes its block layout too.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from ichor.imager import InputError
from ichor.installer import InstallSpec, install
from ichor.installer._grub_images import GrubImages
from ichor.machinery import proc
from ichor.machinery.blockdev import MIB

__all__ = ["METAL_DISK_SIZE", "compress_xz", "make_metal"]

METAL_DISK_SIZE = 1246 * MIB
"""Talos's ``MinRAWDiskSize``: the metal image's size."""
_NAMESPACE = uuid.UUID("6b6c0a1e-2f7d-4c1e-9a57-69636f722d6d")  # Ichor's: only names the derivation


def _digest(paths: list[Path], *parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def make_metal(
    target: Path,
    *,
    kernel: Path,
    initramfs: Path,
    cmdline: str,
    grub: GrubImages,
    version: str,
    epoch: int,
    meta: Mapping[int, bytes] | None = None,
    disk_size: int = METAL_DISK_SIZE,
    say: Callable[[str], None] = lambda line: None,
) -> None:
    """Install onto ``target`` (created sparse, ``disk_size`` bytes) as Talos's metal image."""
    for source in (kernel, initramfs):
        if not source.is_file():
            raise InputError(f"{source} does not exist or is not a file")
    meta = dict(meta or {})
    key = _digest(
        [kernel, initramfs, grub.efi, grub.core, grub.boot],
        cmdline, version, str(epoch), str(disk_size),
        *(f"{tag}={value.hex()}" for tag, value in sorted(meta.items())),
    )  # fmt: skip
    disk_guid = uuid.uuid5(_NAMESPACE, key)
    with target.open("wb") as f:
        f.truncate(disk_size)
    install(
        InstallSpec(
            disk=target, kernel=kernel, initramfs=initramfs, version=version, cmdline=cmdline,
            legacy_bios=True, meta=meta, efi_files={"EFI/BOOT/BOOTX64.EFI": grub.efi},
            bios_core=grub.core, bios_boot=grub.boot, disk_guid=disk_guid,
            boot_uuid=str(uuid.uuid5(disk_guid, "BOOT")), efi_volume_id=key[:8], source_date_epoch=epoch,
        ),
        printf=say,
    )  # fmt: skip


def compress_xz(source: Path) -> Path:
    """``source.xz`` beside ``source`` (kept); two threads always, so the output never depends on the host."""
    if shutil.which("xz") is None:
        raise InputError(
            "xz is not installed (the metal profile's .raw.xz needs it)", hint="apt-get install xz-utils"
        )
    proc.run(["xz", "-T2", "-0", "-k", "-f", str(source)], timeout=1800)
    return source.with_name(source.name + ".xz")
