"""machined's Reset check (``MachineContext.check_reset``) as Talos 1.7's API answers: wipe-mode and
label combinations, labels the node's partitions lack, user disks it does not have; on a container
node (directories) and on a node booted from a disk (here an image file with Talos's GPT)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from disk_helpers import GIB, sparse
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.partitions import DiskPartitions, SystemPartitions
from ichor.machined.platform import Layout
from ichor.machined.server._context import MachineContext
from ichor.machinery.blockdev import plan, talos_layout, write_disk_table

R = machine_pb2.ResetRequest


def _context(tmp_path: Path, partitions: SystemPartitions | None = None) -> MachineContext:
    nothing: Any = None  # the check asks none of these when the reset is not graceful
    return MachineContext(layout=Layout(tmp_path, "127.0.0.1"), state=nothing, supervisor=nothing, events=nothing,
                          store=nothing, lifecycle=nothing, etcd=nothing, clock=nothing, partitions=partitions)  # fmt: skip


def _refusal(context: MachineContext, **request: Any) -> str:
    with pytest.raises(GRPCError) as refused:
        asyncio.run(context.check_reset(R(graceful=False, **request)))
    assert refused.value.status is Status.UNKNOWN, "Talos's plain errors reach the client as Unknown"
    return str(refused.value.message)


def _labels(*labels: str) -> list[machine_pb2.ResetPartitionSpec]:
    return [machine_pb2.ResetPartitionSpec(label=label, wipe=True) for label in labels]


def test_talos_refusals_on_a_container_node(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    assert _refusal(ctx, mode=R.SYSTEM_DISK, user_disks_to_wipe=["/dev/vdb"]) == (
        "reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter"
    )
    assert _refusal(ctx, mode=R.USER_DISKS, system_partitions_to_wipe=_labels("STATE")) == (
        "reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter"
    )
    assert _refusal(ctx, system_partitions_to_wipe=_labels("DATA")) == 'label "DATA" is not supported'
    assert _refusal(ctx, system_partitions_to_wipe=_labels("BOOT")) == (
        'failed location partition with label "BOOT": partition not found'
    )
    assert (
        _refusal(ctx, user_disks_to_wipe=["/dev/vdb"])
        == "reset user disk failed: device /dev/vdb wasn't found"
    )
    asyncio.run(ctx.check_reset(R(graceful=False, system_partitions_to_wipe=_labels("EPHEMERAL", "STATE"))))
    asyncio.run(ctx.check_reset(R(graceful=False)))


def test_labels_are_checked_against_the_system_disks_gpt(tmp_path: Path) -> None:
    image = sparse(tmp_path / "disk.raw", 2 * GIB)
    write_disk_table(image, plan(2 * GIB, [spec for spec in talos_layout() if spec.label != "EPHEMERAL"]))
    ctx = _context(tmp_path, DiskPartitions(str(image), Layout(tmp_path, "127.0.0.1"), mountpoints={}))
    asyncio.run(
        ctx.check_reset(R(graceful=False, system_partitions_to_wipe=_labels("BOOT", "STATE", "META")))
    )
    assert _refusal(ctx, system_partitions_to_wipe=_labels("STATE", "EPHEMERAL")) == (
        'failed location partition with label "EPHEMERAL": partition not found'
    )
