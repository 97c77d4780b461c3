"""``talos.experimental.wipe`` at boot (``ichor.machined.bootwipe``, the metal boot's ``_wipe_at_boot``).

On a sparse disk image with Talos 1.7's GPT: ``system:EPHEMERAL,STATE`` (the installed GRUB's reset
entry) zeroes exactly those partitions, keeps BOOT and META (less the StateEncryptionConfig tag),
says Talos's lines and does not reboot; ``system`` wipes the whole disk (no GPT left) and reboots;
a wipe including BOOT reboots; bad values stop the boot with Talos's texts. Not VM-proven: a real
boot with the argument on a VM (the GRUB menu entry chosen at the console) has not been run.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest

from ichor.machined import _metal_boot
from ichor.machined.bootwipe import BootWipe, plan_boot_wipe, wipe_at_boot
from ichor.machined.kernelargs import KernelArgs
from ichor.machinery import blockdev
from ichor.machinery.blockdev import (
    PartitionTable,
    open_device,
    plan,
    read_disk_table,
    talos_layout,
    write_table,
)
from ichor.machinery.bootloader._grubcfg import RESET_ARG
from ichor.machinery.errors import ResetError
from ichor.machinery.meta import Meta, MetaKey

GIB, MIB = 1 << 30, 1 << 20


def _installed(tmp_path: Path) -> tuple[str, PartitionTable]:
    """A 2 GiB sparse image with Talos's GPT, data on STATE/EPHEMERAL/BOOT and two META tags."""
    disk = tmp_path / "disk.raw"
    with disk.open("wb") as f:
        f.truncate(2 * GIB)
    with open_device(disk, write=True) as fd:
        write_table(fd, plan(2 * GIB, talos_layout()), sync=False)
    table = read_disk_table(disk)
    assert table is not None
    with open_device(disk, write=True) as fd:
        for label in ("STATE", "EPHEMERAL", "BOOT"):
            part = table.by_name(label)
            assert part is not None
            os.pwrite(fd, f"XFSB {label} data".encode(), part.offset())
    meta = _meta(str(disk), table)
    meta.set(MetaKey.StateEncryptionConfig, b'{"provider":"luks2"}')
    meta.set(MetaKey.UserReserved1, b"kept")
    meta.flush()
    return str(disk), table


def _meta(disk: str, table: PartitionTable) -> Meta:
    part = table.by_name("META")
    assert part is not None
    return Meta.open(disk, printer=lambda _: None, offset=part.offset(), size=part.size())


def _head(disk: str, table: PartitionTable, label: str) -> bytes:
    part = table.by_name(label)
    assert part is not None
    with open(disk, "rb") as f:
        f.seek(part.offset())
        return f.read(20)


def test_the_reset_menu_entry_wipes_state_and_ephemeral_and_boots_on(tmp_path: Path) -> None:
    disk, table = _installed(tmp_path)
    value = RESET_ARG.split("=", 1)[1]
    assert value == "system:EPHEMERAL,STATE"
    said: list[str] = []
    wiped = wipe_at_boot(value, (disk, table), said.append)
    assert wiped == BootWipe(("EPHEMERAL", "STATE")) and not wiped.reboot
    assert _head(disk, table, "STATE") == bytes(20) == _head(disk, table, "EPHEMERAL")
    assert _head(disk, table, "BOOT").startswith(b"XFSB BOOT data")
    meta = _meta(disk, table)
    assert meta.get(MetaKey.StateEncryptionConfig) is None and meta.get(MetaKey.UserReserved1) == b"kept"
    targets = f'[{disk}6 ("EPHEMERAL") {disk}5 ("STATE")]'
    assert said[0] == f"resetting system disks {targets}"
    assert "reset the state encryption META config tag" in said
    assert said[-2:] == [
        "successfully reset system disk by the spec",
        f"finished resetting system disks {targets}",
    ]


def test_system_wipes_the_whole_disk_and_reboots_and_boot_among_labels_reboots(tmp_path: Path) -> None:
    disk, table = _installed(tmp_path)
    said: list[str] = []
    wiped = wipe_at_boot("system", (disk, table), said.append)
    assert wiped == BootWipe(None) and wiped.reboot
    assert read_disk_table(disk) is None  # FastWipe: both GPTs gone
    assert said == ["resetting system disks", "finished resetting system disks"]
    # no installed disk: nothing to wipe, and Talos reboots all the same
    assert wipe_at_boot("system", None, said.append) == BootWipe(None)
    with_boot = plan_boot_wipe("system:BOOT,STATE", plan(2 * GIB, talos_layout()))
    assert with_boot == BootWipe(("BOOT", "STATE")) and with_boot.reboot


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("EPHEMERAL", 'invalid wipe labels string: "EPHEMERAL"'),
        ("system:STATE,DATA", 'error parsing target label "DATA": label "DATA" is not supported'),
        ("system:", 'error parsing target label "": label "" is not supported'),
    ],
)
def test_bad_values_stop_with_talos_texts(value: str, message: str, tmp_path: Path) -> None:
    table = plan(2 * GIB, talos_layout())
    with pytest.raises(ResetError) as failed:
        plan_boot_wipe(value, table)
    assert str(failed.value) == message


def test_no_value_does_nothing_and_labels_need_an_installed_disk() -> None:
    assert plan_boot_wipe(None, None) is None and plan_boot_wipe("", None) is None
    with pytest.raises(ResetError, match="no installed system disk"):
        plan_boot_wipe("system:STATE", None)
    uki = plan(2 * GIB, talos_layout(uki=True))  # no BOOT partition on a UKI layout
    with pytest.raises(ResetError, match='error locating partition "BOOT": partition not found'):
        plan_boot_wipe("system:BOOT", uki)


def test_metal_boot_reboots_fails_or_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    disk, table = _installed(tmp_path)
    monkeypatch.setattr(blockdev, "find_system_disk", lambda _sys_block: (disk, table))
    done = tmp_path / "coldplug-done"
    done.write_text("")
    wipe = functools.partial(_metal_boot._wipe_at_boot, coldplug_done=str(done))
    assert wipe(KernelArgs.from_cmdline("talos.platform=metal")) is None
    assert wipe(KernelArgs.from_cmdline(RESET_ARG)) is None  # no BOOT: the boot goes on
    assert wipe(KernelArgs.from_cmdline("talos.experimental.wipe=system:STATE,DATA")) == 1
    assert 'wipeDisks: error parsing target label "DATA"' in capsys.readouterr().out
    assert wipe(KernelArgs.from_cmdline("talos.experimental.wipe=system")) == 75
    assert read_disk_table(disk) is None


def test_the_boot_wipe_waits_for_coldplug_and_then_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No disk driver loaded yet: the wipe waits for PID 1's coldplug (bounded) before it looks."""
    looked: list[float] = []
    monkeypatch.setattr(blockdev, "find_system_disk", lambda _sys_block: looked.append(time.monotonic()))
    done = tmp_path / "coldplug-done"
    started = time.monotonic()
    # no disk even then: the plan refuses, fatal as in Talos
    assert _metal_boot._wipe_at_boot(KernelArgs.from_cmdline(RESET_ARG), "/sys/block", str(done), 0.5) == 1
    assert looked and looked[0] - started >= 0.5, "it waited the whole bound for a coldplug that never ended"
    done.write_text("")
    looked.clear()
    started = time.monotonic()
    assert _metal_boot._wipe_at_boot(KernelArgs.from_cmdline(RESET_ARG), "/sys/block", str(done), 30.0) == 1
    assert looked and looked[0] - started < 5, "a finished coldplug is not waited for"
