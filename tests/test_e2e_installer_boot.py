"""The installer's disk boots GRUB under QEMU (TCG), UEFI (OVMF) and legacy BIOS (SeaBIOS).

No kernel is needed to prove the boot chain up to Ichor's grub.cfg: the disk's grubenv puts slot A
on trial, and GRUB's counting block saves one try less before it shows the menu. Seeing
``ichor_tries=2`` in the image afterwards proves that firmware loaded GRUB (BOOTX64.EFI from the
EFI partition, or boot.img in the MBR + core.img in the BIOS partition through our block list),
that GRUB found BOOT by label, read grub.cfg and the grubenv from xfs and wrote the grubenv back.
Each QEMU is stopped by its PID as soon as that is seen.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from disk_helpers import GIB, sparse

from ichor.installer import InstallSpec, install
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.blockdev import read_disk_table
from ichor.machinery.bootloader import BootState, Slot, parse_env, render_env

pytestmark = [pytest.mark.e2e, pytest.mark.vm]

OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
HEADER = b"# GRUB Environment Block\n"


@pytest.fixture(scope="module")
def grub_images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    missing = [
        t
        for t in ("qemu-system-x86_64", "grub-mkimage", "mkfs.xfs", "mkfs.vfat", "mcopy")
        if shutil.which(t) is None
    ]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/os-packages.txt)")
    images = build_grub_images(tmp_path_factory.mktemp("grub"))
    return {"efi": images.efi, "core": images.core, "boot": images.boot}


def _disk(tmp_path: Path, grub: dict[str, Path]) -> tuple[Path, int]:
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"not a kernel")
    disk = sparse(tmp_path / "disk.raw", 2 * GIB)
    install(
        InstallSpec(
            disk=disk, kernel=kernel, initramfs=kernel, version="v1.7.6", cmdline="console=ttyS0",
            legacy_bios=True, efi_files={"EFI/BOOT/BOOTX64.EFI": grub["efi"]},
            bios_core=grub["core"], bios_boot=grub["boot"],
        ),
        printf=lambda _: None,
    )  # fmt: skip
    table = read_disk_table(disk)
    assert table is not None
    boot = table.by_name("BOOT")
    assert boot is not None
    offset = _find_grubenv(disk, boot.offset(), boot.offset() + boot.size())
    trial = BootState(good=Slot.A, trial=Slot.A, tries=3, versions={Slot.A: "v1.7.6"})
    fd = os.open(disk, os.O_WRONLY)
    try:
        os.pwrite(fd, render_env(trial.to_env()), offset)
    finally:
        os.close(fd)
    return disk, offset


def _find_grubenv(disk: Path, start: int, end: int) -> int:
    """The grubenv's offset in the image: the one 512-aligned GRUB header in BOOT's data regions."""
    found = []
    fd = os.open(disk, os.O_RDONLY)
    try:
        pos = start
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            hole = min(os.lseek(fd, pos, os.SEEK_HOLE), end)
            data = os.pread(fd, hole - pos, pos)
            found += [
                pos + m.start() for m in re.finditer(re.escape(HEADER), data) if (pos + m.start()) % 512 == 0
            ]
            pos = hole
    finally:
        os.close(fd)
    assert len(found) == 1, f"grubenv found {len(found)} times in BOOT"
    return found[0]


def _tries(disk: Path, offset: int) -> str:
    with disk.open("rb") as f:
        f.seek(offset)
        return parse_env(f.read(1024)).get("ichor_tries", "")


def _boot_until_grub_counts(disk: Path, offset: int, firmware: list[str], log: Path, budget: float) -> float:
    args = ["qemu-system-x86_64", "-accel", "tcg", "-machine", "q35", "-m", "256", "-nographic", "-no-reboot",
            "-net", "none", "-drive", f"file={disk},format=raw,if=virtio,cache=unsafe", *firmware]  # fmt: skip
    start = time.monotonic()
    child = proc.start(args, output=log)
    try:
        while time.monotonic() - start < budget:
            if _tries(disk, offset) == "2":
                return time.monotonic() - start
            if child.poll() is not None:
                break
            time.sleep(0.5)
        tail = log.read_text(errors="replace")[-800:]
        raise AssertionError(f"GRUB never counted a try within {budget:g} s; serial: {tail}")
    finally:
        if child.poll() is None:
            child.signal_group(signal.SIGKILL)
        child.wait(30)


def test_uefi_boots_grub_from_the_installed_disk(tmp_path: Path, grub_images: dict[str, Path]) -> None:
    if not OVMF_CODE.exists() or not OVMF_VARS.exists():
        pytest.skip("ovmf not installed (scripts/os-packages.txt)")
    disk, offset = _disk(tmp_path, grub_images)
    vars_copy = tmp_path / "OVMF_VARS.fd"
    shutil.copy(OVMF_VARS, vars_copy)
    firmware = [
        "-drive",
        f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
        "-drive",
        f"if=pflash,format=raw,file={vars_copy}",
    ]
    seconds = _boot_until_grub_counts(disk, offset, firmware, tmp_path / "uefi.log", budget=120)
    print(f"UEFI: GRUB counted a try {seconds:.1f} s after QEMU started")


def test_bios_boots_grub_from_the_installed_disk(tmp_path: Path, grub_images: dict[str, Path]) -> None:
    disk, offset = _disk(tmp_path, grub_images)
    seconds = _boot_until_grub_counts(disk, offset, [], tmp_path / "bios.log", budget=120)
    print(f"BIOS: GRUB counted a try {seconds:.1f} s after QEMU started")
