"""Node commands: version (server part), apply-config, services, logs, dmesg, ls, read, mounts,
memory, processes, reboot, shutdown, reset."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import parse_duration, replies, run


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


def server_version(short: bool, insecure: bool) -> None:
    from ichor.api.gen.machine import machine_pb2  # noqa: F401

    async def work(client: Any) -> None:
        response = await client.machine.Version(_empty())
        click.echo("Server:")
        for node, message in replies(client, response, "error getting version"):
            v = message.version
            if short:
                click.echo(f"\t{node}: {v.tag}")
                continue
            click.echo(f"\tNODE:        {node}")
            click.echo(f"\tTag:         {v.tag}")
            click.echo(f"\tSHA:         {v.sha}")
            click.echo(f"\tBuilt:       {v.built}")
            click.echo(f"\tGo version:  {v.go_version}")
            click.echo(f"\tOS/Arch:     {v.os}/{v.arch}")
            enabled = "RBAC" if message.HasField("features") and message.features.rbac else ""
            click.echo(f"\tEnabled:     {enabled}")

    run(work, insecure=insecure)


_MODES = {"auto": 1, "no-reboot": 2, "reboot": 0, "staged": 3, "try": 4}


@click.command("apply-config", cls=CobraCommand, help="Apply a new configuration to a node")
@click.option(
    "-f",
    "--file",
    "file",
    required=True,
    type=click.Path(dir_okay=False),
    help="the filename of the updated configuration",
)
@click.option(
    "-m",
    "--mode",
    default="auto",
    type=click.Choice([*_MODES, "interactive"]),
    show_default=True,
    help="apply config mode",
)
@click.option(
    "-i",
    "--insecure",
    is_flag=True,
    help="apply config using the insecure (encrypted with no auth) maintenance service",
)
@click.option(
    "--cert-fingerprint",
    multiple=True,
    help="list of server certificate fingeprints to accept (defaults to no check)",
)
@click.option(
    "-p",
    "--config-patch",
    multiple=True,
    help="the list of config patches to apply to the local config file before sending it to the node",
)
@click.option(
    "--dry-run/--no-dry-run",
    default=False,
    help="check how the config change will be applied in dry-run mode",
)
@click.option(
    "--timeout",
    default="1m",
    help="the config will be rolled back after specified timeout (if try mode is selected)",
)
def apply_config(file: str, mode: str, insecure: bool, cert_fingerprint: tuple[str, ...], config_patch: tuple[str, ...],
                 dry_run: bool, timeout: str) -> None:  # fmt: skip
    from ichor.api.gen.machine import machine_pb2

    if mode == "interactive":
        raise click.UsageError(
            "--mode=interactive needs a terminal installer, which Ichor does not have; pass --file"
        )
    try:
        data = Path(file).read_bytes()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {file!r}: {exc.strerror}", param_hint="-f/--file") from None
    if config_patch:
        from ichor.machinery.patch import apply_patches, load_patches
        from ichor.machinery.yamlio import dump_documents, load_documents

        docs = apply_patches(
            load_documents(data, source=file), load_patches(list(config_patch), flag="--config-patch")
        )
        data = dump_documents(docs).encode()
    request = machine_pb2.ApplyConfigurationRequest(data=data, mode=_MODES[mode], dry_run=dry_run)
    if mode == "try":
        request.try_mode_timeout.FromTimedelta(parse_duration(timeout, flag="--timeout"))

    async def work(client: Any) -> None:
        response = await client.machine.ApplyConfiguration(request)
        for node, message in replies(client, response, "error applying new configuration"):
            for warning in message.warnings:
                click.echo(f"{node}: warning: {warning}", err=True)
            click.echo(
                message.mode_details if len(response.messages) == 1 else f"{node}: {message.mode_details}"
            )

    run(work, insecure=insecure, fingerprints=cert_fingerprint)


def _ago(when: Any) -> str:
    if not when.seconds:
        return ""
    delta = datetime.now(UTC) - when.ToDatetime(tzinfo=UTC)
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s ago"
    return f"{seconds // 3600}h{(seconds % 3600) // 60}m ago"


def _health(h: Any) -> str:
    return "?" if h.unknown else ("OK" if h.healthy else "Fail")


@click.command("service", help="Retrieve the state of a service (or all services), control service state")
@click.argument("service_id", required=False)
@click.argument("action", required=False, type=click.Choice(["start", "stop", "restart", "status"]))
def service(service_id: str | None, action: str | None) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import render_table

    async def work(client: Any) -> None:
        if service_id is None:
            response = await client.machine.ServiceList(_empty())
            rows = [["NODE", "SERVICE", "STATE", "HEALTH", "LAST CHANGE", "LAST EVENT"]]
            for node, message in replies(client, response, "error listing services"):
                for svc in message.services:
                    last = svc.events.events[-1] if svc.events.events else None
                    rows.append([node, svc.id, svc.state, _health(svc.health),
                                 _ago(last.ts) if last else "", last.msg if last else ""])  # fmt: skip
            click.echo(render_table(rows), nl=False)
            return
        if action in (None, "status"):
            response = await client.machine.ServiceList(_empty())
            found = False
            for node, message in replies(client, response, "error listing services"):
                for svc in message.services:
                    if svc.id != service_id:
                        continue
                    found = True
                    click.echo(
                        f"NODE     {node}\nID       {svc.id}\nSTATE    {svc.state}\nHEALTH   {_health(svc.health)}"
                    )
                    if svc.health.last_message:
                        click.echo(f"LAST HEALTH MESSAGE   {svc.health.last_message}")
                    for n, event in enumerate(reversed(svc.events.events)):
                        label = "EVENTS   " if n == 0 else "         "
                        click.echo(f"{label}[{event.state}]: {event.msg} ({_ago(event.ts)})")
            if not found:
                raise click.ClickException(f'service "{service_id}" not found')
            return
        call = {"start": client.machine.ServiceStart, "stop": client.machine.ServiceStop,
                "restart": client.machine.ServiceRestart}[action]  # fmt: skip
        request_type = {"start": machine_pb2.ServiceStartRequest, "stop": machine_pb2.ServiceStopRequest,
                        "restart": machine_pb2.ServiceRestartRequest}[action]  # fmt: skip
        response = await call(request_type(id=service_id))
        for node, message in replies(client, response, f"error performing {action}"):
            click.echo(f"{node}: {message.resp}" if len(response.messages) > 1 else message.resp)

    run(work)


def _stream_lines(open_call: Any, request: Any, client: Any) -> Any:
    from ichor.client import NodeLineBuffer, message_error, message_node

    async def go() -> None:
        buffer = NodeLineBuffer()
        async with open_call() as call:
            await call.send_message(request, end=True)
            async for message in call:
                error = message_error(message, client.peer_host)
                if error is not None:
                    click.echo(f"error: {error}", err=True)
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
    from ichor.api.gen.machine import machine_pb2

    request = machine_pb2.LogsRequest(namespace="k8s.io" if kubernetes else "system", id=service_id,
                                      follow=follow, tail_lines=tail)  # fmt: skip
    run(lambda client: _stream_lines(client.machine.Logs.open, request, client))


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


@click.command("list", help="Retrieve a directory listing")
@click.argument("path", default="/")
@click.option("-l", "--long", "long_", is_flag=True, help="display additional file details")
@click.option("-r", "--recurse", is_flag=True, help="recurse into subdirectories")
@click.option("-d", "--depth", default=1, type=int, help="maximum recursion depth")
@click.option("-H", "--humanize", is_flag=True, help="humanize size and time in the output")
def list_(path: str, long_: bool, recurse: bool, depth: int, humanize: bool) -> None:
    from ichor.api.gen.machine import machine_pb2
    from ichor.client import message_error, message_node, render_table

    request = machine_pb2.ListRequest(
        root=path, recurse=recurse or depth > 1, recursion_depth=0 if recurse else depth
    )

    async def work(client: Any) -> None:
        rows = [["NODE", "MODE", "UID", "GID", "SIZE(B)", "LASTMOD", "NAME"] if long_ else ["NODE", "NAME"]]
        async with client.machine.List.open() as call:
            await call.send_message(request, end=True)
            async for info in call:
                node = message_node(info, client.peer_host)
                error = message_error(info, client.peer_host) or (info.error and f"{node}: {info.error}")
                if error:
                    click.echo(f"error: {error}", err=True)
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


@click.command("mounts", help="List mounts")
def mounts() -> None:
    from ichor.client import render_table

    async def work(client: Any) -> None:
        response = await client.machine.Mounts(_empty())
        rows = [["NODE", "FILESYSTEM", "SIZE(GB)", "USED(GB)", "AVAILABLE(GB)", "PERCENT USED", "MOUNTED ON"]]
        for node, message in replies(client, response, "error getting mounts"):
            for s in message.stats:
                used = s.size - s.available
                pct = f"{100 * used / s.size:.2f}%" if s.size else "0.00%"
                gb = 1e9
                rows.append(
                    [
                        node,
                        s.filesystem,
                        f"{s.size / gb:.2f}",
                        f"{used / gb:.2f}",
                        f"{s.available / gb:.2f}",
                        pct,
                        s.mounted_on,
                    ]
                )
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
        rows = [["NODE", "PID", "STATE", "THREADS", "CPU-TIME", "VIRTMEM", "RESMEM", "COMMAND"]]
        for node, message in replies(client, response, "error getting processes"):
            for p in message.processes:
                rows.append([node, str(p.pid), p.state, str(p.threads), f"{p.cpu_time:.2f}",
                             str(p.virtual_memory), str(p.resident_memory), p.args or p.command])  # fmt: skip
        click.echo(render_table(rows), nl=False)

    run(work)


async def _boot_marker(client: Any, node: str) -> tuple[str, str] | None:
    """(created, stage) of the node's MachineStatus; None while the node cannot be asked."""
    from ichor.api.gen.v1alpha1 import state_pb2
    from ichor.client import ClientError

    try:
        reply = await client.with_node(node).cosi.Get(
            state_pb2.GetRequest(namespace="runtime", type="MachineStatuses.runtime.talos.dev", id="machine")
        )
    except (ClientError, OSError):
        return None
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.yamlio import load_documents, to_plain

    meta = reply.resource.metadata
    try:
        spec = to_plain(load_documents(reply.resource.spec.yaml_spec or "{}", source="MachineStatus")[0])
    except (MachineryError, IndexError):
        spec = {}
    stage = str(spec.get("stage", "")) if isinstance(spec, dict) else ""
    return meta.created.ToJsonString(), stage


