"""Block devices from ``/sys/block``, as ``talosctl disks`` lists them (go-blockdevice's ``disk.List``).

Skips sg*, sr*, loop*, md*, dm-* and ram* devices and any of size 0. Type is nvme/sd by name, else
hdd/ssd by ``queue/rotational``.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Disk", "DiskType", "get_disk", "list_disks"]

_SKIP = ("sg", "sr", "loop", "md", "dm-", "ram")


class DiskType(enum.StrEnum):
    """Talos's disk types (``storage.Disk.DiskType`` without the UNKNOWN/SSD/... casing)."""

    UNKNOWN = "unknown"
    SSD = "ssd"
    HDD = "hdd"
    NVME = "nvme"
    SD = "sd"


@dataclass(frozen=True)
class Disk:
    """One disk: what ``talosctl disks`` prints per row."""

    device_name: str
    size: int
    model: str = ""
    name: str = ""
    serial: str = ""
    modalias: str = ""
    wwid: str = ""
    uuid: str = ""
    type: DiskType = DiskType.UNKNOWN
    bus_path: str = ""
    subsystem: str = ""
    read_only: bool = False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def get_disk(dev: str, sysblock: str | os.PathLike[str] = "/sys/block") -> Disk:
    """The facts of one device (``sda`` or ``/dev/sda``); missing files read as empty."""
    dev = os.path.basename(dev)
    base = Path(sysblock) / dev
    try:
        link = os.readlink(base)
    except OSError:
        link = ""
    bus_path = link.removeprefix("../devices")
    bus_path = bus_path.removesuffix(os.path.join("block", dev))
    try:
        size = int(_read(base / "size") or "0") * 512
    except ValueError:
        size = 0
    rotational = _read(base / "queue/rotational")
    if "nvme" in dev:
        kind = DiskType.NVME
    elif "mmc" in dev:
        kind = DiskType.SD
    elif rotational == "1":
        kind = DiskType.HDD
    elif rotational == "0":
        kind = DiskType.SSD
    else:
        kind = DiskType.UNKNOWN
    subsystem = base / "subsystem"
    return Disk(
        device_name=f"/dev/{dev}",
        size=size,
        model=_read(base / "device/model"),
        name=_read(base / "device/name"),
        serial=_read(base / "serial") or _read(base / "device/serial"),
        modalias=_read(base / "device/modalias"),
        wwid=_read(base / "wwid") or _read(base / "device/wwid"),
        uuid=_read(base / "uuid") or _read(base / "device/uuid"),
        type=kind,
        bus_path=bus_path,
        subsystem=os.path.realpath(subsystem) if subsystem.exists() else "",
        read_only=_read(base / "ro") == "1",
    )


def list_disks(sysblock: str | os.PathLike[str] = "/sys/block") -> list[Disk]:
    """Every disk Talos would list, sorted by device name."""
    try:
        names = sorted(os.listdir(sysblock))
    except OSError:
        return []
    disks = [get_disk(n, sysblock) for n in names if not n.startswith(_SKIP)]
    return [d for d in disks if d.size > 0]
