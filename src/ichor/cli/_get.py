"""``talosctl get <type> [<id>]``: any resource, found by type name or alias, rendered by its definition.

The type is resolved against the node's ``ResourceDefinitions`` (namespace ``meta``) exactly as the
COSI client does: canonical name, any alias, or the plural with a suffix (``members.cluster``).
The table has Talos's columns ``NODE NAMESPACE TYPE ID VERSION`` plus the definition's print columns.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import run

RD_TYPE = "ResourceDefinitions.meta.cosi.dev"


async def _list(stub: Any, namespace: str, rtype: str) -> list[Any]:
    from ichor.api.gen.v1alpha1 import state_pb2

    out = []
    async with stub.List.open() as call:
        await call.send_message(state_pb2.ListRequest(namespace=namespace, type=rtype), end=True)
        async for reply in call:
            out.append(reply.resource)
    return out


def _match(definitions: list[Any], name: str) -> Any:
    from ichor.api.gen.v1alpha1 import meta_pb2

    wanted = name.lower()
    found = []
    for resource in definitions:
        spec = meta_pb2.ResourceDefinitionSpec()
        spec.ParseFromString(resource.spec.proto_spec)
        names = {spec.resource_type.lower(), *(a.lower() for a in spec.all_aliases)}
        if wanted in names or spec.resource_type.lower().startswith(wanted + "."):
            found.append(spec)
    if not found:
        raise click.ClickException(
            f'resource type "{name}" is not registered; list the types with `talosctl get resourcedefinitions`'
        )
    if len(found) > 1:
        raise click.ClickException(
            f'resource type "{name}" is ambiguous: {", ".join(s.resource_type for s in found)}'
        )
    return found[0]


def _spec_data(resource: Any) -> Any:
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.yamlio import load_documents, to_plain

    try:
        docs = load_documents(resource.spec.yaml_spec or "{}", source="spec")
    except MachineryError:  # a spec that is not YAML renders as its text
        return resource.spec.yaml_spec
    return to_plain(docs[0]) if docs else {}


def _metadata_yaml(node: str, resource: Any) -> str:
    m = resource.metadata
    lines = [f"node: {node}", "metadata:", f"    namespace: {m.namespace}", f"    type: {m.type}", f"    id: {m.id}",
             f"    version: {m.version}", f"    owner: {m.owner}", f"    phase: {m.phase}"]  # fmt: skip
    if m.HasField("created"):
        lines.append(f"    created: {m.created.ToJsonString()}")
    if m.HasField("updated"):
        lines.append(f"    updated: {m.updated.ToJsonString()}")
    if m.labels:
        lines.append("    labels:")
        lines += [f"        {k}: {v}" for k, v in sorted(m.labels.items())]
    spec = resource.spec.yaml_spec.rstrip("\n") or "{}"
    lines.append("spec:")
    lines += [f"    {line}" if line else "" for line in spec.split("\n")]
    return "\n".join(lines) + "\n"


@click.command(
    "get",
    cls=CobraCommand,
    help="Get a specific resource or list of resources (use 'talosctl get rd' to see all available resource types)",
)
@click.argument("resource_type")
@click.argument("resource_id", required=False)
@click.option(
    "--namespace", default="", help="resource namespace (default is to use default namespace per resource)"
)
@click.option("-o", "--output", default="table", help="output mode (json, table, yaml, jsonpath=<expr>)")
@click.option("-w", "--watch", is_flag=True, help="watch resource changes")
@click.option(
    "-i",
    "--insecure",
    is_flag=True,
    help="get resources using the insecure (encrypted with no auth) maintenance service",
)
def get(
    resource_type: str, resource_id: str | None, namespace: str, output: str, watch: bool, insecure: bool
) -> None:
    from ichor.client import render_table
    from ichor.machinery.jsonpath import render_jsonpath

    if output not in ("table", "yaml", "json") and not output.startswith("jsonpath="):
        raise click.BadParameter(
            f"unknown output {output!r}: use table, yaml, json or jsonpath=<expr>", param_hint="-o/--output"
        )

    async def work(client: Any) -> None:
        nodes = client.nodes or [client.peer_host]
        rows: list[list[str]] = []
        header: list[str] = []
        for node in nodes:
            stub = client.with_node(node).cosi
            definitions = await _list(stub, "meta", RD_TYPE)
            spec = _match(definitions, resource_type)
            ns = namespace or spec.default_namespace
            resources = await _list(stub, ns, spec.resource_type)
            if resource_id is not None:
                resources = [r for r in resources if r.metadata.id == resource_id]
                if not resources:
                    click.echo(
                        f"error: {node}: resource {spec.resource_type}({ns}/{resource_id}) doesn't exist",
                        err=True,
                    )
            columns = list(spec.print_columns)
            header = ["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", *(c.name.upper() for c in columns)]
            for resource in resources:
                if output == "yaml":
                    sys.stdout.write(("---\n" if rows else "") + _metadata_yaml(node, resource))
                    rows.append([])
                elif output == "json":
                    m = resource.metadata
                    sys.stdout.write(json.dumps({"node": node, "metadata": {"namespace": m.namespace, "type": m.type, "id": m.id,
                                                 "version": m.version, "phase": m.phase}, "spec": _spec_data(resource)}, indent=4) + "\n")  # fmt: skip
                    rows.append([])
                elif output.startswith("jsonpath="):
                    click.echo(render_jsonpath(output.removeprefix("jsonpath="), _spec_data(resource)))
                    rows.append([])
                else:
                    data = _spec_data(resource)
                    cells = [render_jsonpath(c.json_path, data) for c in columns]
                    rows.append([node, resource.metadata.namespace, spec.display_type or spec.resource_type,
                                 resource.metadata.id, resource.metadata.version, *cells])  # fmt: skip
        if output == "table":
            click.echo(render_table([header, *rows]), nl=False)

    if watch:
        raise click.UsageError("--watch is not supported by this build yet; run the command again to refresh")
    run(work, insecure=insecure)
