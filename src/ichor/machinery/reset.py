"""Reset rules of Talos 1.7 as pure functions: which request is refused (with Talos's texts) and what it wipes.

From ``v1alpha1_server.go Reset``, ``installer.ParseTarget`` and ``v1alpha1_sequencer.go Reset``:

- user disks (``--user-disks-to-wipe``) must exist, be writable and not be the system disk, and are
  refused in mode SYSTEM_DISK; system labels (``--system-labels-to-wipe``) are refused in mode
  USER_DISKS, must be a label Talos knows and must be on the system disk;
- mode ALL/SYSTEM_DISK with labels wipes just those partitions (``resetSpec``), without labels the
  whole system disk (``reset``, FastWipe); ALL/USER_DISKS wipe the user disks given;
- kexec is used only when labels are given and BOOT is not among them;
- wiping STATE but not META also deletes META's StateEncryptionConfig tag.

The boot-time form ``talos.experimental.wipe=system`` / ``system:LABEL,...`` is :func:`parse_wipe_arg`.
Nothing here touches a disk; the sequencer carries out the :class:`ResetPlan`.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ichor.machinery.blockdev import Disk, Label
from ichor.machinery.errors import ResetError

__all__ = ["SYSTEM_LABELS", "ResetPlan", "WipeMode", "parse_target", "parse_wipe_arg", "plan_reset"]

SYSTEM_LABELS: tuple[str, ...] = tuple(label.value for label in Label)
"""The labels ``installer.ParseTarget`` accepts."""


class WipeMode(enum.StrEnum):
    """``--wipe-mode`` (``ResetRequest.WipeMode``)."""

    ALL = "all"
    SYSTEM_DISK = "system-disk"
    USER_DISKS = "user-disks"


@dataclass(frozen=True)
class ResetPlan:
    """What a valid reset does to the disks."""

    wipe_system_disk: bool
    """FastWipe the whole system disk (mode all/system-disk with no labels)."""
    system_labels: tuple[str, ...]
    """Partitions to wipe one by one (``resetSpec``), in the order asked."""
    user_disks: tuple[str, ...]
    delete_state_encryption_tag: bool
    kexec: bool
    """Reboot with kexec (only when labels are wiped and BOOT is not one of them)."""


def parse_target(label: str) -> str:
    """A system partition label Talos knows; ResetError ``label "X" is not supported`` otherwise."""
    if label not in SYSTEM_LABELS:
        raise ResetError(f"label {label!r} is not supported".replace("'", '"'))
    return label


def plan_reset(
    mode: WipeMode,
    *,
    system_labels: Mapping[str, bool] | Sequence[str] = (),
    user_disks: Sequence[str] = (),
    disks: Sequence[Disk] = (),
    system_disk: str | None = None,
    partition_labels: Collection[str] = (),
) -> ResetPlan:
    """Validate a reset request as Talos 1.7's API does and say what it wipes.

    ``system_labels`` maps each label to its ``wipe`` flag (a plain list means all true);
    ``disks`` is the node's disks (:func:`~ichor.machinery.blockdev.list_disks`), ``system_disk``
    the device installed to, ``partition_labels`` the GPT names on it.
    """
    specs = dict(system_labels) if isinstance(system_labels, Mapping) else dict.fromkeys(system_labels, True)
    if user_disks:
        if mode == WipeMode.SYSTEM_DISK:
            raise ResetError(
                "reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter"
            )
        by_name = {d.device_name: d for d in disks}
        for name in user_disks:
            disk = by_name.get(name)
            if disk is None:
                raise ResetError(f"reset user disk failed: device {name} wasn't found")
            if disk.read_only:
                raise ResetError(f"reset user disk failed: device {name} is readonly")
            if system_disk is not None and name == system_disk:
                raise ResetError(f"reset user disk failed: device {name} is the system disk")
    targets: list[str] = []
    if specs:
        if mode == WipeMode.USER_DISKS:
            raise ResetError(
                "reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter"
            )
        for label, wipe in specs.items():
            parse_target(label)
            if label not in partition_labels:
                # Talos 1.7 dereferences a missing partition here; say what is wrong instead.
                raise ResetError(f'failed location partition with label "{label}": partition not found')
            if wipe:
                targets.append(label)
    reset_system = mode in (WipeMode.ALL, WipeMode.SYSTEM_DISK)
    reset_user = mode in (WipeMode.ALL, WipeMode.USER_DISKS)
    return ResetPlan(
        wipe_system_disk=reset_system and not targets,
        system_labels=tuple(targets) if reset_system else (),
        user_disks=tuple(user_disks) if reset_user else (),
        delete_state_encryption_tag=reset_system and Label.STATE in targets and Label.META not in targets,
        kexec=bool(targets) and Label.BOOT not in targets,
    )


def parse_wipe_arg(value: str | None, partition_labels: Collection[str] = ()) -> tuple[str, ...] | None:
    """``talos.experimental.wipe``: None for ``system`` (the whole disk), else the labels to wipe.

    Raises :class:`ResetError` with the texts of Talos's Initialize task.
    """
    if not value:
        raise ResetError("no wipe target specified")
    if value == "system":
        return None
    if not value.startswith("system:"):
        raise ResetError(f'invalid wipe labels string: "{value}"')
    labels = []
    for part in value.removeprefix("system:").split(","):
        try:
            parse_target(part)
        except ResetError as e:
            raise ResetError(f'error parsing target label "{part}": {e}') from e
        if part not in partition_labels:
            raise ResetError(f'error locating partition "{part}": partition not found')
        labels.append(part)
    if not labels:
        raise ResetError("no wipe labels specified")
    return tuple(labels)
