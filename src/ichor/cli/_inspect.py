"""``talosctl inspect dependencies [--with-resources]``: the node's controller graph as Graphviz DOT.

Controllers are boxes and resource types notes; an input is an edge from the type to the
controller (solid when strong, dotted when weak, labelled with the watched id if it names one) and
an output a bold edge from the controller to the type. ``--with-resources`` lists the live
resources of every type in the graph and draws each one (``namespace/type/id``) inside a cluster
per type: outputs link a controller to the resources it owns, inputs link the resources it reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

from ichor.api.gen.inspectapi.inspect_pb2 import MANAGES, STRONG, WEAK
from ichor.cli._dot import DotGraph
from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import replies, run

_NOTE = {"shape": "note", "fillcolor": "azure2", "style": "filled"}

HELP = """Inspect controller-resource dependencies as graphviz graph.

Pipe the output of the command through the "dot" program (part of graphviz package)
to render the graph:

\b
  talosctl inspect dependencies | dot -Tpng > graph.png
"""


def render_dependencies(edges: Iterable[Any], resources: Mapping[str, Sequence[Any]] | None = None) -> str:
    """The DOT text of ``inspect.ControllerDependencyEdge`` s; with ``resources`` (type ->
    ``cosi.resource.Resource`` s) the live resources are drawn instead of the bare types."""
    edges = list(edges)
    graph = DotGraph()
    if resources is None:
        for edge in edges:
            graph.node(edge.controller_name, shape="box")
            graph.node(edge.resource_type, **_NOTE)
        for edge in edges:
            controller, rtype = graph.node(edge.controller_name), graph.node(edge.resource_type)
            labels = [edge.resource_id] if edge.resource_id else []
            if edge.edge_type == MANAGES:
                graph.edge(controller, rtype, style="bold")
            elif edge.edge_type == STRONG:
                graph.edge(rtype, controller, *labels, style="solid")
            elif edge.edge_type == WEAK:
                graph.edge(rtype, controller, *labels, style="dotted")
        return graph.render()
    for edge in edges:
        graph.node(edge.controller_name, shape="box")
    for rtype in sorted(resources):
        cluster = graph.subgraph(rtype, cluster=True)
        for resource in resources[rtype]:
            cluster.node(_resource_name(resource), **_NOTE)
    for edge in edges:
        controller = graph.node(edge.controller_name)
        for resource in resources.get(edge.resource_type, ()):
            meta = resource.metadata
            if edge.resource_id and meta.id != edge.resource_id:
                continue
            if edge.edge_type == MANAGES and meta.owner != edge.controller_name:
                continue
            node = graph.subgraph(edge.resource_type).node(_resource_name(resource))
            if edge.edge_type == MANAGES:
                graph.edge(controller, node, style="solid")
            elif edge.edge_type == STRONG:
                graph.edge(node, controller, style="solid")
            elif edge.edge_type == WEAK:
                graph.edge(node, controller, style="dotted")
    return graph.render()


def _resource_name(resource: Any) -> str:
    meta = resource.metadata
    return f"{meta.namespace}/{meta.type}/{meta.id}"


@click.group("inspect", help="Inspect internals of Talos")
def inspect() -> None:
    pass


@inspect.command("dependencies", cls=CobraCommand, help=HELP)
@click.option(
    "--with-resources/--no-with-resources",
    default=False,
    help="display live resource information with dependencies",
)
def dependencies(with_resources: bool) -> None:
    from google.protobuf.empty_pb2 import Empty

    async def work(client: Any) -> str:
        node = client.require_single_node("inspect dependencies")
        reply = await client.inspect.ControllerRuntimeDependencies(Empty())
        edges = [edge for _, message in replies(client, reply, "error getting controller runtime dependencies")
                 for edge in message.edges]  # fmt: skip
        if not with_resources:
            return render_dependencies(edges)
        bound = client.with_node(node)
        resources: dict[str, list[Any]] = {}
        for edge in edges:
            if edge.resource_type not in resources:
                resources[edge.resource_type] = await bound.list_resources(
                    edge.resource_namespace, edge.resource_type
                )
        return render_dependencies(edges, {t: found for t, found in resources.items() if found})

    click.echo(run(work), nl=False)
