"""The COSI State service over a real grpclib server on a unix socket, as talosctl uses it.

Clients are the generated ``StateStub`` sending the requests talosctl (COSI runtime v0.4.1) sends;
the caller's roles travel in ``talos-role`` metadata, as apid passes them to machined.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.v1alpha1 import meta_pb2, resource_pb2, state_grpc, state_pb2
from ichor.machined.cosi import (
    WAIT_STATUSES,
    AlreadyExistsError,
    ConflictError,
    CosiError,
    NotFoundError,
    OwnerConflictError,
    PendingFinalizersError,
    PhaseConflictError,
    Registry,
    State,
)
from ichor.machined.resources import (
    MACHINE_CONFIGS,
    MACHINE_STATUSES,
    SERVICES,
    MachineConfigSpec,
    MachineStage,
    MachineStatusSpec,
    ServiceSpec,
    register_node_types,
)
from ichor.machined.server._cosi import RolesOf, StateService, fixed_roles, roles_from_metadata
from ichor.machined.server._errors import grpc_status_of, to_grpc_error
from ichor.machinery.yamlio import load_documents, to_plain

TIMEOUT = 10.0
NOW = datetime(2024, 8, 6, 12, 30, 15, 250000, tzinfo=UTC)
READER = {"talos-role": "os:reader"}
ADMIN = {"talos-role": "os:admin"}
CONFIG_TEXT = "# my node\nversion: v1alpha1\nmachine:\n    type: controlplane\n    token: secret.token\n"


@pytest.fixture
def registry() -> Registry:
    reg = Registry([WAIT_STATUSES])
    register_node_types(reg)
    return reg


@pytest.fixture
def state(registry: Registry) -> State:
    st = State(clock=lambda: NOW)
    registry.publish(st)
    st.create(
        SERVICES.new("machined", ServiceSpec(running=True, healthy=True), labels={"role": "core"}),
        owner="v1alpha1.ServiceController",
    )
    st.create(SERVICES.new("apid", ServiceSpec(running=True), labels={"role": "api"}))
    st.create(MACHINE_STATUSES.new("machine", MachineStatusSpec(stage=MachineStage.BOOTING)))
    st.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(CONFIG_TEXT)))
    return st


@asynccontextmanager
async def serving(
    state: State, roles_of: RolesOf = roles_from_metadata
) -> AsyncIterator[state_grpc.StateStub]:
    # A short private directory: unix socket paths are limited to ~108 bytes.
    with tempfile.TemporaryDirectory(prefix="ichor-cosi-") as tmp:
        path = str(Path(tmp) / "machine.sock")
        server = Server([StateService(state, roles_of=roles_of)])
        async with asyncio.timeout(TIMEOUT):
            await server.start(path=path)
        channel = Channel(path=path)
        try:
            yield state_grpc.StateStub(channel)
        finally:
            channel.close()
            server.close()
            async with asyncio.timeout(TIMEOUT):
                await server.wait_closed()


def run(scenario: Any) -> None:
    asyncio.run(scenario())


async def get(
    stub: state_grpc.StateStub, ns: str, type: str, id: str, md: Any = READER
) -> resource_pb2.Resource:
    async with asyncio.timeout(TIMEOUT):
        reply = await stub.Get(
            state_pb2.GetRequest(namespace=ns, type=type, id=id, options=state_pb2.GetOptions()), metadata=md
        )
    return reply.resource


async def list_(
    stub: state_grpc.StateStub, ns: str, type: str, md: Any = READER, **options: Any
) -> list[resource_pb2.Resource]:
    request = state_pb2.ListRequest(namespace=ns, type=type, options=state_pb2.ListOptions(**options))
    async with asyncio.timeout(TIMEOUT):
        return [reply.resource for reply in await stub.List(request, metadata=md)]


async def recv(stream: Any) -> state_pb2.WatchResponse:
    async with asyncio.timeout(TIMEOUT):
        message = await stream.recv_message()
    assert message is not None, "watch ended early"
    assert isinstance(message, state_pb2.WatchResponse)
    return message


async def recv_event(stream: Any) -> state_pb2.Event:
    message = await recv(stream)
    assert len(message.event) == 1, message
    return message.event[0]


def yaml_of(resource: resource_pb2.Resource) -> Any:
    return to_plain(load_documents(resource.spec.yaml_spec)[0])


def kind_watch(type: str, ns: str = "runtime", **options: Any) -> state_pb2.WatchRequest:
    api_version = options.pop("api_version", 1)
    return state_pb2.WatchRequest(
        namespace=ns,
        type=type,
        options=state_pb2.WatchOptions(bootstrap_contents=True, **options),
        api_version=api_version,
    )


# --------------------------------------------------------------------------- Get / List


def test_get_encodes_resource_as_cosi(state: State) -> None:
    state.add_finalizer("runtime", SERVICES, "machined", "k8s.Something")
    stored = state.get("runtime", SERVICES, "machined")
    state.update(stored.with_spec(stored.spec), owner="v1alpha1.ServiceController")  # version 3, same spec

    async def scenario() -> None:
        async with serving(state) as stub:
            r = await get(stub, "runtime", SERVICES.type, "machined")
            meta = r.metadata
            assert (meta.namespace, meta.type, meta.id) == (
                "runtime",
                "Services.v1alpha1.talos.dev",
                "machined",
            )
            assert (meta.version, meta.phase, meta.owner) == ("3", "running", "v1alpha1.ServiceController")
            assert meta.created.ToDatetime(tzinfo=UTC) == NOW
            assert meta.updated.ToDatetime(tzinfo=UTC) == NOW
            assert list(meta.finalizers) == ["k8s.Something"]
            assert dict(meta.labels) == {"role": "core"}
            assert r.HasField("spec")
            assert yaml_of(r) == {"running": True, "healthy": True, "unknown": False}
            assert r.spec.proto_spec == ServiceSpec(running=True, healthy=True).proto_spec()

    run(scenario)


def test_get_missing_resource_is_not_found_with_cosi_message(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub:
            with pytest.raises(GRPCError) as err:
                await get(stub, "runtime", SERVICES.type, "etcd")
            assert err.value.status is Status.NOT_FOUND
            assert (
                err.value.message
                == "resource Services.v1alpha1.talos.dev(runtime/etcd@undefined) doesn't exist"
            )

    run(scenario)


def test_list_is_sorted_by_id_and_filters_by_labels_and_id(state: State) -> None:
    LT = resource_pb2.LabelTerm

    async def scenario() -> None:
        async with serving(state) as stub:
            assert [r.metadata.id for r in await list_(stub, "runtime", SERVICES.type)] == [
                "apid",
                "machined",
            ]
            core = resource_pb2.LabelQuery(terms=[LT(key="role", op=LT.EQUAL, value=["core"])])
            assert [
                r.metadata.id for r in await list_(stub, "runtime", SERVICES.type, label_query=[core])
            ] == ["machined"]
            inverted = resource_pb2.LabelQuery(terms=[LT(key="role", op=LT.IN, value=["core"], invert=True)])
            assert [
                r.metadata.id for r in await list_(stub, "runtime", SERVICES.type, label_query=[inverted])
            ] == ["apid"]
            by_id = resource_pb2.IDQuery(regexp="^ap")
            assert [r.metadata.id for r in await list_(stub, "runtime", SERVICES.type, id_query=by_id)] == [
                "apid"
            ]
            assert await list_(stub, "runtime", "TimeStatuses.v1alpha1.talos.dev") == []
            with pytest.raises(GRPCError) as err:
                await list_(stub, "runtime", SERVICES.type, id_query=resource_pb2.IDQuery(regexp="("))
            assert err.value.status is Status.INVALID_ARGUMENT

    run(scenario)


def test_resource_definitions_decode_as_resource_definition_specs(state: State, registry: Registry) -> None:
    async def scenario() -> None:
        async with serving(state) as stub:
            rds = await list_(stub, "meta", "ResourceDefinitions.meta.cosi.dev")
            assert [r.metadata.id for r in rds] == [d.id for d in registry.definitions()]
            for r in rds:
                spec = meta_pb2.ResourceDefinitionSpec.FromString(r.spec.proto_spec)
                doc = yaml_of(r)
                assert r.metadata.phase == "running" and r.metadata.version.isdigit()
                assert r.metadata.id == spec.resource_type.lower()
                assert spec.resource_type == doc["type"]
                assert spec.display_type == doc["displayType"]
                assert spec.default_namespace == doc["defaultNamespace"]
                assert list(spec.aliases) == doc["aliases"]
                assert list(spec.all_aliases) == doc["allAliases"]
                assert [{"name": c.name, "jsonPath": c.json_path} for c in spec.print_columns] == doc[
                    "printColumns"
                ]
                sensitive = spec.sensitivity == meta_pb2.ResourceDefinitionSpec.SENSITIVE
                assert sensitive == (doc.get("sensitivity") == "sensitive")
            by_type = {
                meta_pb2.ResourceDefinitionSpec.FromString(r.spec.proto_spec).resource_type: r for r in rds
            }
            mc = meta_pb2.ResourceDefinitionSpec.FromString(by_type[MACHINE_CONFIGS.type].spec.proto_spec)
            assert mc.sensitivity == meta_pb2.ResourceDefinitionSpec.SENSITIVE
            assert list(mc.all_aliases) == [
                "machineconfigs",
                "machineconfigs.config",
                "machineconfigs.config.talos",
                "machineconfig",
                "mc",
                "mcs",
            ]

            namespaces = await list_(stub, "meta", "Namespaces.meta.cosi.dev")
            descriptions = {
                r.metadata.id: meta_pb2.NamespaceSpec.FromString(r.spec.proto_spec).description
                for r in namespaces
            }
            assert descriptions["config"] == "Talos node configuration."
            assert yaml_of(next(r for r in namespaces if r.metadata.id == "secrets")) == {
                "description": "Resources with secret material."
            }

    run(scenario)


# --------------------------------------------------------------------------- Watch


def test_kind_watch_sequence(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub, stub.Watch.open(metadata=READER) as stream:
            await stream.send_message(kind_watch(SERVICES.type), end=True)
            ready = await recv(stream)
            assert ready == state_pb2.WatchResponse() and ready.ByteSize() == 0

            first, second = await recv_event(stream), await recv_event(stream)
            assert [(e.event_type, e.resource.metadata.id) for e in (first, second)] == [
                (state_pb2.CREATED, "apid"),
                (state_pb2.CREATED, "machined"),
            ]
            assert first.resource.spec.yaml_spec

            marker = await recv_event(stream)
            assert marker.event_type == state_pb2.BOOTSTRAPPED
            tomb = marker.resource.metadata
            assert (tomb.namespace, tomb.type, tomb.id, tomb.version) == (
                "runtime",
                SERVICES.type,
                "",
                "undefined",
            )
            assert marker.resource.HasField("spec") and marker.resource.spec.yaml_spec == ""

            current = state.get("runtime", SERVICES, "apid")
            state.update(current.with_spec(ServiceSpec(running=True, healthy=True)))
            updated = await recv_event(stream)
            assert updated.event_type == state_pb2.UPDATED
            assert (updated.resource.metadata.version, updated.old.metadata.version) == ("2", "1")
            assert yaml_of(updated.resource)["healthy"] is True and yaml_of(updated.old)["healthy"] is False

            state.destroy("runtime", SERVICES, "apid")
            destroyed = await recv_event(stream)
            assert (destroyed.event_type, destroyed.resource.metadata.id) == (state_pb2.DESTROYED, "apid")
            assert destroyed.resource.spec.yaml_spec
            await stream.cancel()

    run(scenario)


def test_single_resource_watch_starts_with_tombstone_when_missing(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub, stub.Watch.open(metadata=READER) as stream:
            request = state_pb2.WatchRequest(
                namespace="runtime",
                type=SERVICES.type,
                id="etcd",
                options=state_pb2.WatchOptions(),
                api_version=1,
            )
            await stream.send_message(request, end=True)
            assert (await recv(stream)).ByteSize() == 0
            gone = await recv_event(stream)
            assert gone.event_type == state_pb2.DESTROYED
            assert (gone.resource.metadata.id, gone.resource.metadata.version) == ("etcd", "undefined")
            assert gone.resource.HasField("spec")

            state.create(SERVICES.new("apid-other", ServiceSpec()))  # another id: not delivered
            state.create(SERVICES.new("etcd", ServiceSpec(running=True)))
            created = await recv_event(stream)
            assert (created.event_type, created.resource.metadata.id) == (state_pb2.CREATED, "etcd")
            assert created.resource.metadata.version == "1"
            await stream.cancel()

    run(scenario)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_contents": True}, "bootstrap contents is not implemented for resource watch"),
        (
            {"label_query": [resource_pb2.LabelQuery(terms=[resource_pb2.LabelTerm(key="a")])]},
            "label query is not implemented for resource watch",
        ),
    ],
)
def test_single_resource_watch_refuses_kind_options(state: State, options: Any, message: str) -> None:
    async def scenario() -> None:
        async with serving(state) as stub:
            request = state_pb2.WatchRequest(
                namespace="runtime",
                type=SERVICES.type,
                id="apid",
                options=state_pb2.WatchOptions(**options),
                api_version=1,
            )
            with pytest.raises(GRPCError) as err:
                async with asyncio.timeout(TIMEOUT):
                    await stub.Watch(request, metadata=READER)
            assert (err.value.status, err.value.message) == (Status.UNIMPLEMENTED, message)

    run(scenario)


def test_api_version_0_gets_no_bootstrapped_marker(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub, stub.Watch.open(metadata=READER) as stream:
            await stream.send_message(kind_watch(MACHINE_STATUSES.type, api_version=0), end=True)
            assert (await recv(stream)).ByteSize() == 0
            assert (await recv_event(stream)).event_type == state_pb2.CREATED
            current = state.get("runtime", MACHINE_STATUSES, "machine")
            state.update(current.with_spec(MachineStatusSpec(stage=MachineStage.RUNNING)))
            assert (await recv_event(stream)).event_type == state_pb2.UPDATED
            await stream.cancel()

    run(scenario)


def test_aggregated_watch_sends_initial_contents_in_one_message(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub, stub.Watch.open(metadata=READER) as stream:
            await stream.send_message(kind_watch(SERVICES.type, aggregated=True), end=True)
            assert (await recv(stream)).ByteSize() == 0
            batch = await recv(stream)
            assert [e.event_type for e in batch.event] == [
                state_pb2.CREATED,
                state_pb2.CREATED,
                state_pb2.BOOTSTRAPPED,
            ]
            await stream.cancel()

    run(scenario)


def test_watch_that_falls_behind_gets_errored_and_ends(registry: Registry) -> None:
    small = State(clock=lambda: NOW, history=2)
    registry.publish(small)

    async def scenario() -> None:
        async with serving(small) as stub, stub.Watch.open(metadata=READER) as stream:
            await stream.send_message(kind_watch(SERVICES.type), end=True)
            assert (await recv(stream)).ByteSize() == 0
            assert (await recv_event(stream)).event_type == state_pb2.BOOTSTRAPPED
            # No await between writes: the server cannot read them before they leave the history.
            small.create(SERVICES.new("apid", ServiceSpec()))
            for healthy in (True, False, True):
                current = small.get("runtime", SERVICES, "apid")
                small.update(current.with_spec(ServiceSpec(healthy=healthy)))
            errored = await recv_event(stream)
            assert errored.event_type == state_pb2.ERRORED
            assert errored.HasField("error") and "buffer overrun" in errored.error
            assert not errored.HasField("resource")
            async with asyncio.timeout(TIMEOUT):
                assert await stream.recv_message() is None

    run(scenario)


# --------------------------------------------------------------------------- access policy


def test_sensitive_type_needs_admin(state: State) -> None:
    async def scenario() -> None:
        async with serving(state) as stub:
            for call in (
                get(stub, "config", MACHINE_CONFIGS.type, "v1alpha1"),
                list_(stub, "config", MACHINE_CONFIGS.type),
                stub.Watch(kind_watch(MACHINE_CONFIGS.type, ns="config"), metadata=READER),
            ):
                with pytest.raises(GRPCError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await call
                assert (err.value.status, err.value.message) == (Status.PERMISSION_DENIED, "not authorized")

            config = await get(stub, "config", MACHINE_CONFIGS.type, "v1alpha1", md=ADMIN)
            assert config.spec.yaml_spec == CONFIG_TEXT

    run(scenario)


def test_roles_are_injectable_and_metadata_is_ignored_then(state: State) -> None:
    async def scenario() -> None:
        async with serving(state, roles_of=fixed_roles("os:reader")) as stub:
            assert (await get(stub, "runtime", SERVICES.type, "apid", md=None)).metadata.id == "apid"
            with pytest.raises(GRPCError) as err:
                await get(stub, "config", MACHINE_CONFIGS.type, "v1alpha1", md=ADMIN)
            assert err.value.status is Status.PERMISSION_DENIED

    run(scenario)


@pytest.mark.parametrize(
    ("md", "ns", "type", "message"),
    [
        (None, "runtime", SERVICES.type, "not authorized"),
        ({"talos-role": "os:etcd:backup"}, "runtime", SERVICES.type, "not authorized"),
        (READER, "runtime", "Bogus.example.dev", 'resource type "Bogus.example.dev" is not supported'),
        (READER, "nope", SERVICES.type, 'namespace "nope" is not supported'),
    ],
)
def test_reads_refused_as_talos_refuses_them(state: State, md: Any, ns: str, type: str, message: str) -> None:
    async def scenario() -> None:
        async with serving(state) as stub:
            with pytest.raises(GRPCError) as err:
                await get(stub, ns, type, "apid", md=md)
            assert (err.value.status, err.value.message) == (Status.PERMISSION_DENIED, message)

    run(scenario)


@pytest.mark.parametrize(
    ("md", "message"), [(ADMIN, "write access is not allowed"), (READER, "not authorized")]
)
def test_writes_are_refused_and_change_nothing(state: State, md: Any, message: str) -> None:
    before = state.get("runtime", SERVICES, "apid")
    wire = resource_pb2.Resource(
        metadata=resource_pb2.Metadata(namespace="runtime", type=SERVICES.type, id="apid", version="1"),
        spec=resource_pb2.Spec(yaml_spec="running: false\n"),
    )

    async def scenario() -> None:
        async with serving(state) as stub:
            calls = (
                stub.Create(state_pb2.CreateRequest(resource=wire), metadata=md),
                stub.Update(state_pb2.UpdateRequest(new_resource=wire), metadata=md),
                stub.Destroy(
                    state_pb2.DestroyRequest(namespace="runtime", type=SERVICES.type, id="apid"), metadata=md
                ),
            )
            for call in calls:
                with pytest.raises(GRPCError) as err:
                    async with asyncio.timeout(TIMEOUT):
                        await call
                assert (err.value.status, err.value.message) == (Status.PERMISSION_DENIED, message)

    run(scenario)
    assert state.get("runtime", SERVICES, "apid") == before


# --------------------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFoundError("x"), Status.NOT_FOUND),
        (OwnerConflictError("x"), Status.PERMISSION_DENIED),
        (PhaseConflictError("x"), Status.INVALID_ARGUMENT),
        (AlreadyExistsError("x"), Status.ALREADY_EXISTS),
        (PendingFinalizersError("x"), Status.FAILED_PRECONDITION),
        (ConflictError("x"), Status.FAILED_PRECONDITION),
        (CosiError("x"), Status.UNKNOWN),
    ],
)
def test_cosi_errors_map_to_cosi_server_codes(error: CosiError, status: Status) -> None:
    assert grpc_status_of(error) is status
    converted = to_grpc_error(error)
    assert (converted.status, converted.message) == (status, "x")


def test_yaml_spec_follows_every_change_of_a_served_resource() -> None:
    """Rendered YAML is reused only for the very same frozen spec object."""
    import dataclasses

    from ichor.machined.cosi import Metadata, Resource
    from ichor.machined.server._cosi import resource_to_proto

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        name: str

    @dataclasses.dataclass
    class Mutable:
        name: str

    def yaml_of(spec: Any) -> str:
        meta = Metadata(namespace="runtime", type="Tests.ichor.dev", id="x", version=1)
        return str(resource_to_proto(Resource(meta, spec)).spec.yaml_spec)

    first = Frozen("one")
    assert yaml_of(first) == yaml_of(first) == "name: one\n"
    assert yaml_of(Frozen("two")) == "name: two\n"  # a new version is a new spec object
    mutable = Mutable("three")
    assert yaml_of(mutable) == "name: three\n"
    mutable.name = "four"
    assert yaml_of(mutable) == "name: four\n"