def _lifecycle(name: str, request: Any, *, wait: bool, comes_back: bool, timeout: float = 600.0) -> None:
    import asyncio
    import time

    async def work(client: Any) -> None:
        nodes = client.nodes or [client.peer_host]
        before = {node: await _boot_marker(client, node) for node in nodes} if wait else {}
        method = getattr(client.machine, name)
        response = await method(request)
        for node, message in replies(client, response, f"error executing {name.lower()}"):
            click.echo(f"{node}: {name.lower()} requested (actor {message.actor_id})", err=wait)
        if not wait:
            return
        deadline = time.monotonic() + timeout
        pending = set(nodes)
        since = time.monotonic()
        while pending:
            for node in sorted(pending):
                now = await _boot_marker(client, node)
                if (
                    comes_back
                    and now is not None
                    and before.get(node) is not None
                    and now[0] != before[node][0]
                    and now[1] == "running"
                ):  # type: ignore[index]
                    click.echo(f"{node}: back up after {time.monotonic() - since:.1f}s", err=True)
                    pending.discard(node)
                elif not comes_back and now is None:
                    click.echo(f"{node}: down after {time.monotonic() - since:.1f}s", err=True)
                    pending.discard(node)
            if pending:
                if time.monotonic() > deadline:
                    raise click.ClickException(
                        f"timed out waiting for {', '.join(sorted(pending))} after {timeout:.0f}s"
                    )
                await asyncio.sleep(0.3)

    run(work)


