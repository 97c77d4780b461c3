"""``talosctl usage``, ``time``, ``upgrade``, ``rollback`` and ``meta write|delete``: Talos's flags,
tables and error texts.

``upgrade``, ``rollback`` and ``meta`` are served by a node booted from its own disk (metal:
``upgrade --wait`` follows the node through its reboot until it is back up); nodes in Talos's
``container`` mode (container and process nodes) refuse them as Talos's docker nodes do, shown as
Talos's client shows it (``error executing rollback: 1 error occurred: ... method is not supported
in container mode``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import click

from ichor.cli._lazy import CobraCommand, LazyGroup
from ichor.cli._nodecmd import _empty, node_error, replies, run
from ichor.machinery.constants import TALOS_VERSION

DEFAULT_INSTALLER = f"ghcr.io/siderolabs/installer:v{TALOS_VERSION.removeprefix('v')}"
"""``upgrade --image``'s default, as Talos's client builds it for its own version."""

REBOOT_MODES = {"default": 0, "powercycle": 1}
"""``machine.UpgradeRequest.RebootMode`` by its lower-case name."""


@contextlib.contextmanager
def _failing(what: str) -> Iterator[None]:
    """A whole-call gRPC error as Talos's client words it: ``<what>: rpc error: code = ...``."""
    from ichor.client import ClientError, RPCError

    try:
        yield
    except RPCError as err:
        raise ClientError(f"{what}: {err}", hint=err.hint) from None


