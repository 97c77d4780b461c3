"""The installer's disk step on an image file (no root) and on a loop device (root), read back with
our own GPT/META/probe code and with blkid, xfs_db, mtools and a read-only mount."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_helpers import loop_device, need, sparse

from ichor.installer import InstallError, InstallSpec, format_if_blank, install, reset_partitions
from ichor.installer._bios import patch_boot_img, patch_core_img
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.blockdev import MIB, open_device, partition_path, probe, read_disk_table
from ichor.machinery.bootloader import BootDir, BootState, Slot, read_env
from ichor.machinery.kernelargs import installer_cmdline
from ichor.machinery.meta import Meta, MetaKey

GIB = 1024 * MIB
TOOLS = ("mkfs.xfs", "mkfs.vfat", "mmd", "mcopy", "mdir", "xfs_db")


@pytest.fixture
def assets(tmp_path: Path) -> tuple[Path, Path, Path]:
    kernel, initramfs, efi = tmp_path / "vmlinuz", tmp_path / "initramfs.xz", tmp_path / "BOOTX64.EFI"
    kernel.write_bytes(b"kernel" + os.urandom(300_000))
    initramfs.write_bytes(b"initramfs" + os.urandom(500_000))
    efi.write_bytes(b"MZ" + os.urandom(1000))
    return kernel, initramfs, efi


def _spec(disk: Path, assets: tuple[Path, Path, Path]) -> InstallSpec:
    kernel, initramfs, efi = assets
    return InstallSpec(
        disk=disk,
        kernel=kernel,
        initramfs=initramfs,
        version="v1.7.6",
        cmdline=str(installer_cmdline(extra_args=["-console=tty0"])),
        meta={MetaKey.UserReserved1: b"installed by a test"},
        efi_files={"EFI/BOOT/BOOTX64.EFI": efi},
        efi_volume_id="1CE0B007",
        boot_uuid="0b007b00-7b00-4b00-8b00-7b007b007b00",
        disk_guid=uuid.UUID("6a1c0de5-0000-4000-8000-000000000001"),
        source_date_epoch=1_700_000_000,
    )


def _read(path: Path | str, offset: int, length: int) -> bytes:
    with open_device(path) as fd:
        return os.pread(fd, length, offset)


def test_install_to_an_image_file(tmp_path: Path, assets: tuple[Path, Path, Path]) -> None:
    need(*TOOLS)
    disk = tmp_path / "disk.raw"
    with disk.open("wb") as f:
        f.truncate(2 * GIB)
    lines: list[str] = []
    result = install(_spec(disk, assets), printf=lines.append)

    table = read_disk_table(disk)
    assert table == result.table and table is not None
    assert table.names() == ["EFI", "BIOS", "BOOT", "META", "STATE", "EPHEMERAL"]
    parts = {p.name: p for p in table.partitions}
    boot = probe(disk, parts["BOOT"].offset())
    efi = probe(disk, parts["EFI"].offset())
    assert boot is not None and (boot.type, boot.label) == ("xfs", "BOOT")
    assert efi is not None and (efi.type, efi.label, efi.uuid) == ("vfat", "EFI", "1CE0-B007")
    for label in ("BIOS", "STATE", "EPHEMERAL"):
        assert probe(disk, parts[label].offset()) is None
        assert _read(disk, parts[label].offset(), MIB) == bytes(MIB)
    meta = Meta.open(disk, offset=parts["META"].offset(), size=parts["META"].size())
    assert meta.items() == {MetaKey.UserReserved1: b"installed by a test"}

    listing = proc.run(
        ["mdir", "-b", "-i", f"{disk}@@{parts['EFI'].offset()}", "::EFI/BOOT"], env={"MTOOLS_SKIP_CHECK": "1"}
    )
    assert "BOOTX64.EFI" in listing.stdout
    assert "ichor.slot=A" in result.grub_cfg and "console=ttyS0 init_on_alloc=1" in result.grub_cfg
    assert result.boot_state == BootState(good=Slot.A, versions={Slot.A: "v1.7.6"})
    assert any("zeroed EPHEMERAL" in line for line in lines)
    assert disk.stat().st_blocks * 512 < 200 * MIB  # the image stays sparse
    mbr = _read(disk, 0, 512)
    assert mbr[446] == 0 and mbr[450] == 0xEE  # no legacyBIOSSupport: the protective entry is not bootable


def _data_digest(path: Path) -> str:
    """sha256 over (offset, bytes) of every data region: a 2 GiB sparse image hashed in milliseconds."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        end, pos = os.fstat(fd).st_size, 0
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            digest.update(pos.to_bytes(8, "little") + os.pread(fd, hole - pos, pos))
            pos = hole
    finally:
        os.close(fd)
    return digest.hexdigest()


