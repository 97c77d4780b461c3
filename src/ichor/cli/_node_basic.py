"""Node commands about a node's version, configuration, services and power: version (server part),
apply-config, service, reboot, shutdown, reset. Logs, files, mounts, memory and processes are in
``_node_info``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import parse_duration, replies, report, run_talos


def server_version(short: bool, insecure: bool) -> None:
    async def work(talos: Any) -> None:
        versions = report(await talos.version())
        click.echo("Server:")
        for v in versions:
            if short:
                click.echo(f"\t{v.node}: {v.tag}")
                continue
            click.echo(f"\tNODE:        {v.node}")
            click.echo(f"\tTag:         {v.tag}")
            click.echo(f"\tSHA:         {v.sha}")
            click.echo(f"\tBuilt:       {v.built}")
            click.echo(f"\tGo version:  {v.go_version}")
            click.echo(f"\tOS/Arch:     {v.os}/{v.arch}")
            click.echo(f"\tEnabled:     {'RBAC' if v.rbac else ''}")

    run_talos(work, insecure=insecure)


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
    try_timeout = parse_duration(timeout, flag="--timeout") if mode == "try" else None

    async def work(talos: Any) -> None:
        results = report(
            await talos.apply_config(
                data, mode=mode, dry_run=dry_run, **({"try_timeout": try_timeout} if try_timeout else {})
            )
        )
        answers = len(results) + len(results.errors)
        for result in results:
            for warning in result.warnings:
                click.echo(f"{result.node}: warning: {warning}", err=True)
            click.echo(result.mode_details if answers == 1 else f"{result.node}: {result.mode_details}")

    run_talos(work, insecure=insecure, fingerprints=cert_fingerprint)


def _ago(when: Any) -> str:
    """How long ago ``when`` (a datetime, None, or a protobuf Timestamp) was, as talosctl prints it."""
    if when is None or (not isinstance(when, datetime) and not when.seconds):
        return ""
    moment = when if isinstance(when, datetime) else when.ToDatetime(tzinfo=UTC)
    delta = datetime.now(UTC) - moment
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
    from ichor.client import render_table

    async def work(talos: Any) -> None:
        if service_id is None:
            rows = [["NODE", "SERVICE", "STATE", "HEALTH", "LAST CHANGE", "LAST EVENT"]]
            for svc in report(await talos.services()):
                last = svc.events[-1] if svc.events else None
                rows.append([svc.node, svc.id, svc.state, svc.health.text,
                             _ago(last.time) if last else "", last.message if last else ""])  # fmt: skip
            click.echo(render_table(rows), nl=False)
            return
        if action in (None, "status"):
            found = report(await talos.services(service_id))
            for svc in found:
                click.echo(
                    f"NODE     {svc.node}\nID       {svc.id}\nSTATE    {svc.state}\nHEALTH   {svc.health.text}"
                )
                if svc.health.last_message:
                    click.echo(f"LAST HEALTH MESSAGE   {svc.health.last_message}")
                for n, event in enumerate(reversed(svc.events)):
                    label = "EVENTS   " if n == 0 else "         "
                    click.echo(f"{label}[{event.state}]: {event.message} ({_ago(event.time)})")
            if not found:
                raise click.ClickException(f'service "{service_id}" not found')
            return
        call = {"start": talos.service_start, "stop": talos.service_stop, "restart": talos.service_restart}[
            action
        ]
        results = report(await call(service_id))
        many = len(results) + len(results.errors) > 1
        for result in results:
            click.echo(f"{result.node}: {result.response}" if many else result.response)

    run_talos(work)


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


def _lifecycle(
    name: str,
    request: Any,
    *,
    wait: bool,
    comes_back: bool,
    outcome: str = "",
    timeout: float = 600.0,
    act: Callable[[Any], Awaitable[Any]] | None = None,
) -> None:
    """Ask the nodes for ``name`` (``act(talos)``, an SDK call, or ``request`` sent to the
    ``name`` RPC) and, with ``wait``, follow each node until it is back up (or down)."""
    import asyncio
    import time

    async def work(talos: Any) -> None:
        client = talos.client
        nodes = client.nodes or [client.peer_host]
        before = {node: await _boot_marker(client, node) for node in nodes} if wait else {}
        if act is not None:
            answered = [(a.node, a.actor_id) for a in report(await act(talos))]
        else:
            response = await getattr(client.machine, name)(request)
            answered = [
                (n, m.actor_id) for n, m in replies(client, response, f"error executing {name.lower()}")
            ]
        for node, actor_id in answered:
            click.echo(f"{node}: {name.lower()} requested (actor {actor_id})", err=wait)
        if outcome:
            click.echo(outcome, err=True)
        if not wait:
            return
        deadline = time.monotonic() + timeout
        pending = {node for node, _ in answered}  # a node that refused is reported, not awaited
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

    run_talos(work)


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
    _lifecycle("Reboot", None, act=lambda talos: talos.reboot(mode=mode), wait=wait, comes_back=True)


@click.command("shutdown", cls=CobraCommand, help="Shutdown a node")
@click.option(
    "--force/--no-force", default=False, help="if true, force a node to shutdown without a cordon/drain"
)
@click.option(
    "--wait/--no-wait", default=True, help="wait for the operation to complete, tracking its progress"
)
def shutdown(force: bool, wait: bool) -> None:
    _lifecycle("Shutdown", None, act=lambda talos: talos.shutdown(force=force), wait=wait, comes_back=False)


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
@click.option("--user-disks-to-wipe", multiple=True, help="if set, wipes defined devices in the list")
@click.option("--wipe-mode", default="all", help="disk reset mode")
@click.option(
    "--insecure", is_flag=True, help="reset using the insecure (encrypted with no auth) maintenance service"
)
@click.option(
    "--wait/--no-wait", default=True, help="wait for the operation to complete, tracking its progress"
)
def reset(
    graceful: bool,
    reboot: bool,
    system_labels_to_wipe: tuple[str, ...],
    user_disks_to_wipe: tuple[str, ...],
    wipe_mode: str,
    insecure: bool,
    wait: bool,
) -> None:
    from ichor.client._talos import RESET_WIPE_MODES, reset_request

    if wipe_mode not in RESET_WIPE_MODES:
        raise click.UsageError(
            f'invalid argument "{wipe_mode}" for "--wipe-mode" flag: possible options are: '
            + ", ".join(sorted(RESET_WIPE_MODES))
        )
    labels = _split(system_labels_to_wipe)
    disks = _split(user_disks_to_wipe)
    if wait and insecure:
        raise click.ClickException("cannot use --wait and --insecure together")
    request = reset_request(graceful=graceful, reboot=reboot, wipe=labels, mode=wipe_mode, user_disks=disks)
    if insecure:
        from ichor.cli._node_ops import _failing
        from ichor.cli._nodecmd import run

        async def work(client: Any) -> None:
            with _failing("error executing reset"):
                await client.machine.Reset(request)

        run(work, insecure=True)
        return
    keeps_config = bool(labels) and "STATE" not in labels
    # A node that keeps its config comes back configured after a reboot: wait for that; one that lost
    # it comes back in maintenance mode, which this client cannot ask: it is done once it went down.
    _lifecycle(
        "Reset",
        request,
        wait=wait,
        comes_back=reboot and keeps_config,
        outcome=reset_outcome(labels, reboot=reboot) if wipe_mode != "user-disks" else "",
    )


def _split(values: tuple[str, ...]) -> list[str]:
    """A string-slice flag: repeated and/or comma-separated."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def reset_outcome(labels: list[str], *, reboot: bool) -> str:
    """What the node is like after the reset, from what it wipes (no labels: everything)."""
    then = "after the reboot" if reboot else "when it is started again"
    if labels and "STATE" not in labels:
        return f"{', '.join(labels)} wiped, STATE kept: the node keeps its machine config and boots configured {then}"
    wiped = ", ".join(labels) if labels else "STATE, EPHEMERAL and META"
    return (
        f"{wiped} wiped: the node loses its machine config and boots into maintenance mode {then}; "
        "configure it with `talosctl apply-config --insecure -n <node> -f <config>`"
    )
