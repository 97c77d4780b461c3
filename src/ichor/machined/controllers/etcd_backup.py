"""Area ``etcd``, scheduled backups (beyond Talos): the ``EtcdBackupConfig`` document -> snapshots.

* ``etcd.BackupConfigController``: MachineConfig + MachineType -> EtcdBackupConfig ``etcd`` (control
  planes whose config has an ``EtcdBackupConfig`` document; its defaults filled in);
* ``etcd.BackupController``: EtcdBackupConfig + the etcd service + EtcdSpec -> EtcdBackupStatus
  ``etcd``, and the snapshot files under ``path``.

At each slot of the schedule (UTC; ``@every`` slots aligned to the epoch, so every node computes the
same ones) every control plane wakes. Only the one whose local member is the etcd leader goes on,
and it first claims the slot in etcd itself: :data:`SLOT_KEY` holds ``"<slot unix time> <node>"``
and is written by compare-and-swap on the revision just read, only when it names an older slot.
A leadership change mid-schedule therefore finds the slot claimed (or loses the swap) and takes
nothing: one snapshot per cluster per slot. The claimer saves a snapshot from its own member
(verified: SHA-256 trailer and ``etcdutl snapshot status``), renames it into place, then keeps the
newest ``retention``. A slot that fails after its claim is not retried: the status says why
(``lastFailure``, ``lastFailureReason``) and the next slot tries again.

Must never: delete a backup before a newer one is verified in place, take a snapshot without
holding its slot, or delete a file whose name is not a backup's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Protocol

from ichor import etcd as etcdlib
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ACTIVE_CONFIG_ID,
    ETCD_BACKUP_CONFIGS,
    ETCD_BACKUP_ID,
    ETCD_BACKUP_STATUSES,
    ETCD_ID,
    ETCD_SPECS,
    MACHINE_CONFIGS,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    SERVICES,
    EtcdBackupConfigSpec,
    EtcdBackupSnapshot,
    EtcdBackupStatusSpec,
)
from ichor.machinery import cron
from ichor.machinery.config._ichor_models import EtcdBackupConfigV1Alpha1
from ichor.machinery.errors import CronError

__all__ = [
    "SLOT_KEY",
    "BackupController",
    "BackupStore",
    "BackupStoreFactory",
    "SaveSnapshot",
    "claim_slot",
    "etcd_backup_config_controller",
    "no_store",
]

SLOT_KEY = "ichor:v1:etcd-backup:slot"
"""The last slot a member claimed: ``"<slot unix time> <node>"``."""
ETCD_TIMEOUT = 10.0
SNAPSHOT_TIMEOUT = 300.0


class BackupStore(Protocol):
    """The etcd calls a backup needs (:class:`ichor.etcd.EtcdClient` has them), on the local member."""

    async def status(
        self, endpoint: str | None = None, *, timeout: float | None = None
    ) -> etcdlib.Status: ...
    async def get(self, key: str | bytes, *, timeout: float | None = None) -> etcdlib.RangeResult: ...
    async def put_if_unchanged(
        self, key: str | bytes, value: str | bytes, *, mod_revision: int, timeout: float | None = None
    ) -> bool: ...
    def snapshot(self, *, endpoint: str | None = None, timeout: float = 300.0) -> AsyncIterator[bytes]: ...


BackupStoreFactory = Callable[[], AbstractAsyncContextManager[BackupStore]]
SaveSnapshot = Callable[[BackupStore, Path], Awaitable[etcdlib.SnapshotInfo]]
"""Write a verified snapshot read from the store to the path (default :func:`ichor.etcd.save_snapshot`)."""


@contextlib.asynccontextmanager
async def no_store() -> AsyncIterator[BackupStore]:
    """The store of a node wired without an etcd client: every slot fails saying so."""
    raise etcdlib.EtcdUnavailableError("this node has no etcd client for backups")
    yield  # pragma: no cover - makes this an async generator


async def _save_snapshot(store: BackupStore, path: Path) -> etcdlib.SnapshotInfo:
    return await etcdlib.save_snapshot(store, path, timeout=SNAPSHOT_TIMEOUT)


def etcd_backup_config_controller() -> TransformController[EtcdBackupConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EtcdBackupConfigSpec]:
        resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if resource is None or machine_type is None:
            raise SkipReconcile
        if not machine_type.spec.is_control_plane:
            return {}
        for doc in resource.spec.parsed:
            model = doc.model
            if isinstance(model, EtcdBackupConfigV1Alpha1):
                try:
                    cron.parse_cron(model.schedule)
                except CronError as err:  # validation refuses it; a wait in case one slipped through
                    raise WaitingFor("EtcdBackupConfig.schedule", str(err)) from None
                return {ETCD_BACKUP_ID: EtcdBackupConfigSpec(
                    schedule=model.schedule, retention=model.retention, path=model.path, compress=model.compress,
                )}  # fmt: skip
        return {}

    return TransformController(
        "etcd.BackupConfigController", inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=ETCD_BACKUP_CONFIGS, map_inputs=derive,
    )  # fmt: skip


async def claim_slot(store: BackupStore, slot: datetime, node: str) -> tuple[bool, str]:
    """Claim ``slot`` for ``node`` unless a member already claimed it (or a later one); returns
    whether this node holds it and the node that does."""
    stamp = int(slot.timestamp())
    for _ in range(2):  # a lost swap: read once more to name the winner
        found = await store.get(SLOT_KEY, timeout=ETCD_TIMEOUT)
        mod_revision = 0
        if found.kvs:
            kv = found.kvs[0]
            mod_revision = kv.mod_revision
            last, _, holder = kv.value.decode(errors="replace").partition(" ")
            if last.isdigit() and int(last) >= stamp:
                return False, holder or "another member"
        value = f"{stamp} {node}"
        if await store.put_if_unchanged(SLOT_KEY, value, mod_revision=mod_revision, timeout=ETCD_TIMEOUT):
            return True, node
    return False, "another member"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"writing the snapshot: {exc.strerror}{where}"
    return str(exc) or type(exc).__name__


class BackupController(Controller):
    """Takes the scheduled snapshots and publishes how they go (see the module docstring)."""

    name = "etcd.BackupController"
    inputs = (
        Input(ETCD_BACKUP_CONFIGS, id=ETCD_BACKUP_ID),
        Input(SERVICES, id="etcd"),
        Input(ETCD_SPECS, id=ETCD_ID),
    )
    outputs = (Output(ETCD_BACKUP_STATUSES),)
    reads = f"(etcd: the leader, the slot key {SLOT_KEY}, a snapshot)"
    writes = "(the snapshots under EtcdBackupConfig.path in the node)"

    def __init__(
        self, layout: Layout, store: BackupStoreFactory, *, save: SaveSnapshot = _save_snapshot
    ) -> None:
        self._layout = layout
        self._store = store
        self._save = save

    async def run(self, ctx: ControllerContext) -> None:
        spec: EtcdBackupConfigSpec | None = None
        schedule: cron.CronSchedule | None = None
        next_run: datetime | None = None
        status = EtcdBackupStatusSpec()
        while True:
            timeout = None if next_run is None else max(0.0, (next_run - ctx.now()).total_seconds())
            await ctx.changed(timeout=timeout)
            config = ctx.get_or_none(ETCD_BACKUP_CONFIGS, ETCD_BACKUP_ID)
            if config is None:
                spec = schedule = next_run = None
                ctx.clean_up_outputs(ETCD_BACKUP_STATUSES, set())
                continue
            if config.spec != spec:
                spec = config.spec
                schedule = cron.parse_cron(spec.schedule)  # checked by BackupConfigController
                next_run = schedule.next_after(ctx.now())
            assert schedule is not None and next_run is not None
            directory = self._layout.path(spec.path)
            if ctx.now() >= next_run:
                slot = next_run
                status = await self._run_slot(ctx, spec, slot, directory, status)
                next_run = schedule.next_after(max(ctx.now(), slot))
            held = await asyncio.to_thread(etcdlib.list_backups, directory)
            status = dataclasses.replace(
                status, schedule=spec.schedule, next_run=next_run, held=len(held),
                snapshots=tuple(EtcdBackupSnapshot(
                    name=b.name, path=f"{spec.path.rstrip('/')}/{b.name}", taken=b.taken, revision=b.revision, size=b.size,
                ) for b in held),
            )  # fmt: skip
            ctx.modify(ETCD_BACKUP_STATUSES, ETCD_BACKUP_ID, status)

    async def _run_slot(
        self, ctx: ControllerContext, spec: EtcdBackupConfigSpec, slot: datetime, directory: Path,
        status: EtcdBackupStatusSpec,
    ) -> EtcdBackupStatusSpec:  # fmt: skip
        ran = dataclasses.replace(status, last_run=slot)
        etcd = ctx.get_or_none(SERVICES, "etcd")
        member = ctx.get_or_none(ETCD_SPECS, ETCD_ID)
        if etcd is None or not etcd.spec.healthy or member is None:
            return dataclasses.replace(
                ran, last_run_result="skipped: etcd is not running and healthy on this node"
            )
        node = member.spec.name
        claimed = False
        try:
            async with self._store() as store:
                st = await store.status(timeout=ETCD_TIMEOUT)
                if st.member_id != st.leader:
                    return dataclasses.replace(
                        ran, last_run_result="skipped: this member is not the etcd leader"
                    )
                claimed, holder = await claim_slot(store, slot, node)
                if not claimed:
                    return dataclasses.replace(ran, last_run_result=f"skipped: {holder} took this slot")
                backup, info, deleted = await etcdlib.take_backup(
                    lambda path: self._save(store, path), directory, node=node, taken=slot,
                    compress=spec.compress, keep=spec.retention,
                )  # fmt: skip
        except (etcdlib.EtcdError, OSError) as exc:
            reason = _reason(exc)
            what = "snapshot failed" if claimed else "cannot ask etcd for the slot"
            ctx.logger.warning("etcd backup failed", slot=slot.isoformat(), error=reason)
            return dataclasses.replace(
                ran, last_run_result=f"failed: {reason}", last_failure=ctx.now(),
                last_failure_reason=f"{what}: {reason}",
            )  # fmt: skip
        ctx.logger.info(
            "etcd backup taken", snapshot=backup.name, revision=info.revision, size=backup.size,
            deleted=",".join(b.name for b in deleted),
        )  # fmt: skip
        return dataclasses.replace(
            ran, last_run_result=f"snapshot taken: {backup.name} (revision {info.revision}, {backup.size} bytes)",
            last_success=ctx.now(), last_snapshot=f"{spec.path.rstrip('/')}/{backup.name}",
        )  # fmt: skip
