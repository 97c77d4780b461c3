"""Node commands that read from a node: logs, dmesg, list (ls), read (cat), mounts, memory, processes.

Each one only asks the node and prints; apply-config, services and power are in ``_node_basic``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import _empty, node_error, replies, run, run_talos


def _stream_lines(open_call: Any, request: Any, client: Any) -> Any:
    from ichor.client import NodeLineBuffer, message_error, message_node

    async def go() -> None:
        buffer = NodeLineBuffer()
        async with open_call() as call:
            await call.send_message(request, end=True)
            async for message in call:
                error = message_error(message, client.peer_host)
                if error is not None:
                    node_error(error)
                    continue
                for line in buffer.feed(message_node(message, client.peer_host), message.bytes):
                    sys.stdout.write(line + "\n")
                sys.stdout.flush()
        for line in buffer.flush():
            sys.stdout.write(line + "\n")

    return go()


@click.command("logs", help="Retrieve logs for a service")
@click.argument("service_id")
@click.option("-f", "--follow", is_flag=True, help="specify if the logs should be streamed")
@click.option(
    "--tail",
    default=-1,
    type=int,
    help="lines of log file to display (default is to show from the beginning)",
)
@click.option("-k", "--kubernetes", is_flag=True, help="use the k8s.io containerd namespace")
def logs(service_id: str, follow: bool, tail: int, kubernetes: bool) -> None:
    def failed(failure: Any) -> None:
        # Talos prints `ERROR: <apid's metadata.error>` (`logs x` of an unknown id: `ERROR: rpc error:
        # code = Unknown desc = log "x" was not registered`); the node it came from is kept here, as
        # Talos's own check (`ERROR:.+ log "x" was not registered`) allows, since the error may not say.
        node_error(failure, line=f"ERROR: {failure}")

    async def work(talos: Any) -> None:
        lines = talos.logs(service_id, follow=follow, tail=tail, kubernetes=kubernetes, on_error=failed)
        async for line in lines:
            sys.stdout.write(f"{line.node}: {line.text}\n")
            sys.stdout.flush()

    run_talos(work)


@click.command("dmesg", cls=CobraCommand, help="Retrieve kernel logs")
@click.option("-f", "--follow", is_flag=True, help="specify if the kernel log should be streamed")
@click.option(
    "--tail/--no-tail",
    default=False,
    help="specify if only new messages should be sent (makes sense only when combined with --follow)",
)
def dmesg(follow: bool, tail: bool) -> None:
    from ichor.api.gen.machine import machine_pb2

    request = machine_pb2.DmesgRequest(follow=follow, tail=tail)
    run(lambda client: _stream_lines(client.machine.Dmesg.open, request, client))


def _go_mode(mode: int) -> str:
    kinds = [(1 << 31, "d"), (1 << 27, "L"), (1 << 26, "D"), (1 << 25, "p"), (1 << 24, "S"), (1 << 21, "c")]
    prefix = "".join(ch for bit, ch in kinds if mode & bit and not (ch == "D" and mode & (1 << 21)))
    perms = "".join(ch if mode & (1 << (8 - i)) else "-" for i, ch in enumerate("rwxrwxrwx"))
    return (prefix or "-") + perms


_LIST_TYPES = {"f": 0, "d": 1, "l": 2, "L": 2}
"""``ls -t`` letters (``find -type`` and Go's file mode letters) to ``ListRequest.Type``."""


@click.command("list", cls=CobraCommand, help="Retrieve a directory listing")
@click.argument("path", default="/")
@click.option("-l", "--long", "long_", is_flag=True, help="display additional file details")
@click.option("-r", "--recurse", is_flag=True, help="recurse into subdirectories")
@click.option("-d", "--depth", default=1, type=int, help="maximum recursion depth")
@click.option("-H", "--humanize", is_flag=True, help="humanize size and time in the output")
@click.option("-t", "--type", "types", multiple=True,
              help="filter by specified types: f (regular file), d (directory), l|L (symbolic link)")  # fmt: skip
def list_(path: str, long_: bool, recurse: bool, depth: int, humanize: bool, types: tuple[str, ...]) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import message_error, message_node, render_table

    if recurse and depth != 1:
        raise click.ClickException(
            "only one of flags --recurse and --depth can be specified at the same time"
        )
    wanted = []
    for letter in "".join(t.replace(",", "") for t in types):
        if letter not in _LIST_TYPES:
            raise click.ClickException(f"invalid file type: {letter}")
        wanted.append(_LIST_TYPES[letter])
    if recurse:
        depth = -1  # Talos's "no limit"
    request = machine_pb2.ListRequest(
        root=path, recurse=recurse or depth > 1, recursion_depth=depth, types=wanted
    )

    async def work(client: Any) -> None:
        rows = [["NODE", "MODE", "UID", "GID", "SIZE(B)", "LASTMOD", "NAME"] if long_ else ["NODE", "NAME"]]
        async with client.machine.List.open() as call:
            await call.send_message(request, end=True)
            async for info in call:
                node = message_node(info, client.peer_host)
                error = message_error(info, client.peer_host) or (info.error and f"{node}: {info.error}")
                if error:
                    node_error(error)
                    continue
                if long_:
                    stamp = datetime.fromtimestamp(info.modified, UTC).strftime("%b %d %H:%M:%S")
                    rows.append(
                        [
                            node,
                            _go_mode(info.mode),
                            str(info.uid),
                            str(info.gid),
                            str(info.size),
                            stamp,
                            info.relative_name,
                        ]
                    )
                else:
                    rows.append([node, info.relative_name])
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("read", help="Read a file on the machine")
@click.argument("path")
def read(path: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import message_error

    async def work(client: Any) -> None:
        async with client.machine.Read.open() as call:
            await call.send_message(machine_pb2.ReadRequest(path=path), end=True)
            async for data in call:
                error = message_error(data, client.peer_host)
                if error is not None:
                    raise click.ClickException(str(error))
                sys.stdout.buffer.write(data.bytes)
        sys.stdout.flush()

    run(work)


MOUNT_HEADER = ["FILESYSTEM", "SIZE(GB)", "USED(GB)", "AVAILABLE(GB)", "PERCENT USED", "MOUNTED ON"]
PROCESS_HEADER = ["PID", "STATE", "THREADS", "CPU-TIME", "VIRTMEM", "RESMEM", "COMMAND"]


def mount_cells(s: Any) -> list[str]:
    """One row of ``mounts`` (without the NODE column): sizes in GB, as talosctl prints them."""
    used = s.size - s.available
    pct = f"{100 * used / s.size:.2f}%" if s.size else "0.00%"
    return [
        s.filesystem,
        f"{s.size / 1e9:.2f}",
        f"{used / 1e9:.2f}",
        f"{s.available / 1e9:.2f}",
        pct,
        s.mounted_on,
    ]


def process_cells(p: Any, memory: Callable[[int], str] = str) -> list[str]:
    """One row of ``processes`` (without the NODE column); ``memory`` formats the two sizes."""
    return [str(p.pid), p.state, str(p.threads), f"{p.cpu_time:.2f}", memory(p.virtual_memory),
            memory(p.resident_memory), p.args or p.command]  # fmt: skip


@click.command("mounts", help="List mounts")
def mounts() -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        response = await client.machine.Mounts(_empty())
        rows = [["NODE", *MOUNT_HEADER]]
        for node, message in replies(client, response, "error getting mounts"):
            rows.extend([node, *mount_cells(s)] for s in message.stats)
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("memory", help="Show memory usage")
@click.option("-v", "--verbose", is_flag=True, help="display extended memory statistics")
def memory(verbose: bool) -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        response = await client.machine.Memory(_empty())
        rows = [["NODE", "TOTAL", "USED", "FREE", "SHARED", "BUFFERS", "CACHE", "AVAILABLE"]]
        for node, message in replies(client, response, "error getting memory stats"):
            m = message.meminfo
            used = m.memtotal - m.memfree - m.cached - m.buffers
            rows.append(
                [
                    node,
                    *(
                        str(v // 1024)
                        for v in (m.memtotal, used, m.memfree, m.shmem, m.buffers, m.cached, m.memavailable)
                    ),
                ]
            )
        click.echo(render_table(rows), nl=False)

    run(work)


@click.command("processes", help="List running processes")
def processes() -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        response = await client.machine.Processes(_empty())
        rows = [["NODE", *PROCESS_HEADER]]
        for node, message in replies(client, response, "error getting processes"):
            rows.extend([node, *process_cells(p)] for p in message.processes)
        click.echo(render_table(rows), nl=False)

    run(work)
