"""Area ``boot``: the node's boot disk (its slots' grubenv and META) as resources.

* ``runtime.MetaKeyController``: the META keys the boot disk last read (a
  :class:`~ichor.machined.cosi.Source`) -> ``MetaKeys`` ``0x06``... (``talosctl get metakeys``);
* ``runtime.BootSlotController``: the boot state (a Source) and the booted slot -> ``BootSlots``
  ``A`` and ``B`` (Ichor's own: version, good/trial/failed/installed/empty, tries left, booted).

A node without a boot disk never sets either Source, so it has none of these resources. Neither
controller reads a disk: the boot disk's owner (``machined/upgrade.py``) refreshes the Sources after
every change it makes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ichor.machined.cosi import Controller, ControllerContext, Output, Source
from ichor.machined.resources import BOOT_SLOTS, META_KEYS, BootSlotSpec, MetaKeySpec
from ichor.machinery.bootloader import BootState, Slot, SlotStatus
from ichor.machinery.meta import key_id

__all__ = ["BootSlotController", "MetaKeyController", "slot_specs"]


def slot_specs(state: BootState, booted: Slot | None) -> dict[str, BootSlotSpec]:
    """One spec per slot for ``state`` (the grubenv) on a node that booted ``booted``."""
    failed_slot, _, rest = state.failed.partition(":")
    out = {}
    for row in state.rows():
        failure = (
            rest.partition(":")[2] if row.status is SlotStatus.FAILED and failed_slot == row.slot else ""
        )
        out[str(row.slot)] = BootSlotSpec(version=row.version, state=str(row.status), tries=row.tries,
                                          booted=row.slot == booted, failure=failure)  # fmt: skip
    return out


class MetaKeyController(Controller):
    name = "runtime.MetaKeyController"
    reads = "(the boot disk's META)"
    outputs = (Output(META_KEYS),)

    def __init__(self, keys: Source[Mapping[int, bytes]]) -> None:
        self._keys = keys

    async def run(self, ctx: ControllerContext) -> None:
        with self._keys.listen(ctx.wake):
            while True:
                await ctx.changed()
                touched = set()
                for tag, value in dict(self._keys.value).items():
                    ctx.modify(META_KEYS, key_id(tag), MetaKeySpec(value.decode(errors="replace")))
                    touched.add(key_id(tag))
                ctx.clean_up_outputs(META_KEYS, touched)


class BootSlotController(Controller):
    name = "runtime.BootSlotController"
    reads = "(the boot disk's grubenv)"
    outputs = (Output(BOOT_SLOTS),)

    def __init__(self, slots: Source[BootState | None], booted: Slot | None) -> None:
        self._slots = slots
        self._booted = booted

    async def run(self, ctx: ControllerContext) -> None:
        with self._slots.listen(ctx.wake):
            while True:
                await ctx.changed()
                state = self._slots.value
                specs = slot_specs(state, self._booted) if state is not None else {}
                for slot, spec in specs.items():
                    ctx.modify(BOOT_SLOTS, slot, spec)
                ctx.clean_up_outputs(BOOT_SLOTS, set(specs))
