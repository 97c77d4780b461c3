"""``storage.StorageService/Disks`` for a process node: the disk holding the node's root.

A process node has no block devices of its own; its STATE and EPHEMERAL live on whatever
filesystem holds its root directory, so that device is reported as the system disk (with the
filesystem's size). Nothing else is listed, so ``talosctl disks`` never suggests a disk to wipe.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpclib.server import Stream

from ichor.api.gen.storage import storage_grpc, storage_pb2
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
