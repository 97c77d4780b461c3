"""Talos 1.7's reset validation and what a reset wipes, as pure functions (no disks touched)."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.machinery.blockdev import Disk, Label
from ichor.machinery.errors import ResetError
from ichor.machinery.reset import ResetPlan, WipeMode, parse_wipe_arg, plan_reset

LABELS = [label.value for label in Label]
DISKS = [Disk("/dev/vda", 6 << 30), Disk("/dev/vdb", 1 << 30), Disk("/dev/vdc", 1 << 30, read_only=True)]


def _plan(mode: WipeMode, **kwargs: Any) -> ResetPlan:
    return plan_reset(mode, disks=DISKS, system_disk="/dev/vda", partition_labels=LABELS, **kwargs)


@pytest.mark.parametrize(
    ("mode", "kwargs", "message"),
    [
        (
            WipeMode.SYSTEM_DISK,
            {"user_disks": ["/dev/vdb"]},
            "reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter",
        ),
        (
            WipeMode.USER_DISKS,
            {"system_labels": ["STATE"]},
            "reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter",
        ),
        (WipeMode.ALL, {"user_disks": ["/dev/sdz"]}, "reset user disk failed: device /dev/sdz wasn't found"),
        (WipeMode.ALL, {"user_disks": ["/dev/vdc"]}, "reset user disk failed: device /dev/vdc is readonly"),
        (
            WipeMode.USER_DISKS,
            {"user_disks": ["/dev/vda"]},
            "reset user disk failed: device /dev/vda is the system disk",
        ),
        (WipeMode.ALL, {"system_labels": ["DATA"]}, 'label "DATA" is not supported'),
    ],
)
def test_talos_refusals(mode: WipeMode, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ResetError) as refused:
        _plan(mode, **kwargs)
    assert str(refused.value) == message


def test_label_missing_from_the_disk() -> None:
    with pytest.raises(ResetError, match='label "BIOS": partition not found'):
        plan_reset(
            WipeMode.ALL, system_labels=["BIOS"], partition_labels=["EFI", "META", "STATE", "EPHEMERAL"]
        )


def test_what_each_reset_wipes() -> None:
    full = plan_reset(WipeMode.ALL)
    assert (full.wipe_system_disk, full.system_labels, full.kexec) == (True, (), False)
    ephemeral = _plan(WipeMode.ALL, system_labels=["EPHEMERAL"])  # the Disaster Recovery guide's reset
    assert ephemeral == plan_reset(WipeMode.ALL, system_labels={"EPHEMERAL": True}, partition_labels=LABELS)
    assert (ephemeral.wipe_system_disk, ephemeral.system_labels, ephemeral.kexec) == (
        False,
        ("EPHEMERAL",),
        True,
    )
    state = _plan(WipeMode.SYSTEM_DISK, system_labels=["STATE", "EPHEMERAL"])
    assert state.delete_state_encryption_tag and state.kexec
    with_meta = _plan(WipeMode.ALL, system_labels=["STATE", "META", "BOOT"])
    assert not with_meta.delete_state_encryption_tag and not with_meta.kexec
    users = _plan(WipeMode.USER_DISKS, user_disks=["/dev/vdb"])
    assert (users.wipe_system_disk, users.user_disks) == (False, ("/dev/vdb",))
    # a label listed with wipe=false is checked but not wiped: then the whole disk is not wiped either
    kept = _plan(WipeMode.ALL, system_labels={"STATE": False})
    assert (kept.wipe_system_disk, kept.system_labels) == (True, ())


def test_boot_time_wipe_argument() -> None:
    assert parse_wipe_arg("system", LABELS) is None
    assert parse_wipe_arg("system:EPHEMERAL,STATE", LABELS) == ("EPHEMERAL", "STATE")
    with pytest.raises(ResetError, match=r"^no wipe target specified$"):
        parse_wipe_arg("", LABELS)
    with pytest.raises(ResetError, match=r'^invalid wipe labels string: "EPHEMERAL"$'):
        parse_wipe_arg("EPHEMERAL", LABELS)
    with pytest.raises(
        ResetError, match=r'^error parsing target label "DATA": label "DATA" is not supported$'
    ):
        parse_wipe_arg("system:STATE,DATA", LABELS)
    with pytest.raises(ResetError, match=r'^error parsing target label "": label "" is not supported$'):
        parse_wipe_arg("system:", LABELS)