def test_pinned_install_is_reproducible(tmp_path: Path, assets: tuple[Path, Path, Path]) -> None:
    need(*TOOLS)
    digests = []
    for n in range(2):
        disk = tmp_path / f"disk{n}.raw"
        with disk.open("wb") as f:
            f.truncate(2 * GIB)
        install(_spec(disk, assets), printf=lambda _: None)
        digests.append(_data_digest(disk))
    assert digests[0] == digests[1]
    table = read_disk_table(tmp_path / "disk0.raw")
    assert table is not None and table.partitions[0].guid == uuid.uuid5(table.disk_guid, "EFI")


def test_install_refuses_missing_kernel_and_small_disk(
    tmp_path: Path, assets: tuple[Path, Path, Path]
) -> None:
    disk = tmp_path / "small.raw"
    with disk.open("wb") as f:
        f.truncate(512 * MIB)
    spec = _spec(disk, assets)
    with pytest.raises(InstallError, match="requested partition size 1048576000"):
        install(spec, printf=lambda _: None)
    with pytest.raises(InstallError, match="does not exist"):
        install(InstallSpec(disk, tmp_path / "nope", assets[1], "v1", "x"), printf=lambda _: None)


def test_bios_boot_patching() -> None:
    boot_img = bytes(range(256)) * 2
    mbr = bytearray(512)
    mbr[0x03:0x5A] = b"B" * (0x5A - 0x03)
    mbr[446:462] = b"\xee" * 16
    sector = patch_boot_img(boot_img, bytes(mbr), 2048 + 200 * 1024)
    assert sector[0:3] == boot_img[0:3] and sector[0x03:0x5A] == bytes(mbr[0x03:0x5A])
    assert struct.unpack_from("<Q", sector, 0x5C)[0] == 2048 + 200 * 1024
    assert (
        sector[0x66:0x68] == b"\x90\x90" and sector[446:462] == b"\xee" * 16 and sector[510:] == b"\x55\xaa"
    )
    core = bytearray(3 * 512 + 100)
    struct.pack_into("<H", core, 0x200 - 2, 0x820)
    patched = patch_core_img(bytes(core), 206848)
    assert struct.unpack_from("<QHH", patched, 0x200 - 12) == (206849, 3, 0x820)
    assert len(patched) == 4 * 512


def test_grub_images_are_reproducible(tmp_path: Path) -> None:
    need("grub-mkimage")
    if (
        not Path("/usr/lib/grub/x86_64-efi/moddep.lst").exists()
        or not Path("/usr/lib/grub/i386-pc/moddep.lst").exists()
    ):
        pytest.skip("grub-efi-amd64-bin/grub-pc-bin not installed (scripts/os-packages.txt)")
    one = build_grub_images(tmp_path / "one")
    two = build_grub_images(tmp_path / "two")
    for a, b in ((one.efi, two.efi), (one.core, two.core)):
        assert a.read_bytes() == b.read_bytes()
    assert one.efi.read_bytes()[:2] == b"MZ"
    assert 20_000 < one.core.stat().st_size < MIB and one.boot.stat().st_size == 512


