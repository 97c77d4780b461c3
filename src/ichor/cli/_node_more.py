"""Node commands: disks, events, cp, config new."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import node_error, parse_duration, replies, run


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value} TB"


@click.command("disks", help="Get the list of disks from /sys/block on the machine")
@click.option(
    "-i",
    "--insecure",
    is_flag=True,
    help="get disks using the insecure (encrypted with no auth) maintenance service",
)
def disks(insecure: bool) -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        response = await client.storage.Disks(_empty())
        rows = [
            [
                "NODE",
                "DEV",
                "MODEL",
                "SERIAL",
                "TYPE",
                "UUID",
                "WWID",
                "MODALIAS",
                "NAME",
                "SIZE",
                "BUS_PATH",
                "SUBSYSTEM",
                "READ_ONLY",
                "SYSTEM_DISK",
            ]
        ]
        for node, message in replies(client, response, "error getting disks"):
            for d in message.disks:
                rows.append([node, d.device_name, d.model or "-", d.serial or "-", "UNKNOWN" if d.type == 0 else str(d.type),
                             d.uuid or "-", d.wwid or "-", d.modalias or "-", d.name or "-", _human_bytes(d.size),
                             d.bus_path or "-", d.subsystem or "-", "*" if d.readonly else "", "*" if d.system_disk else ""])  # fmt: skip
        click.echo(render_table(rows), nl=False)

    run(work, insecure=insecure)


_EVENT_TYPES = (
    "SequenceEvent", "PhaseEvent", "TaskEvent", "ServiceStateEvent", "ConfigLoadErrorEvent",
    "ConfigValidationErrorEvent", "AddressEvent", "MachineStatusEvent",
)  # fmt: skip
_TYPE_URL_PREFIX = "talos/runtime/machine."


def describe_event(type_url: str, value: bytes) -> tuple[str, str] | None:
    """talosctl's SOURCE and MESSAGE cells of an event; None for the hello event and unknown types."""
    from ichor.api.gen.machine import machine_pb2 as pb

    name = type_url.removeprefix(_TYPE_URL_PREFIX)
    if not type_url.startswith(_TYPE_URL_PREFIX) or name not in _EVENT_TYPES:
        return None
    m = getattr(pb, name)()
    m.ParseFromString(value)
    if name == "SequenceEvent":
        action = (
            f"error: {m.error.message}" if m.HasField("error") else pb.SequenceEvent.Action.Name(m.action)
        )
        return m.sequence, action
    if name in ("PhaseEvent", "TaskEvent"):
        return (m.phase if name == "PhaseEvent" else m.task), type(m).Action.Name(m.action)
    if name == "ServiceStateEvent":
        return m.service, f"{pb.ServiceStateEvent.Action.Name(m.action)}: {m.message}"
    if name == "AddressEvent":
        return m.hostname, f"ADDRESSES: {','.join(m.addresses)}"
    if name == "MachineStatusEvent":
        unmet = " ".join(c.name for c in m.status.unmet_conditions)
        stage = pb.MachineStatusEvent.MachineStage.Name(m.stage)
        return stage, f"ready: {'true' if m.status.ready else 'false'}, unmet conditions: [{unmet}]"
    return "error", m.error  # ConfigLoadErrorEvent, ConfigValidationErrorEvent


class GrowingTable:
    """Rows of a table printed as they come: each column as wide as its widest cell so far (at least
    its heading) plus three spaces, so a stream stays aligned with its header."""

    def __init__(self, header: list[str], widths: list[int] | None = None) -> None:
        self.widths = [max(len(h), w) for h, w in zip(header, widths or [0] * len(header), strict=True)]
        self.header = header

    def line(self, cells: list[str]) -> str:
        self.widths = [max(w, len(c)) for w, c in zip(self.widths, cells, strict=True)]
        return "".join(c.ljust(w + 3) for c, w in zip(cells[:-1], self.widths, strict=False)) + cells[-1]


