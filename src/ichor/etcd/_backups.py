"""The files of scheduled etcd backups: their names, listing them, taking one, and retention.

A backup is ``etcd-snapshot-<node>-<UTC slot time>-r<revision>.db`` (``.db.gz`` when compressed) in
the backup directory. Only names of exactly that shape are ever listed or deleted, so nothing else
in the directory is touched. Taking one writes ``.incoming-*`` (hidden, never listed) through the
caller's ``save`` (which verifies the snapshot's SHA-256 trailer and reads it with etcdutl), then
renames it into place; a compressed one is re-read and its SHA-256 compared with the verified
original before the original goes. Retention runs only after a new backup is in place: a failed
snapshot (a full disk, etcd gone) never deletes an older good one.

Blocking file work: call these from a thread (the controller does).
"""

from __future__ import annotations

__all__ = [
    "BACKUP_PREFIX",
    "BackupFile",
    "SaveSnapshot",
    "backup_name",
    "list_backups",
    "prune_backups",
    "remove_partial",
    "take_backup",
]

import asyncio
import contextlib
import dataclasses
import gzip
import hashlib
import os
import re
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from ichor.etcd._types import SnapshotInfo

BACKUP_PREFIX = "etcd-snapshot-"
_STAMP = "%Y%m%dT%H%M%SZ"
_NAME = re.compile(
    r"^etcd-snapshot-(?P<node>[A-Za-z0-9._-]+)-(?P<taken>\d{8}T\d{6}Z)-r(?P<revision>\d+)\.db(?P<gz>\.gz)?$"
)
_INCOMING = ".incoming-"
_CHUNK = 1 << 20

SaveSnapshot = Callable[[Path], Awaitable[SnapshotInfo]]
"""Write a verified snapshot of etcd to the path (``save_snapshot`` bound to a client)."""


@dataclasses.dataclass(frozen=True)
class BackupFile:
    """One backup file on disk, as its name and size tell."""

    path: Path
    node: str
    taken: datetime
    revision: int
    size: int
    compressed: bool

    @property
    def name(self) -> str:
        return self.path.name


def backup_name(node: str, taken: datetime, revision: int, *, compress: bool) -> str:
    """``etcd-snapshot-<node>-<YYYYmmddTHHMMSSZ>-r<revision>.db[.gz]``."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", node) or "node"
    stamp = taken.astimezone(UTC).strftime(_STAMP)
    return f"{BACKUP_PREFIX}{safe}-{stamp}-r{revision}.db" + (".gz" if compress else "")


def list_backups(directory: Path) -> list[BackupFile]:
    """Every backup in ``directory``, newest first (a missing directory holds none)."""
    found: list[BackupFile] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(OSError):
            found.append(BackupFile(
                path=Path(entry.path), node=match["node"],
                taken=datetime.strptime(match["taken"], _STAMP).replace(tzinfo=UTC),
                revision=int(match["revision"]), size=entry.stat(follow_symlinks=False).st_size,
                compressed=bool(match["gz"]),
            ))  # fmt: skip
    return sorted(found, key=lambda b: (b.taken, b.revision, b.name), reverse=True)


def prune_backups(directory: Path, keep: int) -> list[BackupFile]:
    """Delete all but the newest ``keep`` backups; returns what was deleted."""
    deleted = []
    for old in list_backups(directory)[max(keep, 1) :]:
        with contextlib.suppress(FileNotFoundError):
            old.path.unlink()
            deleted.append(old)
    return deleted


def remove_partial(directory: Path) -> None:
    """Remove what an interrupted backup left (``.incoming-*``)."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if entry.name.startswith(_INCOMING):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _sha256(path: Path, *, gzipped: bool = False) -> bytes:
    digest = hashlib.sha256()
    with gzip.open(path, "rb") if gzipped else path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.digest()


def _compress(source: Path, target: Path) -> None:
    """gzip ``source`` into ``target`` and check the result decompresses to the same bytes."""
    with source.open("rb") as src, gzip.open(target, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, _CHUNK)
    with target.open("rb") as f:
        os.fsync(f.fileno())
    if _sha256(target, gzipped=True) != _sha256(source):
        raise OSError(f"compressed snapshot {target.name} does not read back as the snapshot")


async def take_backup(
    save: SaveSnapshot,
    directory: Path,
    *,
    node: str,
    taken: datetime,
    compress: bool,
    keep: int,
) -> tuple[BackupFile, SnapshotInfo, list[BackupFile]]:
    """Save a verified snapshot as a new backup, then keep the newest ``keep``.

    Returns the new backup, what the snapshot holds, and the backups retention deleted. On any
    failure nothing but the partial file is removed, and that always is.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    await asyncio.to_thread(remove_partial, directory)
    stamp = taken.astimezone(UTC).strftime(_STAMP)
    staging = directory / f"{_INCOMING}{stamp}.db"
    packed = directory / f"{_INCOMING}{stamp}.db.gz"
    try:
        info = await save(staging)
        final = directory / backup_name(node, taken, info.revision, compress=compress)
        if compress:
            await asyncio.to_thread(_compress, staging, packed)
            os.replace(packed, final)
            staging.unlink()
        else:
            os.replace(staging, final)
    finally:
        for leftover in (staging, packed):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    size = final.stat().st_size
    deleted = await asyncio.to_thread(prune_backups, directory, keep)
    backup = BackupFile(
        final, node, taken.astimezone(UTC).replace(microsecond=0), info.revision, size, compress
    )
    return backup, info, deleted
