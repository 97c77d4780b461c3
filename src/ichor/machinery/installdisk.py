"""Which disk ``machine.install`` means, as Talos 1.7 decides it, and when wiping it is allowed.

``machine.install.disk`` names a device that must exist (Talos's ``specified install disk does not
exist: "/dev/sda"``); ``machine.install.diskSelector`` matches the node's disks (go-blockdevice's
matchers: ``*`` globs on model, name, serial, modalias, uuid, wwid and bus path, an exact type, a
size condition like ``>= 4GB``). Beyond Talos (issue 22, talos#12370): a selector must match exactly
one disk, every refusal lists the disks seen, and a disk that already holds partitions is wiped
only with ``machine.install.wipe: true`` or when it is the disk the node booted from.

``machine.install.extensions`` (deprecated in Talos 1.7, whose installer still pulls each image and
installs it as an extension of the slot it writes) is refused at install and upgrade, naming the key
and its images (:func:`refuse_install_extensions`): Ichor's images carry their extensions from the
imager (``--system-extension-image``), and an upgrade brings the new image's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ichor.machinery.blockdev import Disk, DiskType, PartitionTable
from ichor.machinery.errors import InstallError

__all__ = [
    "DiskSelector",
    "InstallDiskSelector",
    "InstallTarget",
    "check_wipe",
    "glob_match",
    "parse_size_condition",
    "refuse_install_extensions",
    "select_install_disk",
]


class InstallDiskSelector(Protocol):
    """``machine.install.diskSelector``: the config model or a :class:`DiskSelector`."""

    @property
    def size(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def serial(self) -> str | None: ...
    @property
    def modalias(self) -> str | None: ...
    @property
    def uuid(self) -> str | None: ...
    @property
    def wwid(self) -> str | None: ...
    @property
    def type(self) -> str | None: ...
    @property
    def bus_path(self) -> str | None: ...


@dataclass(frozen=True)
class DiskSelector:
    size: str | None = None
    name: str | None = None
    model: str | None = None
    serial: str | None = None
    modalias: str | None = None
    uuid: str | None = None
    wwid: str | None = None
    type: str | None = None
    bus_path: str | None = None


_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "ki": 2**10, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mi": 2**20, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gi": 2**30, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "ti": 2**40, "tib": 2**40,
    "p": 10**15, "pb": 10**15, "pi": 2**50, "pib": 2**50,
}  # fmt: skip
_CONDITION = re.compile(r"(>=|<=|>|<|==)?\s*(.*)$")
_BYTES = re.compile(r"^([0-9][0-9,]*(?:\.[0-9]*)?)\s*([a-zA-Z]*)$")


def parse_size_condition(text: str) -> tuple[str, int]:
    """``>= 4GB`` -> (">=", 4000000000): Talos's ``InstallDiskSizeMatcher`` with go-humanize units."""
    match = _CONDITION.match(text.strip())
    assert match is not None  # the pattern matches any text
    op, size = match.group(1) or "", match.group(2).strip()
    number = _BYTES.match(size)
    unit = number.group(2).lower() if number else ""
    if number is None or unit not in _UNITS:
        raise InstallError(f"failed to parse disk size {size}", hint="a size is like 4GB, 512GiB, >= 1TB")
    return op, int(float(number.group(1).replace(",", "")) * _UNITS[unit])


def glob_match(pattern: str, text: str) -> bool:
    """go-glob's match: ``*`` is any run of characters; there is no other wildcard."""
    if pattern == "*":
        return True
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == text
    if not text.startswith(parts[0]) or not text.endswith(parts[-1]):
        return False
    pos = len(parts[0])
    end = len(text) - len(parts[-1])
    for part in parts[1:-1]:
        found = text.find(part, pos, end)
        if found < 0:
            return False
        pos = found + len(part)
    return pos <= end


def _size_matches(condition: str, size: int) -> bool:
    op, wanted = parse_size_condition(condition)
    return {
        ">=": size >= wanted,
        "<=": size <= wanted,
        ">": size > wanted,
        "<": size < wanted,
        "": size == wanted,
        "==": size == wanted,
    }[op]


