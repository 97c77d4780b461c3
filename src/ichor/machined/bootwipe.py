"""``talos.experimental.wipe`` at boot: Talos 1.7's ``wipeDisks`` phase, before the system partitions are mounted.

Facts from Talos 1.7.6 (``v1alpha1_sequencer.go`` Initialize, ``ResetSystemDiskPartitions``,
``parseTargets``, ``ResetSystemDiskSpec``):

* the phase runs after META is read and before STATE is mounted, only when the argument has a
  non-empty value (``talos.experimental.wipe=`` does nothing);
* ``system`` wipes the **whole system disk** (``ResetSystemDisk``: FastWipe, partition table
  included: "resetting system disks", "finished resetting system disks") and then reboots; with no
  installed disk nothing is wiped and it reboots all the same;
* ``system:LABEL,...`` (the installed GRUB's "Reset Talos installation and return to maintenance
  mode" entry passes ``system:EPHEMERAL,STATE``) wipes those partitions as ``talosctl reset
  --system-labels-to-wipe`` does (each target formatted again; STATE wiped without META drops META's
  StateEncryptionConfig tag), says "resetting system disks [/dev/vda6 ("EPHEMERAL") ...]" and
  reboots **only when BOOT was among them**: otherwise the boot goes on (a wiped STATE: maintenance
  mode; a wiped EPHEMERAL: formatted again on its mount);
* a bad value fails the boot with :func:`~ichor.machinery.reset.parse_wipe_arg`'s texts
  ("invalid wipe labels string: ...", "error parsing target label ...", "error locating partition ...").

The ISO's "Reset Talos installation" entry (``imager/_iso.py``) passes plain ``system``.
:func:`wipe_at_boot` is called by the metal boot (:mod:`ichor.machined._metal_boot`) before
``mount_system_partitions``; a node without a disk of its own (container, process) never sees it.
Errors: :class:`~ichor.machinery.errors.ResetError` (a bad value, no installed disk for labels) and
whatever the wipe raises (:class:`~ichor.machinery.errors.MachineryError`, ``OSError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ichor.machinery.blockdev import Label, PartitionTable, fast_wipe, open_device, partition_path
from ichor.machinery.errors import ResetError
from ichor.machinery.meta import Meta, MetaKey
from ichor.machinery.reset import parse_wipe_arg

__all__ = ["BootWipe", "plan_boot_wipe", "wipe_at_boot"]

KERNEL_ARG = "talos.experimental.wipe"


@dataclass(frozen=True)
class BootWipe:
    """What the argument asks: ``labels`` None is the whole system disk."""

    labels: tuple[str, ...] | None

    @property
    def reboot(self) -> bool:
        """Talos reboots after a whole-disk wipe, and after a label wipe only when BOOT was wiped."""
        return self.labels is None or Label.BOOT in self.labels


def plan_boot_wipe(value: str | None, table: PartitionTable | None) -> BootWipe | None:
    """The wipe ``talos.experimental.wipe=<value>`` asks for on a disk with ``table`` (None: no
    installed disk); None when the phase does not run (no value)."""
    if not value:
        return None
    if value != "system" and table is None:
        raise ResetError(f"cannot wipe {value}: the node has no installed system disk")
    labels = parse_wipe_arg(value, tuple(table.names()) if table is not None else ())
    return BootWipe(labels)


def wipe_at_boot(
    value: str | None,
    found: tuple[str, PartitionTable] | None,
    say: Callable[[str], None],
) -> BootWipe | None:
    """Carry out ``talos.experimental.wipe=<value>`` on the installed disk ``found`` (its device
    and GPT, None without one); the wipe done (its ``reboot`` says whether to reboot now), None
    when there was nothing to do."""
    from ichor.installer import reset_partitions

    plan = plan_boot_wipe(value, found[1] if found is not None else None)
    if plan is None:
        return None
    if plan.labels is None:
        say("resetting system disks")
        if found is not None:
            try:
                with open_device(found[0], write=True) as fd:
                    fast_wipe(fd)
            except Exception:
                say("resetting system disks failed")
                raise
        say("finished resetting system disks")
        return plan
    assert found is not None  # plan_boot_wipe refused labels without a disk
    disk, table = found
    targets = " ".join(f'{_partition(disk, table, label)} ("{label}")' for label in plan.labels)
    say(f"resetting system disks [{targets}]")
    try:
        reset_partitions(Path(disk), plan.labels, printf=say)
        if (
            Label.STATE in plan.labels
            and Label.META not in plan.labels
            and _drop_encryption_tag(disk, table, say)
        ):
            say("reset the state encryption META config tag")
        say("successfully reset system disk by the spec")
    except Exception:
        say(f"resetting system disks [{targets}] failed")
        raise
    say(f"finished resetting system disks [{targets}]")
    return plan


def _partition(disk: str, table: PartitionTable, label: str) -> str:
    part = table.by_name(label)
    return partition_path(disk, part.number) if part is not None else disk


def _drop_encryption_tag(disk: str, table: PartitionTable, say: Callable[[str], None]) -> bool:
    """Delete META's StateEncryptionConfig tag; whether it was there."""
    part = table.by_name(Label.META)
    if part is None:
        return False
    if Path(disk).is_block_device():
        meta = Meta.open(partition_path(disk, part.number), printer=say)
    else:  # a disk image (tests, image builds): META at its offset
        ss = table.sector_size
        meta = Meta.open(disk, printer=say, offset=part.offset(ss), size=part.size(ss))
    if not meta.delete(MetaKey.StateEncryptionConfig):
        return False
    meta.flush()
    return True
