"""Area ``runtime``: ``runtime.MountStatusController``, the node's mount table -> MountStatuses, one per
system partition mounted at its Talos path (``STATE`` at ``/system/state``, ``EPHEMERAL`` at ``/var``).

Talos records each system partition as it mounts it; here the record comes from the mount table of
the node's own mount namespace (``/proc/self/mounts``), re-read every :data:`RESCAN` seconds, so
a partition shows only while it really is a mount point: on a container node the node's disks
bound at those paths, on metal the partitions, on a process node (plain directories) nothing.
``META`` is never listed: Talos reads and writes it raw, never mounts it. It must never mount or
unmount anything.
"""

from __future__ import annotations

from pathlib import Path

from ichor.machined.cosi import Controller, ControllerContext, Output
from ichor.machined.platform import PARTITIONS, Layout
from ichor.machined.resources._mounts import MOUNT_STATUSES, MountStatusSpec

__all__ = ["MOUNTED_PARTITIONS", "RESCAN", "MountStatusController", "mount_statuses"]

RESCAN = 30.0
"""Seconds between two reads of the mount table."""
MOUNTED_PARTITIONS = ("STATE", "EPHEMERAL")
"""The system partitions Talos mounts (and records) on a running node."""


def _unescape(field: str) -> str:
    """A mount table field with its octal escapes (``\\040`` for a space) decoded."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_statuses(table: str, layout: Layout) -> dict[str, MountStatusSpec]:
    """The MountStatuses a mount table gives: the last (topmost) mount at each partition's path."""
    wanted = {str(layout.partition(label)): label for label in MOUNTED_PARTITIONS}
    found: dict[str, MountStatusSpec] = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        source, target, fstype, options = (_unescape(f) for f in fields[:4])
        label = wanted.get(target)
        if label is not None:
            found[label] = MountStatusSpec(
                source=source, target=f"/{PARTITIONS[label]}", filesystem_type=fstype,
                options=tuple(options.split(",")),
            )  # fmt: skip
    return found


class MountStatusController(Controller):
    name = "runtime.MountStatusController"
    reads = "(the node's mount table)"
    outputs = (Output(MOUNT_STATUSES),)

    def __init__(
        self, layout: Layout, *, mount_table: Path = Path("/proc/self/mounts"), rescan: float = RESCAN
    ) -> None:
        self._layout = layout
        self._table = mount_table
        self._rescan = rescan

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed(timeout=self._rescan)
            try:
                statuses = mount_statuses(self._table.read_text(), self._layout)
            except OSError as exc:
                ctx.waiting("mount table", f"cannot read {self._table}: {exc}", retry_after=self._rescan)
                continue
            ctx.clear_waiting()
            for label, spec in statuses.items():
                ctx.modify(MOUNT_STATUSES, label, spec)
            ctx.clean_up_outputs(MOUNT_STATUSES, set(statuses))
