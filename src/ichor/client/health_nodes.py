"""The node stages of ``talosctl health`` between etcd's and Kubernetes' (Talos 1.7's names and order).

1. ``apid to be ready`` - one ``Version`` call through the endpoint with every node in its ``nodes``
   metadata: apid on the endpoint proxies it to every node's apid, and no node answers with an
   error (``all nodes' APIs to be reachable`` before it asks each node alone);
2. ``all nodes memory sizes`` - each node's ``MemTotal`` (``talosctl memory``) is at least Talos's
   minimum for its machine type: a control plane 2 GiB, a worker 1 GiB, each less 150 MiB the
   kernel keeps for itself;
3. ``all nodes disk sizes`` - each node's system disk (``talosctl disks``) is at least 6 GiB.

Nodes whose ``Version`` reports platform mode ``container`` are left out of 2 and 3, as Talos leaves
out its docker nodes: such a node has no memory or disk of its own. Every Ichor node that shares the
host's kernel (process and container nodes) runs in that mode; its Memory API reports the host's
``/proc/meminfo`` and its Disks API reports, as the system disk, the host filesystem that holds the
node's root - shared by every node and the host, so a size check there says nothing about the node.
On such a cluster both stages pass at once, having checked nothing, as Talos's do in docker.
"""

from __future__ import annotations

from typing import Any

from ichor.client.health import NODE_CHECKS, Check, CheckFailed, ClusterInfo, each_node

__all__ = ["DISK_MINIMUM", "MEMORY_MINIMUM", "node_checks"]

_MIB = 1024 * 1024
_GIB = 1024 * _MIB
_KERNEL_RESERVE = 150 * _MIB
MEMORY_MINIMUM = {"controlplane": 2 * _GIB - _KERNEL_RESERVE, "worker": 1 * _GIB - _KERNEL_RESERVE}
"""Talos's minimum memory per machine type (``init`` counts as ``controlplane``), in bytes."""
DISK_MINIMUM = 6 * _GIB
"""Talos's minimum system disk size, in bytes."""
CONTAINER_MODE = "container"


def _gib(size: int) -> str:
    return f"{size / _GIB:.1f} GiB"


def node_checks(client: Any, info: ClusterInfo) -> list[Check]:
    """The stages of :data:`NODE_CHECKS` over ``client``, in order."""
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]

    from ichor.api.gen.storage import storage_pb2
    from ichor.client._replies import node_replies

    control_planes = set(info.control_plane_nodes)
    every = [*info.control_plane_nodes, *info.worker_nodes]

    async def apid_ready() -> None:
        reply = await client.with_nodes(*every).machine.Version(empty_pb2.Empty())
        failed = node_replies(reply).errors
        if failed:
            nodes = ", ".join(e.node or "?" for e in failed)
            raise CheckFailed(
                f"{nodes}: not answering through the endpoint's apid", detail="; ".join(map(str, failed))
            )

    own: dict[str, bool] = {}

    async def own_hardware(node: str) -> bool:
        """Whether ``node`` has memory and disks of its own (not a node sharing the host's kernel);
        asked once per node, the memory and disk stages share the answer."""
        if node not in own:
            reply = await client.with_node(node).machine.Version(empty_pb2.Empty())
            own[node] = not any(m.platform.mode == CONTAINER_MODE for m in reply.messages)
        return own[node]

    async def memory() -> None:
        async def one(node: str) -> None:
            if not await own_hardware(node):
                return
            reply = await client.with_node(node).machine.Memory(empty_pb2.Empty())
            total = max((m.meminfo.memtotal for m in reply.messages), default=0) * 1024
            minimum = MEMORY_MINIMUM["controlplane" if node in control_planes else "worker"]
            if total < minimum:
                raise CheckFailed(
                    f"does not meet memory requirements: expected at least {minimum // _MIB} MiB, "
                    f"actual {total // _MIB} MiB"
                )

        await each_node(every, one)

    async def disks() -> None:
        async def one(node: str) -> None:
            if not await own_hardware(node):
                return
            reply = await client.with_node(node).storage.Disks(empty_pb2.Empty())
            system = [d for m in reply.messages for d in m.disks if d.system_disk]
            if not system:
                raise CheckFailed("no system disk found")
            disk: storage_pb2.Disk = system[0]
            if disk.size < DISK_MINIMUM:
                raise CheckFailed(
                    f"system disk {disk.device_name} is too small: expected at least "
                    f"{_gib(DISK_MINIMUM)}, actual {_gib(disk.size)}"
                )

        await each_node(every, one)

    attempts = [apid_ready, memory, disks]
    return [Check(name, attempt) for name, attempt in zip(NODE_CHECKS, attempts, strict=True)]
