"""``talosctl bootstrap [--recover-from FILE] [--recover-skip-hash-check]``.

Bootstrap tells one control plane node to form the etcd cluster. With ``--recover-from`` the
snapshot is checked locally (etcdutl reads its hash, revision and keys), uploaded over the
``EtcdRecover`` client stream in 4 KiB chunks, then ``Bootstrap`` is called with ``recover_etcd``.
A gzip-compressed snapshot (a scheduled backup with ``compress: true``, ``*.db.gz``; Ichor's own)
is decompressed into a temporary file first, so the node receives the snapshot itself.
This module does not decide anything on the node; the node refuses what it cannot do.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import replies, run

CHUNK = 4096
GZIP_MAGIC = b"\x1f\x8b"


def _decompressed(snapshot: Path, stack: contextlib.ExitStack) -> Path:
    """The snapshot itself: ``snapshot``, or its gzip content in a temporary file (removed on exit)."""
    from ichor.machinery.errors import MachineryError

    with snapshot.open("rb") as f:
        if f.read(2) != GZIP_MAGIC:
            return snapshot
    target = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ichor-recover-"))) / "db"
    try:
        with gzip.open(snapshot, "rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, EOFError) as exc:
        raise MachineryError(
            f"error decompressing snapshot {str(snapshot)!r}: {exc}",
            hint="the .db.gz file is damaged or cut short: copy the backup again (talosctl cp)",
        ) from None
    return target


_BOOTSTRAP_HINTS = {
    "AlreadyExists": "etcd on this node already has data: the cluster is bootstrapped already (bootstrap "
    "runs once per cluster); to recover from a snapshot, reset the node's EPHEMERAL partition first",
    "FailedPrecondition": "run bootstrap against a control plane node whose services are up "
    "(`talosctl service etcd` shows Preparing when it is ready to bootstrap)",
}

HELP = """Bootstrap the etcd cluster on the specified node.

When Talos cluster is created etcd service on control plane nodes enter the join loop waiting
to join etcd peers from other control plane nodes. One node should be picked as the bootstrap node.
When bootstrap command is issued, the node aborts join process and bootstraps etcd cluster as a single node cluster.
Other control plane nodes will join etcd cluster once Kubernetes is bootstrapped on the bootstrap node.

This command should not be used when "init" type node are used.

Talos etcd cluster can be recovered from a known snapshot with '--recover-from=' flag."""


@click.command("bootstrap", cls=CobraCommand, help=HELP)
@click.option("--recover-from", "recover_from", default="", help="recover etcd cluster from the snapshot")
@click.option(
    "--recover-skip-hash-check",
    "skip_hash_check",
    is_flag=True,
    default=False,
    help="skip integrity check when recovering etcd (use when recovering from data directory copy)",
)
def bootstrap(recover_from: str, skip_hash_check: bool) -> None:
    from ichor.cli._etcd import snapshot_info_line, snapshot_status
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.goquote import quote

    if skip_hash_check and not recover_from:
        raise click.UsageError("--recover-skip-hash-check only applies with --recover-from")
    snapshot = Path(recover_from) if recover_from else None
    if snapshot is not None and not snapshot.is_file():
        raise MachineryError(
            f"error opening snapshot file: open {recover_from}: no such file",
            hint="pass the file written by `talosctl etcd snapshot <path>` to --recover-from",
        )
    with contextlib.ExitStack() as stack:
        if snapshot is not None:
            snapshot = _decompressed(snapshot, stack)
            info = snapshot_status(snapshot)
            click.echo(f"recovering from snapshot {quote(recover_from)}: {snapshot_info_line(info)}")
        _bootstrap(snapshot, skip_hash_check)


def _bootstrap(snapshot: Path | None, skip_hash_check: bool) -> None:
    from ichor.api.gen.common import common_pb2
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import ClientError, RPCError

    async def work(client: Any) -> None:
        client.require_single_node("bootstrap")
        if snapshot is not None:
            try:
                async with client.machine.EtcdRecover.open() as call:
                    with snapshot.open("rb") as handle:
                        while chunk := handle.read(CHUNK):
                            await call.send_message(common_pb2.Data(bytes=chunk))
                    await call.end()
                    reply = await call.recv_message()
                if reply is not None:
                    replies(client, reply, "error uploading snapshot")
            except RPCError as err:
                raise ClientError(
                    f"error uploading snapshot: {err}",
                    hint=err.hint or "the node accepts a snapshot only while etcd waits to be bootstrapped",
                ) from None
        try:
            response = await client.machine.Bootstrap(
                machine_pb2.BootstrapRequest(
                    recover_etcd=snapshot is not None, recover_skip_hash_check=skip_hash_check
                )
            )
        except RPCError as err:
            raise ClientError(
                f"error executing bootstrap: {err}", hint=_BOOTSTRAP_HINTS.get(err.code_name or "", err.hint)
            ) from None
        replies(client, response, "error executing bootstrap")

    run(work)
