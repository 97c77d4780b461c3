"""ichor.imager's iso, metal and installer profiles on small fake inputs: structure, reproducibility,
``--meta``/``--extra-kernel-arg``, and bad input leaving the output directory as it was.

The kernel and initramfs are a few bytes of text here (nothing boots them here:
tests/test_e2e_metal_install.py and test_e2e_metal_image_boot.py boot the real ones); GRUB's images, the FAT/xfs filesystems, xorriso and the OCI archive
are real.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.imager import InputError, OutputError, _build, _cmdline, _inputs
from ichor.imager.__main__ import main
from ichor.imager._cpio import Entry
from ichor.imager._installer_image import ENTRYPOINT, make_installer_image, open_installer_archive
from ichor.imager._iso import ISO_MARKER, ISO_VOLUME_ID, make_iso, render_iso_grub_cfg
from ichor.imager._metal import make_metal
from ichor.images import open_layout, unpack_image
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.blockdev import read_disk_table
from ichor.machinery.meta import Meta, MetaValue, decode_values
from ichor.machinery.proc import Completed

MIB = 1024 * 1024
EPOCH = 1_704_067_200


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/os-packages.txt)")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def boot_files(tmp_path: Path) -> tuple[Path, Path]:
    kernel, initramfs = tmp_path / "in" / "vmlinuz", tmp_path / "in" / "initramfs"
    kernel.parent.mkdir()
    kernel.write_bytes(b"fake kernel\n" * 100)
    initramfs.write_bytes(b"fake initramfs\n" * 1000)
    return kernel, initramfs


def _extract(iso: Path, path: str, target: Path) -> str:
    proc.run(["osirrox", "-indev", str(iso), "-extract", path, str(target)])
    return target.read_text()


def test_iso_has_talos_layout_both_boot_entries_and_is_reproducible(
    tmp_path: Path, boot_files: tuple[Path, Path]
) -> None:
    need("xorriso", "grub-mkimage", "mkfs.vfat", "mcopy")
    kernel, initramfs = boot_files
    cmdline = _cmdline.assemble(["console=ttyS0", "-ima_hash"])
    shas = []
    for run in ("a", "b"):
        iso = tmp_path / f"{run}.iso"
        os.utime(kernel)  # new mtimes must not change the bytes
        make_iso(iso, kernel=kernel, initramfs=initramfs, cmdline=cmdline, work=tmp_path / f"work-{run}",
                 epoch=EPOCH, version="v1.7.6")  # fmt: skip
        shas.append(_sha(iso))
    assert shas[0] == shas[1]
    iso = tmp_path / "a.iso"
    data = iso.read_bytes()
    assert data[0x8001:0x8006] == b"CD001" and data[0x8028:0x8048].rstrip() == ISO_VOLUME_ID.encode()
    assert data[510:512] == b"\x55\xaa"  # hybrid: an MBR for a USB stick
    report = proc.run(["xorriso", "-indev", str(iso), "-report_el_torito", "plain"]).stdout
    platforms = [
        line.split(":")[1].split()[1] for line in report.splitlines() if line.startswith("El Torito boot img")
    ]
    assert platforms == ["BIOS", "UEFI"], report
    cfg = _extract(iso, "/boot/grub/grub.cfg", tmp_path / "grub.cfg")
    assert cfg == render_iso_grub_cfg(cmdline)
    assert 'menuentry "Talos ISO"' in cfg and 'menuentry "Reset Talos installation"' in cfg
    assert f"linux /boot/vmlinuz {cmdline}\n" in cfg and "ima_hash" not in cfg
    assert f"linux /boot/vmlinuz {cmdline} talos.experimental.wipe=system\n" in cfg
    assert _extract(iso, "/boot/vmlinuz", tmp_path / "k") == kernel.read_text()
    assert _extract(iso, ISO_MARKER, tmp_path / "m").startswith("Ichor ISO for Talos v1.7.6")
    proc.run(["osirrox", "-indev", str(iso), "-extract", "/boot/grub/efi.img", str(tmp_path / "efi.img")])
    listing = proc.run(
        ["mdir", "-b", "-i", str(tmp_path / "efi.img"), "::EFI/BOOT"], env={"MTOOLS_SKIP_CHECK": "1"}
    )
    assert "BOOTX64.EFI" in listing.stdout


def test_iso_grub_cfg_quotes_what_grub_would_expand() -> None:
    cfg = render_iso_grub_cfg("talos.config=http://x/c?a=1&b=$uuid")
    assert "talos.config=http://x/c?a=1\\&b=\\$uuid" in cfg


@pytest.fixture
def fake_builder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, boot_files: tuple[Path, Path]
) -> Iterator[None]:
    """build() with the fake kernel and a one-file initramfs instead of the pinned Debian inputs."""
    kernel, _ = boot_files
    monkeypatch.setattr(_build._Builder, "vmlinuz", lambda self: kernel)
    monkeypatch.setattr(
        _build._Builder, "initramfs_entries", lambda self: iter([Entry("init", data=b"#!/bin/sh\n")])
    )
    yield


def _options(output: Path, **kw: object) -> _build.BuildOptions:
    return _build.BuildOptions(output=output, cache=output.parent / "cache", **kw)  # type: ignore[arg-type]


def _data_regions(path: Path, start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of every data region of a sparse file between ``start`` and ``end``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size if end is None else end
        pos = start
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            hole = min(os.lseek(fd, pos, os.SEEK_HOLE), end)
            if pos >= hole:
                break
            yield pos, os.pread(fd, hole - pos, pos)
            pos = hole
    finally:
        os.close(fd)


def _data_digest(path: Path) -> str:
    """sha256 over the data regions: a 1.2 GiB sparse image hashed in milliseconds (the artefact's
    own sha256 reads every zero: seconds; tests/test_e2e_imager_profiles_reproducible.py checks it)."""
    digest = hashlib.sha256()
    for pos, data in _data_regions(path):
        digest.update(pos.to_bytes(8, "little") + data)
    return digest.hexdigest()


def test_metal_image_is_an_installed_disk_with_meta_and_is_reproducible(
    tmp_path: Path, boot_files: tuple[Path, Path]
) -> None:
    need("grub-mkimage", "mkfs.vfat", "mcopy", "mkfs.xfs", "xfs_db")
    kernel, initramfs = boot_files
    grub = build_grub_images(tmp_path / "grub")
    cmdline = _cmdline.assemble(["-console", "console=ttyS0"])
    digests = []
    for run in ("a", "b"):
        os.utime(kernel)
        make_metal(tmp_path / f"{run}.raw", kernel=kernel, initramfs=initramfs, cmdline=cmdline, grub=grub,
                   version="v1.7.6", epoch=EPOCH, meta={0x0C: b"from the imager"})  # fmt: skip
        digests.append(_data_digest(tmp_path / f"{run}.raw"))
    assert digests[0] == digests[1]
    disk = tmp_path / "a.raw"
    assert disk.stat().st_size == 1246 * MIB and disk.stat().st_blocks * 512 < 100 * MIB
    table = read_disk_table(disk)
    assert table is not None
    assert table.names() == ["EFI", "BIOS", "BOOT", "META", "STATE", "EPHEMERAL"]
    parts = {p.name: p for p in table.partitions}
    meta = Meta.open(disk, offset=parts["META"].offset(), size=parts["META"].size())
    assert meta.items() == {0x0C: b"from the imager"}
    with disk.open("rb") as f:
        mbr = f.read(512)
    boot_start = parts["BOOT"].offset()
    boot = b"".join(d for _, d in _data_regions(disk, boot_start, boot_start + parts["BOOT"].size()))
    assert mbr[446] == 0x80 and mbr[510:512] == b"\x55\xaa" and mbr[:440] != bytes(440)  # BIOS: boot.img
    listing = proc.run(["mdir", "-b", "-i", f"{disk}@@{parts['EFI'].offset()}", "::EFI/BOOT"],
                       env={"MTOOLS_SKIP_CHECK": "1"})  # fmt: skip
    assert "BOOTX64.EFI" in listing.stdout
    # -console dropped both consoles, console=ttyS0 came back at the end (go-procfs order)
    assert cmdline.endswith("ima_hash=sha512 console=ttyS0") and "tty0" not in cmdline
    assert f"linux /A/vmlinuz {cmdline} ichor.slot=A".encode() in boot
    assert b"INSTALLER_META_BASE64" not in boot  # META values went into META, not the command line


def test_metal_build_names_and_meta_placement(
    tmp_path: Path, fake_builder: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[Path, str, dict[int, bytes]]] = []

    def fake_metal(target: Path, *, cmdline: str, meta: dict[int, bytes], **kw: object) -> None:
        target.write_bytes(b"disk")
        made.append((target, cmdline, meta))

    monkeypatch.setattr(_build, "make_metal", fake_metal)
    monkeypatch.setattr(_build, "build_grub_images", lambda work, grub_lib: None)
    out = tmp_path / "out"
    options = _options(out, out_format=_build.OutFormat.RAW, meta=(MetaValue(0x0C, "x"),))
    artefact = _build.build(_build.Profile.METAL, options)
    assert artefact.path == out / "metal-amd64.raw" and os.listdir(out) == ["metal-amd64.raw"]
    assert made[0][2] == {0x0C: b"x"} and "talos.environment" not in made[0][1]
    need("xz")
    artefact = _build.build(_build.Profile.METAL, _options(out))
    assert artefact.path.name == "metal-amd64.raw.xz" and sorted(os.listdir(out)) == [
        "metal-amd64.raw", "metal-amd64.raw.xz"]  # fmt: skip
    assert proc.run(["sh", "-c", f"xz -dc {artefact.path}"]).stdout == "disk"


def test_meta_goes_onto_the_command_line_where_there_is_no_meta_partition(tmp_path: Path) -> None:
    out = tmp_path / "out"
    artefact = _build.build(_build.Profile.CMDLINE, _options(out, meta=(MetaValue(0x0A, "net"),)))
    line = artefact.path.read_text().strip()
    arg = next(a for a in line.split() if a.startswith("talos.environment="))
    assert arg.startswith("talos.environment=INSTALLER_META_BASE64=")
    assert decode_values(arg.split("=", 2)[2]) == [MetaValue(0x0A, "net")]


def test_installer_image_is_a_pushable_reproducible_oci_archive(
    tmp_path: Path, boot_files: tuple[Path, Path]
) -> None:
    need("mksquashfs", "unsquashfs", "grub-mkimage")
    kernel, initramfs = boot_files
    grub = build_grub_images(tmp_path / "grub")
    layers = []
    for name, rel in (
        ("base", "usr/bin/python3.11"),
        ("ichor", "usr/lib/python3/dist-packages/ichor/__init__.py"),
    ):
        tree = tmp_path / f"tree-{name}"
        (tree / rel).parent.mkdir(parents=True)
        (tree / rel).write_text(f"{name}\n")
        layer = tmp_path / f"{name}.sqsh"
        proc.run(["mksquashfs", str(tree), str(layer), "-all-root", "-noappend", "-mkfs-time", "0",
                  "-all-time", "0", "-quiet"])  # fmt: skip
        layers.append(layer)
    shas = []
    for run in ("a", "b"):
        archive = tmp_path / f"installer-{run}.tar"
        make_installer_image(archive, kernel=kernel, initramfs=initramfs, grub=grub, layers=layers,
                             work=tmp_path / f"work-{run}", version="v1.7.6")  # fmt: skip
        shas.append(_sha(archive))
    assert shas[0] == shas[1]
    image = open_installer_archive(tmp_path / "installer-a.tar", tmp_path / "layout")
    assert image.tag == "v1.7.6"
    assert len(open_layout(image.layout, "v1.7.6")) == 3  # base, ichor, /usr/install (digests checked)
    root = unpack_image(image.layout, tmp_path / "root", tag="v1.7.6")
    assert (root / "usr/install/amd64/vmlinuz").read_bytes() == kernel.read_bytes()
    assert (root / "usr/install/amd64/initramfs.xz").read_bytes() == initramfs.read_bytes()
    for name in ("BOOTX64.EFI", "core.img", "boot.img"):
        assert (root / "usr/install/amd64/grub" / name).stat().st_size > 0
    assert (root / "usr/lib/python3/dist-packages/ichor/__init__.py").read_text() == "ichor\n"
    manifest = json.loads((image.layout / "blobs/sha256" / image.manifest_digest[7:]).read_text())
    config = json.loads((image.layout / "blobs/sha256" / manifest["config"]["digest"][7:]).read_text())
    assert config["config"]["Entrypoint"] == list(ENTRYPOINT) and "created" not in config


def _run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_bad_kernel_argument_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, err = _run_main(["iso", "--output", str(out), "--extra-kernel-arg", "quiet splash"], capsys)
    assert code == 1 and "error: kernel argument 'quiet splash' cannot be passed" in err and "hint:" in err
    assert not out.exists()


def test_bad_meta_value_names_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, err = _run_main(["metal", "--output", str(out), "--meta", "0x100=x"], capsys)
    assert code == 1 and "--meta '0x100=x'" in err and 'invalid key "0x100"' in err
    code, err = _run_main(["metal", "--output", str(out), "--meta", "novalue"], capsys)
    assert code == 1 and 'invalid value "novalue"' in err
    assert not out.exists()


def test_unwritable_output_is_an_output_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OutputError, match=f"cannot write to the output directory {blocker}/out"):
        _build.build(_build.Profile.ISO, _options(blocker / "out"))


def test_a_failed_iso_leaves_the_output_directory_as_it_was(tmp_path: Path, fake_builder: None) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match=r"GRUB's .* modules are missing from .*nogrub"):
        _build.build(_build.Profile.ISO, _options(out, grub_lib=tmp_path / "nogrub"))
    assert os.listdir(out) == ["keep.txt"]


def test_a_wrong_package_version_names_the_package_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def apt(args: list[str], **kw: object) -> Completed:  # apt knows another version, not this one
        if args[:2] == ["apt-cache", "madison"]:
            return Completed(args, 0, f" {args[2]} | 6.1.192-2 | http://deb.debian.org bookworm/main\n", "")
        assert args[:2] == ["apt-cache", "show"]
        return Completed(args, 100, "", "E: No packages found")

    monkeypatch.setattr(_inputs.proc, "run", apt)
    lock = tmp_path / "debs.lock"
    lock.write_text("linux-image-6.1.0-56-amd64 0.0.0-nothere kernel\n")
    out = tmp_path / "out"
    with pytest.raises(
        InputError,
        match=re.escape(
            "linux-image-6.1.0-56-amd64=0.0.0-nothere is not in the apt index (available: 6.1.192-2)"
        ),
    ):
        _build.build(_build.Profile.METAL, _options(out, debs_lock=lock))
    assert os.listdir(out) == []


def test_a_wheel_without_a_hash_names_the_wheel_and_writes_nothing(
    tmp_path: Path, fake_builder: None
) -> None:
    lock = tmp_path / "wheels.lock"
    lock.write_text("grpclib==0.4.7\n")
    out = tmp_path / "out"
    with pytest.raises(InputError, match=re.escape("wheel grpclib==0.4.7 has no --hash=sha256")):
        _build._Builder(_options(out, wheels_lock=lock)).pydeps_layer()
    assert not out.exists() or os.listdir(out) == []


def test_push_is_for_the_installer_and_needs_a_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, err = _run_main(
        ["iso", "--output", str(out), "--push", "10.5.0.1:5000/siderolabs/installer:v1"], capsys
    )
    assert code == 1 and "--push applies to the installer profile, not iso" in err
    code, err = _run_main(["installer", "--output", str(out), "--push", "siderolabs/installer:v1"], capsys)
    assert code == 1 and "--push 'siderolabs/installer:v1' names no registry" in err
    code, err = _run_main(["installer", "--output", str(out), "--push", "10.5.0.1:5000/x@sha256:00"], capsys)
    assert code == 1 and "names a digest" in err
    assert not out.exists()


def test_a_command_line_the_kernel_would_cut_is_refused_naming_the_argument() -> None:
    long_arg = "ichor.note=" + "x" * 2000
    with pytest.raises(
        InputError, match=r"would be 2\d\d\d bytes; the kernel keeps only 2047.*ichor\.note=xxx"
    ):
        _cmdline.assemble(["console=ttyS0", long_arg])
    assert len(_cmdline.assemble(["ichor.note=" + "x" * 1000])) < 2047
