"""machined's ``inspect.InspectService``: the live controller graph behind ``talosctl inspect dependencies``.

The graph is read from the controller runtime as registered, one edge per declared input (``WEAK``
or ``STRONG``, with the watched id if the input names one) and one ``MANAGES`` edge per declared
output. This module renders nothing: talosctl turns the edges into Graphviz DOT.
"""

from __future__ import annotations

__all__ = ["InspectService", "dependency_edges"]

from collections.abc import Iterable
from typing import Any

from grpclib.server import Stream

from ichor.api.gen.inspectapi import inspect_grpc, inspect_pb2
from ichor.machined import authz
from ichor.machined.cosi import Controller, InputKind, Runtime
from ichor.machined.server._cosi import RolesOf

_METHOD = "/inspect.InspectService/ControllerRuntimeDependencies"

_INPUT_EDGES = {InputKind.WEAK: inspect_pb2.WEAK, InputKind.STRONG: inspect_pb2.STRONG}


def dependency_edges(controllers: Iterable[Controller]) -> list[inspect_pb2.ControllerDependencyEdge]:
    """Each controller's inputs, then its outputs, in registration and declaration order."""
    edges = []
    for controller in controllers:
        for inp in controller.inputs:
            edges.append(
                inspect_pb2.ControllerDependencyEdge(
                    controller_name=controller.name,
                    edge_type=_INPUT_EDGES[inp.kind],
                    resource_namespace=inp.ns,
                    resource_type=inp.type.type,
                    resource_id=inp.id or "",
                )
            )
        for out in controller.outputs:
            edges.append(
                inspect_pb2.ControllerDependencyEdge(
                    controller_name=controller.name,
                    edge_type=inspect_pb2.MANAGES,
                    resource_namespace=out.ns,
                    resource_type=out.type.type,
                )
            )
    return edges


class InspectService(inspect_grpc.InspectServiceBase):
    """Serves the graph of ``runtime``; the caller needs a reading role (admin, operator, reader)."""

    def __init__(self, runtime: Runtime, *, roles_of: RolesOf) -> None:
        self._runtime = runtime
        self._roles_of = roles_of

    async def ControllerRuntimeDependencies(self, stream: Stream[Any, Any]) -> None:
        authz.check(_METHOD, self._roles_of(stream))
        await stream.recv_message()
        dependency = inspect_pb2.ControllerRuntimeDependency(
            edges=dependency_edges(self._runtime.registered())
        )
        await stream.send_message(inspect_pb2.ControllerRuntimeDependenciesResponse(messages=[dependency]))