def _criteria(selector: InstallDiskSelector) -> list[str]:
    fields = ("size", "uuid", "wwid", "model", "name", "serial", "modalias", "type", "bus_path")
    return [f"{f}: {getattr(selector, f)!r}" for f in fields if getattr(selector, f)]


def _matches(selector: InstallDiskSelector, disk: Disk) -> bool:
    globs = {
        "uuid": disk.uuid, "wwid": disk.wwid, "model": disk.model, "name": disk.name,
        "serial": disk.serial, "modalias": disk.modalias, "bus_path": disk.bus_path,
    }  # fmt: skip
    if selector.size and not _size_matches(selector.size, disk.size):
        return False
    if selector.type and disk.type != DiskType(selector.type):
        return False
    return all(
        glob_match(str(getattr(selector, f)), value) for f, value in globs.items() if getattr(selector, f)
    )


def _seen(disks: Sequence[Disk]) -> str:
    rows = [
        f"{d.device_name} ({d.size} bytes, model {d.model or '-'}, serial {d.serial or '-'}, {d.type})"
        for d in disks
    ]
    return "disks on this node: " + ("; ".join(rows) if rows else "none")


@dataclass(frozen=True)
class InstallTarget:
    """The disk to install to and why (``apply-config --dry-run`` prints ``reason``)."""

    disk: Disk
    reason: str


def select_install_disk(
    disk: str | None, selector: InstallDiskSelector | None, disks: Sequence[Disk]
) -> InstallTarget:
    """The install disk from ``machine.install.disk``/``diskSelector`` among ``disks``."""
    if selector is not None and _criteria(selector):
        matched = [d for d in disks if _matches(selector, d)]
        criteria = ", ".join(_criteria(selector))
        if not matched:
            raise InstallError(
                "no disk found matching provided parameters", hint=f"diskSelector {criteria}; {_seen(disks)}"
            )
        if len(matched) > 1:
            raise InstallError(
                f"diskSelector matches {len(matched)} disks: {', '.join(d.device_name for d in matched)}",
                hint=f"narrow machine.install.diskSelector ({criteria}); {_seen(disks)}",
            )
        return InstallTarget(
            matched[0], f"machine.install.diskSelector ({criteria}) matches only {matched[0].device_name}"
        )
    if not disk:
        raise InstallError("either install disk or diskSelector should be defined")
    found = next((d for d in disks if d.device_name == disk), None)
    if found is None:
        raise InstallError(f'specified install disk does not exist: "{disk}"', hint=_seen(disks))
    return InstallTarget(found, f"machine.install.disk is {disk}")


def check_wipe(target: Disk, table: PartitionTable | None, *, wipe: bool, booted_from: str | None) -> None:
    """Refuse to install over a disk that holds partitions, unless asked to or it is our own boot disk."""
    if table is None or not table.partitions or wipe or target.device_name == booted_from:
        return
    raise InstallError(
        f"refusing to install to {target.device_name}: it holds partitions {', '.join(table.names())}",
        hint="set machine.install.wipe: true to erase it, or pick another disk",
    )


INSTALL_EXTENSIONS_HINT = (
    "remove machine.install.extensions and build the extensions into the installer image: "
    "python -m ichor.imager installer --system-extension-image <image> (then install or upgrade with it)"
)


def refuse_install_extensions(images: Iterable[str | None] | None, *, step: str) -> None:
    """``machine.install.extensions`` at ``step`` (install, upgrade): refused, naming the key and its
    images (nothing is pulled); a config without it passes."""
    listed = [image or "(no image)" for image in images or []]
    if listed:
        raise InstallError(
            f"machine.install.extensions is not supported at {step}: Ichor does not pull system extensions "
            f"into the slot it writes ({', '.join(listed)})",
            hint=INSTALL_EXTENSIONS_HINT,
        )
