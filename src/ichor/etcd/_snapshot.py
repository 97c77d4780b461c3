"""Saving, inspecting and restoring etcd snapshots (what ``talosctl etcd snapshot`` and bootstrap
``--recover-from`` need).

A snapshot is etcd's bbolt database followed by a 32-byte SHA-256 of it (etcd appends the trailer
to the ``Maintenance.Snapshot`` stream; bbolt files are a multiple of 512 bytes, so a file of
``512*n + 32`` bytes carries the trailer). A copy of ``member/snap/db`` has no trailer and can only
be restored with ``skip_hash_check``. Anything else is truncated or damaged and is refused before
etcdutl sees it.

Writes are atomic: a snapshot streams into a temporary file that is renamed into place once its
hash checks out, and a restore runs ``etcdutl`` into a temporary directory beside the data
directory and renames it only when it succeeded, so a failure never leaves a half-written file or
data directory. Every process runs through :mod:`ichor.machinery.proc`.
"""

from __future__ import annotations

__all__ = ["SnapshotStream", "restore_snapshot", "save_snapshot", "snapshot_info", "verify_snapshot"]

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from ichor.etcd._binaries import EtcdBinaries, find_binaries
from ichor.etcd._errors import EtcdSnapshotError
from ichor.etcd._types import SnapshotInfo
from ichor.machinery import proc
from ichor.machinery.errors import ProcessError


class SnapshotStream(Protocol):
    """What a snapshot is read from: :meth:`ichor.etcd.EtcdClient.snapshot`."""

    def snapshot(self, *, endpoint: str | None = None, timeout: float = 300.0) -> AsyncIterator[bytes]: ...


_HASH_SIZE = hashlib.sha256().digest_size
_PAGE = 512
_CHUNK = 1 << 20


def verify_snapshot(path: Path, *, skip_hash_check: bool = False) -> bool:
    """Check a snapshot file's shape and SHA-256 trailer; True when it has a trailer.

    Raises :class:`EtcdSnapshotError` for a missing, truncated or damaged file, and for a file
    without a trailer unless ``skip_hash_check``.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise EtcdSnapshotError(
            f"snapshot file {str(path)!r} does not exist", hint="give the path of a saved etcd snapshot"
        ) from None
    except OSError as exc:
        raise EtcdSnapshotError(f"cannot read snapshot {str(path)!r}: {exc.strerror}") from None
    remainder = size % _PAGE
    if size < _PAGE or remainder not in (0, _HASH_SIZE):
        raise EtcdSnapshotError(
            f"snapshot {str(path)!r} is truncated or damaged ({size} bytes is not an etcd database)",
            hint="take the snapshot again (talosctl etcd snapshot) and check the copy is complete",
        )
    if remainder == 0:
        if not skip_hash_check:
            raise EtcdSnapshotError(
                f"snapshot {str(path)!r} has no integrity hash (a copy of an etcd data directory?)",
                hint="restore it with the skip-hash-check option if it was copied from member/snap/db",
            )
        return False
    if skip_hash_check:
        return True
    digest = hashlib.sha256()
    with path.open("rb") as f:
        remaining = size - _HASH_SIZE
        while remaining:
            chunk = f.read(min(_CHUNK, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
        trailer = f.read(_HASH_SIZE)
    if digest.digest() != trailer:
        raise EtcdSnapshotError(
            f"snapshot {str(path)!r} failed its integrity check (SHA-256 mismatch)",
            hint="the file is damaged: take the snapshot again",
        )
    return True


def _binaries(binaries: EtcdBinaries | None) -> EtcdBinaries:
    return binaries if binaries is not None else find_binaries()


def snapshot_info(path: Path, *, binaries: EtcdBinaries | None = None, timeout: float = 60.0) -> SnapshotInfo:
    """Hash, revision, key count and size of a snapshot (``etcdutl snapshot status -w json``)."""
    verify_snapshot(path, skip_hash_check=True)
    etcdutl = _binaries(binaries).require_etcdutl()
    try:
        out = proc.run([str(etcdutl), "snapshot", "status", str(path), "-w", "json"], timeout=timeout).stdout
        data = json.loads(out)
        return SnapshotInfo(
            hash=int(data["hash"]),
            revision=int(data["revision"]),
            total_keys=int(data["totalKey"]),
            total_size=int(data["totalSize"]),
        )
    except ProcessError as exc:
        raise EtcdSnapshotError(
            f"cannot read snapshot {str(path)!r}: {exc.stderr_tail or exc}",
            hint="the file is not a readable etcd snapshot",
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise EtcdSnapshotError(f"unexpected etcdutl snapshot status output: {exc}") from None


async def save_snapshot(
    client: SnapshotStream,
    path: Path,
    *,
    endpoint: str | None = None,
    timeout: float = 300.0,
    binaries: EtcdBinaries | None = None,
) -> SnapshotInfo:
    """Stream a snapshot from etcd into ``path`` (0600, atomically) and return what it holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            async for chunk in client.snapshot(endpoint=endpoint, timeout=timeout):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        if not verify_snapshot(tmp):
            raise EtcdSnapshotError("etcd sent a snapshot without its integrity hash")
        info = snapshot_info(tmp, binaries=binaries)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return info


def restore_snapshot(
    path: Path,
    data_dir: Path,
    *,
    name: str,
    initial_cluster: str,
    initial_advertise_peer_urls: str,
    skip_hash_check: bool = False,
    initial_cluster_token: str | None = None,
    binaries: EtcdBinaries | None = None,
    timeout: float = 300.0,
) -> SnapshotInfo:
    """Restore a snapshot into a new data directory (``data_dir`` must be missing or empty).

    The snapshot is checked first; ``etcdutl snapshot restore`` writes into a temporary directory
    beside ``data_dir`` that replaces it only on success.
    """
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise EtcdSnapshotError(
            f"etcd data directory {str(data_dir)!r} is not empty",
            hint="a snapshot restores only into an empty data directory: reset the node's etcd data first",
        )
    verify_snapshot(path, skip_hash_check=skip_hash_check)
    info = snapshot_info(path, binaries=binaries)
    etcdutl = _binaries(binaries).require_etcdutl()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}.restore-", dir=data_dir.parent))
    try:
        target = staging / "data"
        args = [
            str(etcdutl), "snapshot", "restore", str(path),
            f"--data-dir={target}",
            f"--name={name}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-advertise-peer-urls={initial_advertise_peer_urls}",
        ]  # fmt: skip
        if initial_cluster_token is not None:
            args.append(f"--initial-cluster-token={initial_cluster_token}")
        if skip_hash_check:
            args.append("--skip-hash-check")
        try:
            proc.run(args, timeout=timeout)
        except ProcessError as exc:
            raise EtcdSnapshotError(
                f"restoring snapshot {str(path)!r} failed: {exc.stderr_tail or exc}",
                hint="check the snapshot file and the member name/URLs given to the restore",
            ) from None
        target.chmod(0o700)
        if data_dir.exists():
            data_dir.rmdir()
        os.replace(target, data_dir)
    except OSError as exc:
        raise EtcdSnapshotError(f"cannot restore into {str(data_dir)!r}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return info
