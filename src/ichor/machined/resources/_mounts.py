"""``MountStatuses`` (namespace ``runtime``, alias ``mounts``, id = the partition label): the system
partitions the node has mounted, as Talos records each one it mounts (``STATE``, ``EPHEMERAL``).

Filled from the node's own mount table (``/proc/self/mounts`` of its mount namespace): a partition
whose directory is not a mount point there is not listed, as Talos lists only what it mounted (a
process node, whose partitions are plain directories of the host, has none). Types only;
``controllers.mounts`` fills it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = ["MOUNT_STATUSES", "MOUNT_TYPES", "MountStatusSpec"]


@dataclasses.dataclass(frozen=True)
class MountStatusSpec:
    source: str = ""
    target: str = ""
    filesystem_type: str = ""
    options: tuple[str, ...] = ()
    encrypted: bool = False
    encryption_providers: tuple[str, ...] = dataclasses.field(default=(), metadata={"omitempty": True})


MOUNT_STATUSES: ResourceType[MountStatusSpec] = ResourceType(
    type="MountStatuses.runtime.talos.dev", default_namespace="runtime", spec_class=MountStatusSpec,
    aliases=("mounts",),
    print_columns=(PrintColumn("Source", "{.source}"), PrintColumn("Target", "{.target}"),
                   PrintColumn("Filesystem Type", "{.filesystemType}")),
)  # fmt: skip

MOUNT_TYPES: tuple[ResourceType[Any], ...] = (MOUNT_STATUSES,)
