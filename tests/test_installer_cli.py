"""``python -m ichor.installer install``: Talos's installer flags on an image file, and upgrades on a loop device."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_helpers import loop_device

from ichor.installer.__main__ import main
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.blockdev import MIB, open_device, partition_path, read_disk_table
from ichor.machinery.meta import Meta, MetaKey, MetaValue, encode_values

GIB = 1024 * MIB
TOOLS = ("mkfs.xfs", "mkfs.vfat", "mmd", "mcopy", "xfs_db", "grub-mkimage")


@pytest.fixture
def assets(tmp_path: Path) -> Path:
    if missing := [t for t in TOOLS if shutil.which(t) is None]:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/os-packages.txt)")
    if not Path("/usr/lib/grub/i386-pc/moddep.lst").exists():
        pytest.skip("grub-pc-bin not installed (scripts/os-packages.txt)")
    root = tmp_path / "usr-install-amd64"
    build_grub_images(root / "grub")
    (root / "vmlinuz").write_bytes(b"kernel v1")
    (root / "initramfs.xz").write_bytes(b"initramfs v1")
    return root


def _image(path: Path) -> Path:
    with path.open("wb") as f:
        f.truncate(2 * GIB)
    return path


def test_install_flags_on_an_image(tmp_path: Path, assets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = _image(tmp_path / "metal.raw")
    monkeypatch.setenv("INSTALLER_META_BASE64", encode_values([MetaValue(0x0D, "from env")]))
    code = main(
        ["install", "--disk", str(disk), "--assets", str(assets), "--legacy-bios", "--meta", "0x0c=from flag",
         "--extra-kernel-arg=-console=tty0", "--config", "http://10.5.0.1/config.yaml"]
    )  # fmt: skip
    assert code == 0
    table = read_disk_table(disk)
    assert table is not None
    meta_part = table.by_name("META")
    assert meta_part is not None
    meta = Meta.open(disk, offset=meta_part.offset(), size=meta_part.size())
    assert meta.items() == {0x0C: b"from flag", 0x0D: b"from env"}
    with open_device(disk) as fd:
        mbr = os.pread(fd, 512, 0)
        core = os.pread(fd, 512, 101 * MIB)
    assert mbr[446] == 0x80 and mbr[0x66:0x68] == b"\x90\x90"  # legacy BIOS: bootable, boot.img in
    assert (
        core[:500] == (assets / "grub/core.img").read_bytes()[:500]
    )  # core.img in BIOS (block list patched after)


def test_errors_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    disk = _image(tmp_path / "metal.raw")
    assert main(["install", "--disk", str(disk), "--assets", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "vmlinuz does not exist" in err
    assert main(["install", "--disk", str(disk), "--meta", "x"]) == 1
    assert 'error: invalid value "x"' in capsys.readouterr().err


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[Path]:
    with loop_device(_image(tmp_path / "loop.raw"), "attaches a loop device and mounts BOOT") as device:
        yield device


@pytest.mark.root
def test_upgrade_on_a_loop_device(
    loop_disk: Path, assets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install", "--disk", str(loop_disk), "--assets", str(assets), "--version", "v1.7.6"]) == 0
    (assets / "vmlinuz").write_bytes(b"kernel v2")
    upgrade = [
        "install",
        "--upgrade",
        "--disk",
        str(loop_disk),
        "--assets",
        str(assets),
        "--version",
        "v1.7.7",
    ]
    assert main(upgrade) == 0
    assert Meta.open(partition_path(loop_disk, 4)).get_str(MetaKey.Upgrade) == "A"
    capsys.readouterr()
    assert main(upgrade) == 1
    assert capsys.readouterr().err.startswith(
        "error: upgrade refused: slot B (v1.7.7) is still on trial; wait for it to be marked good or run talosctl rollback"
    )
    assert main([*upgrade, "--force"]) == 0
    mountpoint = tmp_path / "boot"
    mountpoint.mkdir()
    proc.run(["mount", "-t", "xfs", "-o", "ro", partition_path(loop_disk, 3), str(mountpoint)])
    try:
        assert (mountpoint / "A/vmlinuz").read_bytes() == b"kernel v1"
        assert (mountpoint / "B/vmlinuz").read_bytes() == b"kernel v2"
        cfg = (mountpoint / "grub/grub.cfg").read_text()
        assert 'menuentry "A - Talos v1.7.6" --id A' in cfg and 'menuentry "B - Talos v1.7.7" --id B' in cfg
    finally:
        proc.run(["umount", str(mountpoint)], check=False)
