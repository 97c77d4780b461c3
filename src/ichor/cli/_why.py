"""``talosctl why <service | type[/id] [id] | health>``: the chain of waits from a thing to its root cause.

Ichor's own command (Talos has none): it reads only what the node serves over the Talos API (the
controller graph, resources, ``WaitStatuses``, services) and walks it with :mod:`ichor.client.why`.
One line per hop, then ``fix:`` when the cause is a machine config key or a service stopped on a
node; ``-o json`` prints the same as one JSON document per node. ``-n`` with several nodes walks
each of them. ``why health`` runs every stage of ``talosctl health`` once and walks from the first
that fails (etcd on each control plane, apid, the kubelet, the control plane's static pods).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import run

HELP = """Explain why a service, a resource or a health stage is not up, down to the root cause.

\b
  talosctl why kubelet                  a service
  talosctl why nodeips/kubelet          a resource (type or alias, then id)
  talosctl why staticpods kube-apiserver
  talosctl why health                   the first failing stage of `talosctl health`
"""


async def _resolve_type(bound: Any, name: str) -> tuple[str, str]:
    """The canonical type and default namespace of a type name or alias, as ``talosctl get`` finds it."""
    from ichor.cli._get import RD_TYPE, _match

    spec = _match(await bound.list_resources("meta", RD_TYPE), name)
    return str(spec.resource_type), str(spec.default_namespace)


async def _chain(client: Any, node: str, what: str, rid: str | None) -> Any:
    from ichor.client import why

    view = await why.gather(client, node)
    if "/" in what and rid is None:
        what, rid = what.split("/", 1)
    elif rid is None and what in view.services:
        return view, why.why_service(view, what)
    try:
        rtype, namespace = await _resolve_type(client.with_node(node), what)
    except click.ClickException:
        if rid is not None:
            raise
        return view, why.why_service(view, what)  # neither a type nor a service here: says so
    return view, why.why_resource(view, rtype, rid or None, namespace if rid else None)


async def _health(client: Any) -> tuple[datetime, Any]:
    from ichor.client import why
    from ichor.client.health import discover

    node = client.require_single_node("why health")
    info = await discover(client.with_node(node))
    failing = await why.first_failing_stage(client, info)
    now = datetime.now(UTC)
    if failing is None:
        return now, why.Chain(node, "health", [why.Hop("health", "every stage passes")], ok=True)
    stage, reason = failing
    for kind, name, where in why.stage_subjects(stage):
        nodes = info.control_plane_nodes if where == "control planes" else [*info.control_plane_nodes,
                                                                             *info.worker_nodes]  # fmt: skip
        for target in nodes:
            view = await why.gather(client, target)
            if kind == "service":
                below = why.why_service(view, name)
            else:
                rtype, rid = name.split("/", 1)
                below = why.why_resource(view, rtype, rid)
            if not below.ok:
                return now, why.health_chain(stage, reason, below)
    return now, why.health_chain(stage, reason, None)


@click.command("why", cls=CobraCommand, help=HELP)
@click.argument("what")
@click.argument("resource_id", required=False)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="output mode")
def why(what: str, resource_id: str | None, output: str) -> None:
    from ichor.client import why as walk

    async def work(client: Any) -> list[tuple[datetime, Any]]:
        if what == "health":
            return [await _health(client)]
        out = []
        for node in client.nodes or [client.peer_host]:
            view, chain = await _chain(client, node, what, resource_id)
            out.append((view.now, chain))
        return out

    chains = run(work)
    if output == "json":
        docs = [chain.as_json(now) for now, chain in chains]
        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return
    for now, chain in chains:
        if len(chains) > 1:
            click.echo(f"NODE {chain.node}")
        for line in walk.render(chain, now):
            click.echo(line)
