"""The iso, metal (raw.xz) and installer outputs build byte-identically twice; the installer image installs.

Both builds use the same (warm) layer cache: the layers' own reproducibility is
tests/test_e2e_imager_reproducible.py's; what this proves is the assembly: the initramfs, GRUB's
images, the ISO's El Torito/EFI/FAT structures and dates (xorriso), the metal disk's GPT, xfs, FAT
and META (pinned GUIDs, volume ids and file times), xz with a fixed thread count, and the OCI
archive. The sha256 compared is the artefact's own, over every byte. Measured on 2 cores with a
warm cache: the file 1.9 min (this test 78 s: iso 1-5 s, metal .raw.xz 23-25 s, installer 12-13 s
per build; the installer install 15 s; the push 2 s), several minutes more when the layers must be
built first, and xz alone ~65 s on a host at load 5.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import time
from pathlib import Path

import pytest

from ichor.imager.__main__ import push_installer
from ichor.imager._build import BuildOptions, Profile, build
from ichor.imager._installer_image import open_installer_archive
from ichor.images import catalog, manifest_digest, parse_reference, unpack_image
from ichor.machinery import proc
from ichor.machinery.blockdev import probe, read_disk_table
from ichor.machinery.meta import Meta, MetaValue, encode_values
from ichor.provision._registry import start_registry

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


@pytest.fixture(scope="module")
def installer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("mksquashfs", "unsquashfs", "grub-mkimage"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (scripts/os-packages.txt)")
    return build(Profile.INSTALLER, BuildOptions(output=tmp_path_factory.mktemp("installer"))).path


@pytest.mark.root
def test_the_installer_image_installs_a_disk_with_its_own_tools(installer: Path, tmp_path: Path) -> None:
    """The archive unpacked (as a node would pull it) and its entry point run in its own root: the
    image's Python, Ichor and mkfs.xfs/mkfs.vfat/mtools/xfs_db lay out a disk image. ~30 s."""
    if os.geteuid() != 0:
        pytest.skip("needs root (chroot, mknod)")
    image = open_installer_archive(installer, tmp_path / "layout")
    root = unpack_image(image.layout, tmp_path / "root", tag=image.tag, max_bytes=1 << 30)
    os.mknod(root / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # subprocess opens it
    with (root / "disk.raw").open("wb") as f:
        f.truncate(2 << 30)
    config = json.loads((image.layout / "blobs/sha256" / image.config_digest[7:]).read_text())["config"]
    env = {"PATH": next(e for e in config["Env"] if e.startswith("PATH="))[5:]}
    result = proc.run(["env", "-i", f"PATH={env['PATH']}", "INSTALLER_META_BASE64=" + encode_values([MetaValue(0x0C, "hi")]),
                       "chroot", str(root), *config["Entrypoint"], "install", "--disk", "/disk.raw"])  # fmt: skip
    assert "formatted BOOT (xfs) with slot A" in result.stdout, result.stdout + result.stderr
    table = read_disk_table(root / "disk.raw")
    assert table is not None and table.names() == ["EFI", "BIOS", "BOOT", "META", "STATE", "EPHEMERAL"]
    boot, meta = table.by_name("BOOT"), table.by_name("META")
    assert boot is not None and meta is not None
    found = probe(root / "disk.raw", boot.offset())
    assert found is not None and (found.type, found.label) == ("xfs", "BOOT")
    assert Meta.open(root / "disk.raw", offset=meta.offset(), size=meta.size()).items() == {0x0C: b"hi"}


def test_imager_push_puts_the_installer_in_a_registry(installer: Path, tmp_path: Path) -> None:
    """``push_installer`` (``python -m ichor.imager installer --push``) copies it with ichor.images'
    push to a registry like the cluster's; the registry serves the same manifest. ~20 s."""
    if shutil.which("docker-registry") is None or shutil.which("skopeo") is None:
        pytest.skip("needs docker-registry and skopeo (scripts/os-packages.txt)")
    state_dir = tmp_path / "registry-state"
    state_dir.mkdir()
    endpoint, child = start_registry(state_dir, f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.1")
    try:
        reference = parse_reference(f"{endpoint}/siderolabs/installer:v1.7.6")
        push_installer(installer, reference)
        expected = open_installer_archive(installer, tmp_path / "layout").manifest_digest
        assert manifest_digest(endpoint, reference) == expected
        assert catalog(endpoint) == ["siderolabs/installer"]
    finally:
        child.stop(timeout=5)