def go_time(moment: datetime) -> str:
    """Go's ``time.Time.String()`` of a UTC time: ``2026-01-02 03:04:05.123456 +0000 UTC``."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + " +0000 UTC"


async def _stream(method: Any, request: Any) -> Any:
    async with method.open() as call:
        await call.send_message(request, end=True)
        async for message in call:
            yield message


@click.command("usage", cls=CobraCommand, help="Retrieve a disk usage")
@click.argument("paths", nargs=-1)
@click.option("-H", "--humanize", is_flag=True, help="humanize size and time in the output")
@click.option("-a", "--all", "all_", is_flag=True, help="write counts for all files, not just directories")
@click.option("-t", "--threshold", default=0, type=int,
              help="threshold exclude entries smaller than SIZE if positive, or entries greater than SIZE if negative")  # fmt: skip
@click.option("-d", "--depth", default=0, type=int, help="maximum recursion depth")
def usage(paths: tuple[str, ...], humanize: bool, all_: bool, threshold: int, depth: int) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.cli._etcd import humanize_bytes
    from ichor.client import message_error, render_table

    request = machine_pb2.DiskUsageRequest(recursion_depth=depth + 1, all=all_, threshold=threshold,
                                           paths=list(paths) or ["/"])  # fmt: skip

    async def work(client: Any) -> None:
        rows: list[list[str]] = []
        multiple = False
        with _failing("error streaming results"):
            async for info in _stream(client.machine.DiskUsage, request):
                error = message_error(info, client.peer_host)
                if error is not None:
                    node_error(error)
                    continue
                node = info.metadata.hostname or client.peer_host
                multiple = multiple or bool(info.metadata.hostname)
                if info.error:
                    node_error(f"{node}: {info.error}")
                    continue
                size = humanize_bytes(info.size) if humanize else str(info.size)
                rows.append([node, size, info.relative_name])
        if rows:
            header = ["NODE", "SIZE", "NAME"] if multiple else ["SIZE", "NAME"]
            click.echo(render_table([header, *(r if multiple else r[1:] for r in rows)]), nl=False)

    run(work)


@click.command("time", help="Gets current server time")
@click.option("-c", "--check", "server", default="", help="checks server time against specified ntp server")
def time_(server: str) -> None:
    from ichor.api.gen.timeapi import time_pb2
    from ichor.client import message_error, message_node, render_table

    async def work(client: Any) -> None:
        with _failing("error fetching time"):
            if server:
                response = await client.time.TimeCheck(time_pb2.TimeRequest(server=server))
            else:
                response = await client.time.Time(_empty())
        rows = [["NODE", "NTP-SERVER", "NODE-TIME", "NTP-SERVER-TIME"]]
        errors = []
        for message in response.messages:
            error = message_error(message, client.peer_host)
            if error is not None:
                errors.append(error)
                continue
            local = message.localtime.ToDatetime(tzinfo=UTC)
            remote = message.remotetime.ToDatetime(tzinfo=UTC)
            rows.append(
                [message_node(message, client.peer_host), message.server, go_time(local), go_time(remote)]
            )
        if errors:  # Talos's client warns and still prints the nodes that answered
            from ichor.client import format_errors

            click.echo(f"WARNING: {format_errors(errors)}", err=True, nl=False)
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("upgrade", cls=CobraCommand, help="Upgrade Talos on the target node")
@click.option("-i", "--image", default=DEFAULT_INSTALLER, show_default=True,
              help="the container image to use for performing the install")  # fmt: skip
@click.option("-m", "--reboot-mode", default="default", show_default=True,
              help='select the reboot mode during upgrade. Mode "powercycle" bypasses kexec. '
                   'Valid values are: ["default" "powercycle"].')  # fmt: skip
@click.option("-p", "--preserve", is_flag=True, help="preserve data")
@click.option("-s", "--stage", is_flag=True, help="stage the upgrade to perform it after a reboot")
@click.option("-f", "--force", is_flag=True,
              help="force the upgrade (skip checks on etcd health and members, might lead to data loss)")  # fmt: skip
@click.option("--insecure", is_flag=True,
              help="upgrade using the insecure (encrypted with no auth) maintenance service")  # fmt: skip
@click.option("--wait/--no-wait", default=True,
              help="wait for the operation to complete, tracking its progress. always set to true when --debug is set")  # fmt: skip
@click.option("--debug", is_flag=True,
              help="debug operation from kernel logs. --wait is set to true when this flag is set")  # fmt: skip
@click.option("--timeout", default="30m", show_default=True,
              help="time to wait for the operation is complete if --debug or --wait is set")  # fmt: skip
def upgrade(image: str, reboot_mode: str, preserve: bool, stage: bool, force: bool, insecure: bool,
            wait: bool, debug: bool, timeout: str) -> None:  # fmt: skip
    from ichor.api.gen.machine import machine_pb2
    from ichor.cli._nodecmd import parse_duration

    wait = wait or debug
    if wait and insecure:
        raise click.ClickException("cannot use --wait and --insecure together")
    mode = REBOOT_MODES.get(reboot_mode.lower())
    if mode is None:
        raise click.ClickException(f"invalid reboot mode: {reboot_mode}")
    limit = parse_duration(timeout, flag="--timeout")
    request = machine_pb2.UpgradeRequest(
        image=image, preserve=preserve, stage=stage, force=force, reboot_mode=mode
    )
    if wait:
        from ichor.cli._node_basic import _lifecycle

        _lifecycle("Upgrade", request, wait=True, comes_back=True, timeout=limit.total_seconds())
        return

    async def work(client: Any) -> None:
        from ichor.client import render_table

        with _failing("error performing upgrade"):
            response = await client.machine.Upgrade(request)
        rows = [["NODE", "ACK", "STARTED"]]
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC")
        for node, message in replies(client, response, "error performing upgrade"):
            rows.append([node, message.ack, started])
        click.echo(render_table(rows), nl=False)

    run(work, insecure=insecure)


@click.command("rollback", help="Rollback a node to the previous installation")
def rollback() -> None:
    from ichor.api.gen.machine import machine_pb2

    async def work(client: Any) -> None:
        with _failing("error executing rollback"):
            response = await client.machine.Rollback(machine_pb2.RollbackRequest())
        replies(client, response, "error executing rollback")

    run(work)


@click.group("meta", cls=LazyGroup, help="Write and delete keys in the META partition")
@click.option("-i", "--insecure", is_flag=True,
              help="write|delete meta using the insecure (encrypted with no auth) maintenance service")  # fmt: skip
@click.pass_context
def meta(ctx: click.Context, insecure: bool) -> None:
    ctx.meta["ichor.meta.insecure"] = insecure


def _meta_key(text: str) -> int:
    """``strconv.ParseUint(text, 0, 8)``: decimal, 0x hex, 0o/0 octal or 0b binary, at most 255."""
    try:
        if text[:1] in ("-", "+"):
            raise ValueError(text)
        value = int(text, 8) if len(text) > 1 and text[0] == "0" and text[1:].isdigit() else int(text, 0)
    except ValueError:
        raise click.ClickException(f'strconv.ParseUint: parsing "{text}": invalid syntax') from None
    if not 0 <= value <= 255:
        raise click.ClickException(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _meta_call(name: str, request: Any) -> None:
    insecure = bool(click.get_current_context().meta.get("ichor.meta.insecure"))

    async def work(client: Any) -> None:
        response = await getattr(client.machine, name)(request)
        replies(client, response, "")

    run(work, insecure=insecure)


@meta.command("write", help="Write a key-value pair to the META partition.")
@click.argument("key")
@click.argument("value")
def meta_write(key: str, value: str) -> None:
    from ichor.api.gen.machine import machine_pb2

    _meta_call("MetaWrite", machine_pb2.MetaWriteRequest(key=_meta_key(key), value=value.encode()))


@meta.command("delete", help="Delete a key from the META partition.")
@click.argument("key")
def meta_delete(key: str) -> None:
    from ichor.api.gen.machine import machine_pb2

    _meta_call("MetaDelete", machine_pb2.MetaDeleteRequest(key=_meta_key(key)))
