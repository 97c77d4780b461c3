"""The iso, metal (raw.xz) and installer outputs build byte-identically twice from the same inputs.

Both builds use the same (warm) layer cache: the layers' own reproducibility is
tests/test_e2e_imager_reproducible.py's; what this proves is the assembly: the initramfs, GRUB's
images, the ISO's El Torito/EFI/FAT structures and dates (xorriso), the metal disk's GPT, xfs, FAT
and META (pinned GUIDs, volume ids and file times), xz with a fixed thread count, and the OCI
archive. The sha256 compared is the artefact's own, over every byte. Slow by design: ~2-4 min on
2 busy cores with a warm cache (xz of the 1.2 GiB disk image is most of it), several more when the
layers must be built first.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from ichor.imager._build import BuildOptions, Profile, build

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_iso_metal_and_installer_are_byte_identical_across_builds(tmp_path: Path) -> None:
    for tool in ("mksquashfs", "unsquashfs", "apt-get", "dpkg-deb", "depmod", "xorriso", "grub-mkimage",
                 "mkfs.xfs", "mkfs.vfat", "mcopy", "xz"):  # fmt: skip
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (scripts/os-packages.txt)")
    shas: dict[str, list[str]] = {}
    for run in ("one", "two"):
        options = BuildOptions(output=tmp_path / run, extra_kernel_args=("console=ttyS0",))
        for profile in (Profile.ISO, Profile.METAL, Profile.INSTALLER):
            started = time.monotonic()
            artefact = build(profile, options)
            print(
                f"{run}: {artefact.path.name} {artefact.size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s"
            )
            shas.setdefault(artefact.path.name, []).append(artefact.sha256)
        assert sorted(p.name for p in (tmp_path / run).iterdir()) == [
            "installer-amd64.tar", "metal-amd64.iso", "metal-amd64.raw.xz"]  # fmt: skip
    assert {name: len(set(values)) for name, values in shas.items()} == {
        "metal-amd64.iso": 1, "metal-amd64.raw.xz": 1, "installer-amd64.tar": 1}  # fmt: skip
