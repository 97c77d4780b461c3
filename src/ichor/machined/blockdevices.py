"""The machine's disks as ``talosctl disks`` lists them, read from ``/sys/block`` (metal platform).

As Talos's disk listing does: every whole disk the kernel has, less loop, ram, zram and
device-mapper devices; size from ``size`` (512-byte sectors), model, serial, WWID and modalias
from the device, type from its name (``nvme*`` NVME, ``mmcblk*`` SD) or ``queue/rotational``.
Reads only; the path is a parameter so tests run on a fake tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BlockDevice", "list_disks"]

_SKIP = ("loop", "ram", "zram", "dm-")


@dataclass(frozen=True)
class BlockDevice:
    name: str
    """Kernel name (``vda``); the device is ``/dev/<name>``."""
    size: int
    model: str = ""
    label: str = ""
    """The device's own name (``device/name``: SD cards and eMMC have one), Talos's NAME column."""
    serial: str = ""
    wwid: str = ""
    modalias: str = ""
    type: str = "UNKNOWN"
    """Talos's DiskType name: UNKNOWN, SSD, HDD, NVME, SD."""
    bus_path: str = ""
    subsystem: str = ""
    readonly: bool = False

    @property
    def device_name(self) -> str:
        return f"/dev/{self.name}"


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def list_disks(sys_block: Path = Path("/sys/block")) -> list[BlockDevice]:
    disks = []
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return []
    for name in names:
        if name.startswith(_SKIP):
            continue
        entry = sys_block / name
        device = entry / "device"
        size = int(_read(entry / "size") or 0) * 512
        if name.startswith("nvme"):
            kind = "NVME"
        elif name.startswith("mmcblk"):
            kind = "SD"
        elif _read(entry / "queue/rotational") == "1":
            kind = "HDD"
        else:
            kind = "SSD"
        real = os.path.realpath(device) if device.exists() else ""
        disks.append(
            BlockDevice(
                name=name,
                size=size,
                model=_read(device / "model"),
                label=_read(device / "name"),
                serial=_read(device / "serial") or _read(entry / "serial"),
                wwid=_read(device / "wwid") or _read(entry / "wwid"),
                modalias=_read(device / "modalias"),
                type=kind,
                bus_path=real.removeprefix("/sys/devices") if real.startswith("/sys/devices") else "",
                subsystem=os.path.realpath(entry / "subsystem") if (entry / "subsystem").exists() else "",
                readonly=_read(entry / "ro") == "1",
            )
        )
    return disks