@click.command("reboot", cls=CobraCommand, help="Reboot a node")
@click.option(
    "-m",
    "--mode",
    default="default",
    type=click.Choice(["default", "powercycle"]),
    help="select the reboot mode",
)
@click.option(
    "--wait/--no-wait", default=True, help="wait for the operation to complete, tracking its progress"
)
def reboot(mode: str, wait: bool) -> None:
    from ichor.api.gen.machine import machine_pb2

    _lifecycle(
        "Reboot", machine_pb2.RebootRequest(mode=1 if mode == "powercycle" else 0), wait=wait, comes_back=True
    )


@click.command("shutdown", cls=CobraCommand, help="Shutdown a node")
@click.option(
    "--force/--no-force", default=False, help="if true, force a node to shutdown without a cordon/drain"
)
@click.option(
    "--wait/--no-wait", default=True, help="wait for the operation to complete, tracking its progress"
)
def shutdown(force: bool, wait: bool) -> None:
    from ichor.api.gen.machine import machine_pb2

    _lifecycle("Shutdown", machine_pb2.ShutdownRequest(force=force), wait=wait, comes_back=False)


@click.command("reset", cls=CobraCommand, help="Reset a node")
@click.option(
    "--graceful/--no-graceful",
    default=True,
    help="if true, attempt to cordon/drain node and leave etcd (if applicable)",
)
@click.option(
    "--reboot/--no-reboot",
    default=False,
    help="if true, reboot the node after resetting instead of shutting down",
)
@click.option(
    "--system-labels-to-wipe",
    multiple=True,
    help="if set, just wipe selected system disk partitions by label but keep other partitions intact",
)
@click.option(
    "--wait/--no-wait", default=True, help="wait for the operation to complete, tracking its progress"
)
def reset(graceful: bool, reboot: bool, system_labels_to_wipe: tuple[str, ...], wait: bool) -> None:
    from ichor.api.gen.machine import machine_pb2

    labels = [label.strip() for value in system_labels_to_wipe for label in value.split(",") if label.strip()]
    request = machine_pb2.ResetRequest(
        graceful=graceful, reboot=reboot,
        system_partitions_to_wipe=[machine_pb2.ResetPartitionSpec(label=label, wipe=True) for label in labels],
    )  # fmt: skip
    # A reset node comes back in maintenance mode (no config): it is done once it has gone down.
    _lifecycle("Reset", request, wait=wait, comes_back=False)
    if wait and reboot:
        click.echo(
            "the node boots into maintenance mode: configure it with `talosctl apply-config --insecure`",
            err=True,
        )