# -- a loop device (root) ---------------------------------------------------------------------


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[Path]:
    need("blkid", "mount", *TOOLS)
    with loop_device(
        sparse(tmp_path / "loop.raw", 2 * GIB), "attaches a loop device and mounts BOOT read-only"
    ) as device:
        yield device


@pytest.mark.root
def test_install_to_a_loop_device(loop_disk: Path, assets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    grub = None
    if shutil.which("grub-mkimage") and Path("/usr/lib/grub/i386-pc/moddep.lst").exists():
        grub = build_grub_images(tmp_path / "grub")
    spec = _spec(loop_disk, assets)
    if grub is not None:
        spec = dataclasses.replace(spec, legacy_bios=True, bios_core=grub.core, bios_boot=grub.boot)
    install(spec, printf=lambda _: None)

    def blkid(n: int, tag: str) -> str:
        return proc.run(
            ["blkid", "-p", "-o", "value", "-s", tag, partition_path(loop_disk, n)], check=False
        ).stdout.strip()

    assert (blkid(1, "TYPE"), blkid(1, "LABEL")) == ("vfat", "EFI")
    assert (blkid(3, "TYPE"), blkid(3, "LABEL")) == ("xfs", "BOOT")
    assert blkid(5, "TYPE") == "" and blkid(6, "TYPE") == ""
    assert (
        proc.run(
            ["blkid", "-p", "-o", "value", "-s", "PART_ENTRY_NAME", partition_path(loop_disk, 4)]
        ).stdout.strip()
        == "META"
    )
    assert _read(partition_path(loop_disk, 5), 0, MIB) == bytes(MIB)
    assert Meta.open(partition_path(loop_disk, 4)).get(MetaKey.UserReserved1) == b"installed by a test"
    proc.run(["xfs_repair", "-n", partition_path(loop_disk, 3)])  # pinned inode times left it consistent
    xfs_sb = proc.run(
        ["xfs_db", "-r", "-c", "sb 0", "-c", "print magicnum fname", partition_path(loop_disk, 3)]
    ).stdout
    assert "magicnum = 0x58465342" in xfs_sb and 'fname = "BOOT\\000' in xfs_sb

    mountpoint = tmp_path / "boot"
    mountpoint.mkdir()
    proc.run(["mount", "-t", "xfs", "-o", "ro", partition_path(loop_disk, 3), str(mountpoint)])
    try:
        assert (mountpoint / "A/vmlinuz").read_bytes() == assets[0].read_bytes()
        assert (mountpoint / "A/initramfs.xz").read_bytes() == assets[1].read_bytes()
        assert read_env(mountpoint / "grub/grubenv")["ichor_ver_A"] == "v1.7.6"
        assert "ichor.slot=A" in (mountpoint / "grub/grub.cfg").read_text()
    finally:
        proc.run(["umount", str(mountpoint)], check=False)
    if grub is not None:
        mbr = _read(loop_disk, 0, 512)
        assert mbr[:0x03] == grub.boot.read_bytes()[:0x03] and mbr[0x66:0x68] == b"\x90\x90"
        assert struct.unpack_from("<Q", mbr, 0x5C)[0] == 101 * MIB // 512  # core.img at the BIOS partition
        assert mbr[446] == 0x80 and mbr[450] == 0xEE  # the protective MBR survives, marked bootable


def test_reset_wipes_exactly_the_labels_on_an_image(tmp_path: Path, assets: tuple[Path, Path, Path]) -> None:
    need(*TOOLS)
    disk = tmp_path / "disk.raw"
    with disk.open("wb") as f:
        f.truncate(2 * GIB)
    install(_spec(disk, assets), printf=lambda _: None)
    table = read_disk_table(disk)
    assert table is not None
    parts = {p.name: p for p in table.partitions}
    with open_device(disk, write=True) as fd:  # what a running node leaves on STATE and EPHEMERAL
        for label in ("STATE", "EPHEMERAL"):
            os.pwrite(fd, b"XFSB node data", parts[label].offset())
    before_boot = _read(disk, parts["BOOT"].offset(), 4 * MIB)
    boot_before = probe(disk, parts["BOOT"].offset())
    assert boot_before is not None
    lines: list[str] = []
    reset_partitions(disk, ["EPHEMERAL"], printf=lines.append)
    assert _read(disk, parts["EPHEMERAL"].offset(), MIB) == bytes(MIB)
    assert _read(disk, parts["STATE"].offset(), 14) == b"XFSB node data"
    assert _read(disk, parts["BOOT"].offset(), 4 * MIB) == before_boot
    assert lines == ["zeroed EPHEMERAL"]
    reset_partitions(disk, ["STATE", "BOOT"], printf=lambda _: None)
    assert _read(disk, parts["STATE"].offset(), MIB) == bytes(MIB)
    boot = probe(disk, parts["BOOT"].offset())
    assert boot is not None and (boot.type, boot.label) == ("xfs", "BOOT") and boot.uuid != boot_before.uuid
    # an empty BOOT: as many free blocks (sb_fdblocks) as a fresh xfs of its size
    fresh = tmp_path / "fresh.img"
    with fresh.open("wb") as f:
        f.truncate(parts["BOOT"].size())
    proc.run(["mkfs.xfs", "-q", "-f", "-L", "BOOT", str(fresh)])
    assert _read(disk, parts["BOOT"].offset() + 144, 8) == _read(fresh, 144, 8)
    meta = Meta.open(disk, offset=parts["META"].offset(), size=parts["META"].size())
    assert meta.get(MetaKey.UserReserved1) == b"installed by a test"
    with pytest.raises(InstallError, match='failed location partition with label "DATA"'):
        reset_partitions(disk, ["DATA"], printf=lambda _: None)


@pytest.mark.root
def test_upgrade_writes_only_the_slot_that_is_not_good(
    loop_disk: Path, assets: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    install(_spec(loop_disk, assets), printf=lambda _: None)
    mountpoint = tmp_path / "boot"
    mountpoint.mkdir()
    kernel2 = tmp_path / "vmlinuz-2"
    kernel2.write_bytes(b"kernel v2")
    proc.run(["mount", "-t", "xfs", partition_path(loop_disk, 3), str(mountpoint)])
    try:
        boot = BootDir(mountpoint)
        t = boot.upgrade("v1.7.7", kernel2, assets[1], {Slot.A: "x", Slot.B: "x"})
        assert t.state.trial == Slot.B
    finally:
        proc.run(["umount", str(mountpoint)], check=False)
    proc.run(["mount", "-t", "xfs", "-o", "ro", partition_path(loop_disk, 3), str(mountpoint)])
    try:
        assert (mountpoint / "A/vmlinuz").read_bytes() == assets[0].read_bytes()
        assert (mountpoint / "B/vmlinuz").read_bytes() == b"kernel v2"
        assert read_env(mountpoint / "grub/grubenv")["ichor_try"] == "B"
    finally:
        proc.run(["umount", str(mountpoint)], check=False)


def test_unwritable_disk_is_an_install_error(tmp_path: Path, assets: tuple[Path, Path, Path]) -> None:
    with pytest.raises(InstallError, match=r"cannot open .*directory"):
        install(_spec(tmp_path, assets), printf=lambda _: None)  # a directory is no disk


def test_format_on_first_mount(tmp_path: Path) -> None:
    need("mkfs.xfs")
    state = tmp_path / "state.img"
    with state.open("wb") as f:
        f.truncate(100 * MIB)
    assert format_if_blank(state, "STATE")
    found = probe(state)
    assert found is not None and (found.type, found.label) == ("xfs", "STATE")
    before = _read(state, 0, 4096)
    assert not format_if_blank(state, "STATE")  # never formats over a filesystem
    assert _read(state, 0, 4096) == before
