"""``talosctl get <type> [<id>]``: any resource, found by type name or alias, rendered by its definition.

The type is resolved against the node's ``ResourceDefinitions`` (namespace ``meta``) exactly as the
COSI client does: canonical name, any alias, or the plural with a suffix (``members.cluster``).
The table has Talos's columns ``NODE NAMESPACE TYPE ID VERSION`` plus the definition's print columns.

``-w`` watches: the current contents first (aligned as one table), then every change as it
happens, with Talos's ``*`` column (``+`` created, ``-`` destroyed, blank updated) or an
``event:`` key in YAML/JSON. A watch runs until interrupted (Ctrl-C) or the node goes away.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import node_error, report, run_talos

RD_TYPE = "ResourceDefinitions.meta.cosi.dev"


def _match(definitions: list[Any], name: str) -> Any:
    """The ResourceDefinitionSpec among ``definitions`` (COSI resources) that ``name`` names."""
    from ichor.client._talos import match_definition

    return match_definition(definitions, name)


def _spec_data(resource: Any) -> Any:
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.yamlio import load_documents, to_plain

    try:
        docs = load_documents(resource.spec.yaml_spec or "{}", source="spec")
    except MachineryError:  # a spec that is not YAML renders as its text
        return resource.spec.yaml_spec
    return to_plain(docs[0]) if docs else {}


def _metadata_yaml(node: str, resource: Any, event: str | None = None) -> str:
    m = resource.metadata
    lines = [f"node: {node}", *([f"event: {event}"] if event else []), "metadata:", f"    namespace: {m.namespace}", f"    type: {m.type}", f"    id: {m.id}",
             f"    version: {m.version}", f"    owner: {m.owner}", f"    phase: {m.phase}"]  # fmt: skip
    if m.HasField("created"):
        lines.append(f"    created: {m.created.ToJsonString()}")
    if m.HasField("updated"):
        lines.append(f"    updated: {m.updated.ToJsonString()}")
    for name, values in (("labels", m.labels), ("annotations", m.annotations)):
        if values:
            lines.append(f"    {name}:")
            lines += [f"        {k}: {v}" for k, v in sorted(values.items())]
    if m.finalizers:
        lines.append("    finalizers:")
        lines += [f"        - {f}" for f in m.finalizers]
    spec = resource.spec.yaml_spec.rstrip("\n") or "{}"
    lines.append("spec:")
    lines += [f"    {line}" if line else "" for line in spec.split("\n")]
    return "\n".join(lines) + "\n"


def _resource_data(node: str, resource: Any, event: str | None = None) -> dict[str, Any]:
    """The resource as talosctl's ``-o json`` and ``-o jsonpath`` see it: the ``-o yaml`` document
    (``node``, ``metadata``, ``spec``, and ``event`` in a watch) as plain data."""
    m = resource.metadata
    version: int | str = int(m.version) if m.version.isdigit() else m.version
    metadata: dict[str, Any] = {"namespace": m.namespace, "type": m.type, "id": m.id, "version": version,
                                "owner": m.owner or None, "phase": m.phase}  # fmt: skip
    if m.HasField("created"):
        metadata["created"] = m.created.ToJsonString()
    if m.HasField("updated"):
        metadata["updated"] = m.updated.ToJsonString()
    for name, values in (("labels", m.labels), ("annotations", m.annotations)):
        if values:
            metadata[name] = dict(sorted(values.items()))
    if m.finalizers:
        metadata["finalizers"] = list(m.finalizers)
    data: dict[str, Any] = {"node": node, "metadata": metadata, "spec": _spec_data(resource)}
    if event:
        data["event"] = event
    return data


def _go_json(data: Any) -> str:
    """JSON as Go's encoder writes it: sorted keys, 4-space indent, UTF-8, ``<>&`` escaped."""
    text = json.dumps(data, indent=4, sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _jsonpath_lines(expression: str, data: Any) -> list[str]:
    """talosctl's ``-o jsonpath``: each result on its own line, maps and lists as indented JSON."""
    from ichor.machinery.errors import MachineryError
    from ichor.machinery.jsonpath import JSONPathNotFoundError, find_results

    try:
        results = find_results(expression, data)
    except JSONPathNotFoundError as exc:
        raise MachineryError(
            f"error finding result for jsonpath {expression!r}: {exc} "
            f"({data['node']}: {data['metadata']['type']} {data['metadata']['id']})",
            hint="the path starts at node, metadata or spec, e.g. jsonpath='{.spec.<field>}'; "
            "`-o yaml` shows the fields there are",
        ) from None
    lines = []
    for group in results:
        for value in group:
            if isinstance(value, dict | list):
                lines.append(_go_json(value))
            elif isinstance(value, bool):
                lines.append("true" if value else "false")
            else:
                lines.append("" if value is None else str(value))
    return lines


_MARKS = {"created": "+", "destroyed": "-", "updated": " "}


class _Writer:
    """Renders resources as table/yaml/json/jsonpath; with events (watch) it adds Talos's event marks."""

    def __init__(self, output: str, *, with_events: bool) -> None:
        self.output = output
        self.with_events = with_events
        self.rows: list[list[str]] = []
        self.header: list[str] = []
        self.written = 0

    def use(self, spec: Any) -> None:
        self.spec = spec
        events = ["*"] if self.with_events else []
        self.header = ["NODE", *events, "NAMESPACE", "TYPE", "ID", "VERSION",
                       *(c.name.upper() for c in spec.print_columns)]  # fmt: skip

    def write(self, node: str, resource: Any, event: str | None = None) -> None:
        if self.output == "yaml":
            sys.stdout.write(("---\n" if self.written else "") + _metadata_yaml(node, resource, event))
        elif self.output == "json":
            sys.stdout.write(_go_json(_resource_data(node, resource, event)) + "\n")
        elif self.output.startswith("jsonpath="):
            expression = self.output.removeprefix("jsonpath=")
            for line in _jsonpath_lines(expression, _resource_data(node, resource, event)):
                click.echo(line)
        else:
            from ichor.machinery.jsonpath import render_jsonpath

            data = _spec_data(resource)
            cells = [render_jsonpath(c.json_path, data) for c in self.spec.print_columns]
            marks = [_MARKS.get(event or "", " ")] if self.with_events else []
            self.rows.append([node, *marks, resource.metadata.namespace,
                              self.spec.display_type or self.spec.resource_type, resource.metadata.id,
                              resource.metadata.version, *cells])  # fmt: skip
        self.written += 1

    def flush(self, *, header: bool) -> None:
        from ichor.client import render_table

        if self.output == "table" and (self.rows or header):
            click.echo(render_table([self.header, *self.rows] if header else self.rows), nl=False)
        self.rows = []
        sys.stdout.flush()


async def _watch_node(talos: Any, node: str, writer: _Writer, args: tuple[str, str | None, str]) -> None:
    """Stream one node's events into ``writer``: contents as one table, then each change as it comes."""
    from ichor.client import WatchEndedError

    resource_type, resource_id, namespace = args
    bound = talos.with_node(node)
    writer.use(await bound.resource_definition(resource_type))
    first = True
    try:
        async for event in bound.watch(resource_type, resource_id, namespace=namespace or None):
            if event.kind == "bootstrapped":
                writer.flush(header=first)
                first = False
                continue
            writer.write(node, event.resource.raw, event.kind)
            if resource_id is not None or not first:
                writer.flush(header=first)
                first = False
    except WatchEndedError as exc:
        node_error(exc)


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
    if output not in ("table", "yaml", "json") and not output.startswith("jsonpath="):
        raise click.BadParameter(
            f"unknown output {output!r}: use table, yaml, json or jsonpath=<expr>", param_hint="-o/--output"
        )
    if output.startswith("jsonpath="):
        from ichor.machinery.jsonpath import JSONPathError, parse_template

        try:
            parse_template(output.removeprefix("jsonpath="))
        except JSONPathError as exc:
            raise click.BadParameter(
                f"{exc} (supported: .field, ['field'], [n], [*], [start:end], e.g. jsonpath='{{.spec.hostname}}')",
                param_hint="-o/--output",
            ) from None
    writer = _Writer(output, with_events=watch)

    async def work(talos: Any) -> None:
        nodes = talos.client.nodes or [talos.client.peer_host]
        if watch:
            async with asyncio.TaskGroup() as tg:
                for node in nodes:
                    tg.create_task(_watch_node(talos, node, writer, (resource_type, resource_id, namespace)))
            return
        from ichor.client import ResourceNotFoundError

        found = report(await talos.get(resource_type, resource_id, namespace=namespace or None))
        failed = {e.node for e in found.errors if not isinstance(e, ResourceNotFoundError)}
        answered = [n for n in nodes if n not in failed]
        if answered:  # the definition is cached: this asks the node nothing more
            writer.use(await talos.with_node(answered[0]).resource_definition(resource_type))
        for resource in found:
            writer.write(resource.node, resource.raw)
        writer.flush(header=bool(answered))

    try:
        run_talos(work, insecure=insecure)
    except KeyboardInterrupt:  # the way a watch ends
        writer.flush(header=False)
