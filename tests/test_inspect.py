"""``talosctl inspect dependencies``: machined's InspectService over a real grpclib server, and the DOT
talosctl renders from its edges (checked by Graphviz itself when ``dot`` is installed)."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from google.protobuf.empty_pb2 import Empty
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.inspectapi import inspect_grpc, inspect_pb2
from ichor.api.gen.v1alpha1 import resource_pb2
from ichor.cli._inspect import render_dependencies
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    InputKind,
    Output,
    OutputKind,
    ResourceType,
    Runtime,
    State,
    TransformController,
)
from ichor.machined.server._cosi import roles_from_metadata
from ichor.machined.server._inspect import InspectService
from ichor.machinery import proc

TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True)
class Spec:
    value: str = ""


CONFIGS = ResourceType("MachineConfigs.config.talos.dev", "config", Spec)
HOSTNAMES = ResourceType("HostnameStatuses.net.talos.dev", "network", Spec)
ADDRESSES = ResourceType("NodeAddresses.net.talos.dev", "network", Spec)
MEMBERS = ResourceType("Members.cluster.talos.dev", "cluster", Spec)


class AddressController(Controller):
    """A hand-written controller: a strong input, a weak one in another namespace, a shared output."""

    name = "network.NodeAddressController"
    inputs = (
        Input(HOSTNAMES, kind=InputKind.STRONG),
        Input(MEMBERS, namespace="cluster-raw", id="self"),
    )
    outputs = (Output(ADDRESSES, OutputKind.SHARED),)

    async def run(self, ctx: ControllerContext) -> None:
        await asyncio.Event().wait()


def fake_runtime() -> Runtime:
    runtime = Runtime(State())
    runtime.register(
        TransformController(
            "network.HostnameController",
            inputs=[Input(CONFIGS, id="v1alpha1")],
            output=HOSTNAMES,
            map_inputs=lambda ctx: {},
        )
    )
    runtime.register(AddressController())
    return runtime


@asynccontextmanager
async def serving(runtime: Runtime) -> AsyncIterator[inspect_grpc.InspectServiceStub]:
    with tempfile.TemporaryDirectory(prefix="ichor-inspect-") as tmp:
        path = str(Path(tmp) / "machine.sock")
        server = Server([InspectService(runtime, roles_of=roles_from_metadata)])
        await server.start(path=path)
        channel = Channel(path=path)
        try:
            yield inspect_grpc.InspectServiceStub(channel)
        finally:
            channel.close()
            server.close()
            await server.wait_closed()


def edge_tuples(
    reply: inspect_pb2.ControllerRuntimeDependenciesResponse,
) -> list[tuple[str, int, str, str, str]]:
    (message,) = reply.messages
    return [
        (e.controller_name, e.edge_type, e.resource_namespace, e.resource_type, e.resource_id)
        for e in message.edges
    ]


def test_every_controller_appears_with_its_declared_inputs_and_outputs() -> None:
    async def go() -> list[tuple[str, int, str, str, str]]:
        async with asyncio.timeout(TIMEOUT), serving(fake_runtime()) as stub:
            reply = await stub.ControllerRuntimeDependencies(Empty(), metadata={"talos-role": "os:reader"})
            return edge_tuples(reply)

    assert asyncio.run(go()) == [
        ("network.HostnameController", inspect_pb2.WEAK, "config", CONFIGS.type, "v1alpha1"),
        ("network.HostnameController", inspect_pb2.MANAGES, "network", HOSTNAMES.type, ""),
        ("network.NodeAddressController", inspect_pb2.STRONG, "network", HOSTNAMES.type, ""),
        ("network.NodeAddressController", inspect_pb2.WEAK, "cluster-raw", MEMBERS.type, "self"),
        ("network.NodeAddressController", inspect_pb2.MANAGES, "network", ADDRESSES.type, ""),
    ]


@pytest.mark.parametrize("role", ["os:admin", "os:operator", "os:reader"])
def test_reading_roles_may_inspect_and_others_may_not(role: str) -> None:
    async def go() -> None:
        async with asyncio.timeout(TIMEOUT), serving(fake_runtime()) as stub:
            reply = await stub.ControllerRuntimeDependencies(Empty(), metadata={"talos-role": role})
            assert len(reply.messages[0].edges) == 5
            with pytest.raises(GRPCError) as denied:
                await stub.ControllerRuntimeDependencies(Empty(), metadata={"talos-role": "os:etcd:backup"})
            assert denied.value.status is Status.PERMISSION_DENIED

    asyncio.run(go())


def _edges() -> list[inspect_pb2.ControllerDependencyEdge]:
    E = inspect_pb2.ControllerDependencyEdge
    return [
        E(controller_name="network.HostnameController", edge_type=inspect_pb2.WEAK,
          resource_namespace="config", resource_type=CONFIGS.type, resource_id="v1alpha1"),
        E(controller_name="network.HostnameController", edge_type=inspect_pb2.MANAGES,
          resource_namespace="network", resource_type=HOSTNAMES.type),
        E(controller_name="network.NodeAddressController", edge_type=inspect_pb2.STRONG,
          resource_namespace="network", resource_type=HOSTNAMES.type),
    ]  # fmt: skip


def test_dot_has_controllers_as_boxes_types_as_notes_and_styled_edges() -> None:
    assert render_dependencies(_edges()) == (
        "digraph  {\n"
        "\t\n"
        '\tn3[fillcolor="azure2",label="HostnameStatuses.net.talos.dev",shape="note",style="filled"];\n'
        '\tn2[fillcolor="azure2",label="MachineConfigs.config.talos.dev",shape="note",style="filled"];\n'
        '\tn1[label="network.HostnameController",shape="box"];\n'
        '\tn4[label="network.NodeAddressController",shape="box"];\n'
        '\tn3->n4[style="solid"];\n'
        '\tn2->n1[label="v1alpha1",style="dotted"];\n'
        '\tn1->n3[style="bold"];\n'
        "\t\n"
        "}\n"
    )


def _resource(ns: str, type: str, id: str, owner: str = "") -> resource_pb2.Resource:
    return resource_pb2.Resource(metadata=resource_pb2.Metadata(namespace=ns, type=type, id=id, owner=owner))


def test_dot_with_resources_draws_each_resource_in_a_cluster_per_type() -> None:
    resources = {
        CONFIGS.type: [_resource("config", CONFIGS.type, "v1alpha1"), _resource("config", CONFIGS.type, "x")],
        HOSTNAMES.type: [
            _resource("network", HOSTNAMES.type, "hostname", owner="network.HostnameController")
        ],
    }
    dot = render_dependencies(_edges(), resources)
    lines = dot.splitlines()
    assert lines[0] == "digraph  {"
    assert "\tsubgraph cluster_s3 {" in lines and "\tsubgraph cluster_s5 {" in lines
    assert '\t\tlabel="HostnameStatuses.net.talos.dev";' in lines
    note = 'fillcolor="azure2",label="config/MachineConfigs.config.talos.dev/x",shape="note",style="filled"'
    assert f"\t\tn7[{note}];" in lines
    # Only the resource the input names is linked; the output links the resource the controller owns.
    assert '\tn6->n1[style="dotted"];' in lines  # config/.../v1alpha1 -> HostnameController
    assert '\tn1->n4[style="solid"];' in lines  # HostnameController -> network/.../hostname
    assert '\tn4->n2[style="solid"];' in lines  # hostname -> NodeAddressController (strong)
    assert not any("n7->" in line or "->n7" in line for line in lines)  # config "x" is read by nobody


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
@pytest.mark.parametrize("with_resources", [False, True])
def test_graphviz_renders_the_dot(tmp_path: Path, with_resources: bool) -> None:
    resources = {
        HOSTNAMES.type: [_resource("network", HOSTNAMES.type, "hostname", "network.HostnameController")]
    }
    (tmp_path / "graph.dot").write_text(render_dependencies(_edges(), resources if with_resources else None))
    done = proc.run(
        ["dot", "-Tsvg", "-o", str(tmp_path / "graph.svg"), str(tmp_path / "graph.dot")], timeout=30
    )
    assert done.exit_code == 0
    assert "network.HostnameController" in (tmp_path / "graph.svg").read_text()