@click.command("events", help="Stream runtime events")
@click.option(
    "--tail",
    default=0,
    type=int,
    help="show specified number of past events (use -1 to show full history, default is to show no history)",
)
@click.option(
    "--since", default="", help="show events after the specified event ID (default is to show no history)"
)
@click.option(
    "--duration",
    default="",
    help="show events for the past duration interval (one second resolution, default is to show no history)",
)
@click.option("--actor-id", default="", help="filter events by the specified actor ID (default is no filter)")
def events(tail: int, since: str, duration: str, actor_id: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import message_error, message_node

    seconds = int(parse_duration(duration, flag="--duration").total_seconds()) if duration else 0
    request = machine_pb2.EventsRequest(
        tail_events=tail, tail_id=since, tail_seconds=seconds, with_actor_id=actor_id
    )

    async def work(client: Any) -> None:
        nodes = client.nodes or [client.peer_host]
        # Event ids are 20-character xids; the longest event type URL is known; sources are mostly
        # shorter than the longest machine stage (SHUTTING_DOWN).
        longest_type = max(len(_TYPE_URL_PREFIX + t) for t in _EVENT_TYPES)
        table = GrowingTable(["NODE", "ID", "EVENT", "ACTOR", "SOURCE", "MESSAGE"],
                             [max(map(len, nodes)), 20, longest_type, 0, 13, 0])  # fmt: skip
        click.echo(table.line(table.header))
        async with client.machine.Events.open() as call:
            await call.send_message(request, end=True)
            async for event in call:
                error = message_error(event, client.peer_host)
                if error is not None:
                    node_error(error)
                    continue
                described = describe_event(event.data.type_url, event.data.value)
                if described is None:
                    continue  # the hello event and types this client does not know
                source, text = described
                node = message_node(event, client.peer_host)
                click.echo(table.line([node, event.id, event.data.type_url, event.actor_id, source, text]))
                sys.stdout.flush()

    run(work)


@click.command("copy", help="Copy data out from the node")
@click.argument("src")
@click.argument("dst", default=".")
def copy(src: str, dst: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.cli._extract import extract_copy
    from ichor.client import message_error

    async def work(client: Any) -> None:
        if len(client.nodes) > 1:
            raise click.UsageError("cp works with one node at a time (-n)")
        data = bytearray()
        async with client.machine.Copy.open() as call:
            await call.send_message(machine_pb2.CopyRequest(root_path=src), end=True)
            async for chunk in call:
                error = message_error(chunk, client.peer_host)
                if error is not None:
                    raise click.ClickException(str(error))
                data.extend(chunk.bytes)
        target = Path(dst)
        if dst == "-":
            sys.stdout.buffer.write(bytes(data))
            return
        extract_copy(bytes(data), target, warn=lambda text: click.echo(f"warning: {text}", err=True))

    run(work)


@click.command("new", cls=CobraCommand, help="Generate a new client configuration file")
@click.argument("path", default="talosconfig")
@click.option("--roles", multiple=True, default=["os:admin"], show_default=True, help="roles")
@click.option("--crt-ttl", default="8760h", show_default=True, help="certificate TTL")
def config_new(path: str, roles: tuple[str, ...], crt_ttl: str) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.machinery.files import write_atomic

    ttl: timedelta = parse_duration(crt_ttl, flag="--crt-ttl")
    role_list = [r.strip() for value in roles for r in value.split(",") if r.strip()]

    async def work(client: Any) -> None:
        if len(client.nodes) > 1:
            raise click.UsageError("config new talks to one node at a time (-n)")
        request = machine_pb2.GenerateClientConfigurationRequest(roles=role_list)
        request.crt_ttl.FromTimedelta(ttl)
        response = await client.machine.GenerateClientConfiguration(request)
        for _, message in replies(client, response, "error generating client configuration"):
            write_atomic(Path(path), message.talosconfig, mode=0o600)
            click.echo(f"Created {path}", err=True)

    run(work)
