"""``storage.StorageService/Disks``: the machine's disks, or the disk holding a node's root.

On metal (:attr:`~ichor.machined.platform.Layout.block_devices` set) every disk the kernel has
is listed (:mod:`ichor.machined.blockdevices`). A process or container node has no block devices of its own; its STATE and EPHEMERAL live on whatever
filesystem holds its root directory, so that device is reported as the system disk (with the
filesystem's size). Nothing else is listed, so ``talosctl disks`` never suggests a disk to wipe.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpclib.server import Stream

from ichor.api.gen.storage import storage_grpc, storage_pb2
from ichor.machined.blockdevices import list_disks
from ichor.machined.platform import Layout


def _mount_source(path: Path) -> str:
    best, source = "", "rootfs"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return source
    resolved = str(path.resolve())
    for line in lines:
        fields = line.split()
        inside = len(fields) >= 2 and (
            resolved == fields[1] or resolved.startswith(fields[1].rstrip("/") + "/")
        )
        if inside and len(fields[1]) >= len(best):
            best, source = fields[1], fields[0]
    return source


class StorageService(storage_grpc.StorageServiceBase):
    def __init__(self, layout: Layout) -> None:
        self._layout = layout

    async def Disks(self, stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        if self._layout.block_devices is not None:
            disks = [
                storage_pb2.Disk(
                    size=d.size,
                    model=d.model,
                    device_name=d.device_name,
                    name=d.label,
                    serial=d.serial,
                    modalias=d.modalias,
                    wwid=d.wwid,
                    type=storage_pb2.Disk.DiskType.Value(d.type),
                    bus_path=d.bus_path,
                    subsystem=d.subsystem,
                    readonly=d.readonly,
                )
                for d in list_disks(self._layout.block_devices)
            ]
            await stream.send_message(storage_pb2.DisksResponse(messages=[storage_pb2.Disks(disks=disks)]))
            return
        fs = os.statvfs(self._layout.root)
        device = _mount_source(self._layout.root)
        disk = storage_pb2.Disk(
            size=fs.f_blocks * fs.f_frsize,
            model="ichor node root",
            device_name=device,
            name=Path(device).name,
            type=storage_pb2.Disk.UNKNOWN,
            system_disk=True,
            subsystem="",
        )
        await stream.send_message(storage_pb2.DisksResponse(messages=[storage_pb2.Disks(disks=[disk])]))
