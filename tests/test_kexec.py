"""kexec's plumbing without calling the kernel: the host's kernel is shared, so nothing here loads
one (the VM tests load and jump for real: test_e2e_vm_upgrade, test_e2e_metal_install)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.machined.kexecprep import KexecPrepare
from ichor.machinery import kexec
from ichor.machinery.errors import KexecError, SlotError


def test_the_system_call_number_is_the_architecture_s() -> None:
    assert kexec.syscall_number("x86_64") == 320 and kexec.syscall_number("aarch64") == 294
    with pytest.raises(KexecError, match="kexec is not supported on riscv64"):
        kexec.syscall_number("riscv64")


def test_loaded_and_disabled_are_read_from_sys_and_proc(tmp_path: Path) -> None:
    assert not kexec.is_loaded(tmp_path) and not kexec.is_disabled(tmp_path)  # absent: no
    (tmp_path / "kexec_loaded").write_text("1\n")
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "kexec_load_disabled").write_text("0\n")
    assert kexec.is_loaded(tmp_path) and not kexec.is_disabled(tmp_path)
    (tmp_path / "kernel" / "kexec_load_disabled").write_text("1\n")
    assert kexec.is_disabled(tmp_path)


def test_a_load_names_the_file_it_cannot_open_before_any_system_call(tmp_path: Path) -> None:
    with pytest.raises(KexecError, match=r"cannot open the kernel .*/vmlinuz: No such file"):
        kexec.load(tmp_path / "vmlinuz", None, "console=ttyS0")
    (tmp_path / "vmlinuz").write_bytes(b"not a kernel")
    with pytest.raises(KexecError, match=r"cannot open the initramfs .*/initramfs.xz: No such file"):
        kexec.load(tmp_path / "vmlinuz", tmp_path / "initramfs.xz", "console=ttyS0")
    with pytest.raises(KexecError, match="NUL"):
        kexec.load(tmp_path / "vmlinuz", None, "a\0b")


class _Disk:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.loads: list[str] = []

    def load_next_boot(self, load: object) -> object:
        if self.error is not None:
            raise self.error
        self.loads.append("next")
        return type("T", (), {"message": "boot: slot B (v2) on trial, 2 tries left"})()


def test_kexec_prepare_says_what_it_did_and_why_a_reboot_goes_through_the_firmware(tmp_path: Path) -> None:
    disk = _Disk()
    prepare = KexecPrepare(disk, proc_sys=tmp_path)  # type: ignore[arg-type,return-value]
    assert prepare() == (
        "kexec: loaded the next boot (boot: slot B (v2) on trial, 2 tries left): rebooting without the firmware"
    )
    assert disk.loads == ["next"]
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "kexec_load_disabled").write_text("1\n")
    assert prepare() == "kexec: disabled by kernel.kexec_load_disabled=1: rebooting through the firmware"
    assert disk.loads == ["next"]  # not asked
    (tmp_path / "kernel" / "kexec_load_disabled").write_text("0\n")
    refused = KexecError("kexec_file_load: Operation not permitted", hint="kexec is disabled")
    assert KexecPrepare(_Disk(refused), proc_sys=tmp_path)() == (  # type: ignore[arg-type,return-value]
        "kexec: kexec_file_load: Operation not permitted (kexec is disabled): rebooting through the firmware"
    )
    empty = SlotError("slot A holds no kernel and initramfs")
    assert KexecPrepare(_Disk(empty), proc_sys=tmp_path)().startswith(  # type: ignore[arg-type,return-value]
        "kexec: slot A holds no kernel and initramfs: rebooting"
    )
