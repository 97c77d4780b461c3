"""A/B slots carried out on a BOOT directory: files, grub.cfg, grubenv in a crash-safe order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ichor.machinery import proc
from ichor.machinery.bootloader import BootDir, Slot, SlotError, read_env


@pytest.fixture
def boot(tmp_path: Path) -> BootDir:
    return BootDir(tmp_path / "boot")


def _asset(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(name.encode() * 1000)
    return path


def test_upgrade_bless_upgrade_fail_returns_to_last_good(boot: BootDir, tmp_path: Path) -> None:
    cmd = {Slot.A: "talos.platform=metal", Slot.B: "talos.platform=metal"}
    boot.install_first("v1", _asset(tmp_path, "k1"), _asset(tmp_path, "i1"), cmd[Slot.A])
    assert boot.holds(Slot.A) and not boot.holds(Slot.B)
    inode = boot.grubenv.stat().st_ino

    t = boot.upgrade("v2", _asset(tmp_path, "k2"), _asset(tmp_path, "i2"), cmd)
    assert t.state.trial == Slot.B and (boot.root / "B/vmlinuz").read_bytes() == b"k2" * 1000
    assert (boot.root / "A/vmlinuz").read_bytes() == b"k1" * 1000  # the good slot is never written
    cfg = boot.grub_cfg.read_text()
    assert 'menuentry "A - Talos v1" --id A' in cfg and 'menuentry "B - Talos v2" --id B' in cfg
    slot, _ = boot.boot()
    assert slot == Slot.B and read_env(boot.grubenv)["ichor_tries"] == "2"
    boot.bless(Slot.B)

    boot.upgrade("v3", _asset(tmp_path, "k3"), _asset(tmp_path, "i3"), cmd)  # machined will not start
    with pytest.raises(SlotError, match="still on trial"):
        boot.upgrade("v4", _asset(tmp_path, "k4"), _asset(tmp_path, "i4"), cmd)
    assert not (boot.root / "A/vmlinuz").read_bytes().startswith(b"k4")  # refused before writing
    assert (boot.root / "B/vmlinuz").read_bytes() == b"k2" * 1000  # v2 (good) untouched
    assert boot.state().trial == Slot.A
    for _ in range(3):
        assert boot.boot()[0] == Slot.A
    slot, t = boot.boot()
    assert slot == Slot.B and t.state.version(Slot.B) == "v2"
    assert read_env(boot.grubenv)["ichor_failed"] == "A:v3:no healthy boot in its tries"
    assert boot.grubenv.stat().st_ino == inode and boot.grubenv.stat().st_size == 1024


def test_rollback_needs_the_other_slot_on_disk(boot: BootDir, tmp_path: Path) -> None:
    boot.install_first("v1", _asset(tmp_path, "k1"), _asset(tmp_path, "i1"), "x")
    with pytest.raises(SlotError, match=r'^cannot rollback to "", label does not exist$'):
        boot.rollback(Slot.A)
    boot.upgrade("v2", _asset(tmp_path, "k2"), _asset(tmp_path, "i2"), {Slot.A: "x", Slot.B: "x"})
    boot.bless(Slot.B)
    (boot.root / "A/initramfs.xz").unlink()  # a half-removed slot is no rollback target
    with pytest.raises(SlotError, match="label does not exist"):
        boot.rollback(Slot.B)
    shutil.copy(_asset(tmp_path, "i1"), boot.root / "A/initramfs.xz")
    t = boot.rollback(Slot.B)
    assert t.message == "rolling back from v2 (slot B) to v1 (slot A)" and boot.state().good == Slot.A


def test_written_files_pass_grub_tools(boot: BootDir, tmp_path: Path) -> None:
    if shutil.which("grub-script-check") is None or shutil.which("grub-editenv") is None:
        pytest.skip("grub-common not installed (scripts/os-packages.txt)")
    boot.install_first("v1", _asset(tmp_path, "k1"), _asset(tmp_path, "i1"), "console=ttyS0")
    boot.upgrade(
        "v2",
        _asset(tmp_path, "k2"),
        _asset(tmp_path, "i2"),
        {Slot.A: "console=ttyS0", Slot.B: "console=ttyS0"},
    )
    proc.run(["grub-script-check", str(boot.grub_cfg)])
    listed = proc.run(["grub-editenv", str(boot.grubenv), "list"]).stdout
    assert "ichor_try=B" in listed and "ichor_ver_B=v2" in listed


def test_a_slot_s_entry_is_what_its_grub_entry_boots(boot: BootDir, tmp_path: Path) -> None:
    boot.install_first("v1", _asset(tmp_path, "k1"), _asset(tmp_path, "i1"), 'console=ttyS0 x="a b"')
    kernel, initramfs, cmdline = boot.entry(Slot.A)
    assert kernel.read_bytes() == b"k1" * 1000 and initramfs.read_bytes() == b"i1" * 1000
    assert cmdline == 'console=ttyS0 x="a b" ichor.slot=A'  # GRUB's quoting undone, the slot added
    with pytest.raises(SlotError, match="slot B holds no kernel and initramfs"):
        boot.entry(Slot.B)
    boot.upgrade("v2", _asset(tmp_path, "k2"), _asset(tmp_path, "i2"), {Slot.A: "a", Slot.B: "b"})
    assert boot.entry(Slot.B)[2] == "b ichor.slot=B"
    # next_boot is GRUB's counting step without saving it; save writes it
    slot, t = boot.next_boot()
    assert slot == Slot.B and t.state.tries == 2 and boot.state().tries == 3
    boot.save(t)
    assert boot.state().tries == 2 and read_env(boot.grubenv)["ichor_tries"] == "2"
