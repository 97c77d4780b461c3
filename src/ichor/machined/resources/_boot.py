"""The boot disk's state as resources: Talos's ``MetaKeys`` and Ichor's ``BootSlots`` (namespace ``runtime``).

* ``MetaKeys.runtime.talos.dev``: one per META key, id ``0x06`` (Talos's form), spec ``value``;
  what ``talosctl get metakeys`` lists.
* ``BootSlots.runtime.ichor.dev`` (Ichor's own; Talos 1.7 has no boot counting): one per slot,
  ``A`` and ``B``, with the version it holds, its state (good, trial, failed, installed, empty)
  and the boots a trial has left; whether it is the slot the node booted.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = ["BOOT_SLOTS", "BOOT_TYPES", "META_KEYS", "BootSlotSpec", "MetaKeySpec"]

_RUNTIME = "runtime"


@dataclasses.dataclass(frozen=True)
class MetaKeySpec:
    value: str = ""


@dataclasses.dataclass(frozen=True)
class BootSlotSpec:
    version: str = ""
    state: str = "empty"
    tries: int = 0
    booted: bool = False
    failure: str = dataclasses.field(default="", metadata={"omitempty": True})
    """Why the slot's last trial failed (GRUB's counting or a missed health deadline)."""


META_KEYS: ResourceType[MetaKeySpec] = ResourceType(
    type="MetaKeys.runtime.talos.dev",
    default_namespace=_RUNTIME,
    spec_class=MetaKeySpec,
    aliases=("meta",),
    print_columns=(PrintColumn("Value", "{.value}"),),
)

BOOT_SLOTS: ResourceType[BootSlotSpec] = ResourceType(
    type="BootSlots.runtime.ichor.dev",
    default_namespace=_RUNTIME,
    spec_class=BootSlotSpec,
    print_columns=(
        PrintColumn("Version", "{.version}"),
        PrintColumn("State", "{.state}"),
        PrintColumn("Tries", "{.tries}"),
        PrintColumn("Booted", "{.booted}"),
    ),
)

BOOT_TYPES = (META_KEYS, BOOT_SLOTS)
