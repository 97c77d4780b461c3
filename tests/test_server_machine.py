"""machined's MachineService over a real grpclib server on a unix socket (as apid reaches it)."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.machined import authz
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.server._machine import MachineService
from ichor.machined.services import RestartPolicy, Service, Supervisor, goroutine

TIMEOUT = 10


class FakeNode:
    def __init__(self, layout: Layout, supervisor: Supervisor) -> None:
        self.layout = layout
        self.supervisor = supervisor
        self.events = EventBus()
        self.reboots: list[str] = []

    def version(self) -> machine_pb2.Version:
        return machine_pb2.Version(version=machine_pb2.VersionInfo(tag="v1.7.6", os="linux"))

    def hostname(self) -> str:
        return "node-1"

    def process_root(self) -> int:
        import os

        return os.getpid()

    async def apply_configuration(self, request: machine_pb2.ApplyConfigurationRequest) -> Any:
        return machine_pb2.ApplyConfiguration(mode_details="ok")

    def generate_client_configuration(self, roles: list[str], ttl: timedelta) -> Any:
        return machine_pb2.GenerateClientConfiguration(crt=b"x")

    def request_reboot(self, actor_id: str, mode: int) -> None:
        self.reboots.append(actor_id)
        self.events.publish(machine_pb2.SequenceEvent(sequence="reboot"), actor_id=actor_id)

    def request_shutdown(self, actor_id: str, force: bool) -> None:
        pass

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None:
        pass


async def _chatty(log: IO[str]) -> None:
    log.write("hello from chatty\n")
    log.flush()
    await asyncio.Event().wait()


class _WithRoles:
    """A stub whose every call carries ``talos-role`` metadata, as apid's forwarded calls do."""

    def __init__(self, stub: Any, roles: tuple[str, ...]) -> None:
        self._stub = stub
        self._metadata = [("talos-role", role) for role in roles]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        metadata = self._metadata

        class _Call:
            def __call__(self, request: Any) -> Any:
                return method(request, metadata=metadata)

            def open(self) -> Any:
                return method.open(metadata=metadata)

        return _Call()


@asynccontextmanager
async def serving(
    roles: tuple[str, ...] = ("os:admin",),
) -> AsyncIterator[tuple[Any, FakeNode]]:
    with tempfile.TemporaryDirectory() as tmp:
        layout = Layout(root=Path(tmp), address="127.5.0.2")
        layout.ensure()
        layout.console_log.write_text("[talos] booting\n[talos] ready\n")
        (layout.root / "var/log/hello.txt").write_text("hi\n")
        async with Supervisor(layout) as supervisor:
            supervisor.load(Service("chatty", goroutine(_chatty), restart=RestartPolicy.FOREVER))
            supervisor.start("chatty")
            await supervisor.wait_up(["chatty"], timeout=TIMEOUT)
            node = FakeNode(layout, supervisor)
            server = Server(
                [MachineService(node, roles_of=lambda stream: authz.roles_from_metadata(stream.metadata))]
            )
            path = str(Path(tmp) / "machine.sock")
            await server.start(path=path)
            channel = Channel(path=path)
            try:
                yield _WithRoles(machine_grpc.MachineServiceStub(channel), roles), node
            finally:
                channel.close()
                server.close()
                await server.wait_closed()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def test_version_hostname_and_services() -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, _):
            version = await stub.Version(machine_pb2.google_dot_protobuf_dot_empty__pb2.Empty())
            assert version.messages[0].version.tag == "v1.7.6"
            hostname = await stub.Hostname(machine_pb2.google_dot_protobuf_dot_empty__pb2.Empty())
            assert hostname.messages[0].hostname == "node-1"
            services = await stub.ServiceList(machine_pb2.google_dot_protobuf_dot_empty__pb2.Empty())
            (chatty,) = services.messages[0].services
            assert chatty.id == "chatty" and chatty.state == "Running"
            assert chatty.events.events[0].msg == "Starting service"

    run(go())


def test_reader_cannot_reboot_and_unknown_service_is_not_found() -> None:
    async def go() -> None:
        async with serving(("os:reader",)) as (stub, node):
            with pytest.raises(GRPCError) as denied:
                await stub.Reboot(machine_pb2.RebootRequest())
            assert denied.value.status is Status.PERMISSION_DENIED and node.reboots == []
        async with serving() as (stub, _):
            with pytest.raises(GRPCError) as missing:
                await stub.ServiceRestart(machine_pb2.ServiceRestartRequest(id="nope"))
            assert missing.value.status is Status.NOT_FOUND
            with pytest.raises(GRPCError) as unsupported:
                await stub.ServiceStop(machine_pb2.ServiceStopRequest(id="chatty"))
            assert "doesn't support stop operation via API" in str(unsupported.value.message)

    run(go())


def test_logs_dmesg_files_and_unimplemented() -> None:
    async def go() -> None:
        async with serving() as (stub, _):
            async with stub.Logs.open() as call:
                await call.send_message(
                    machine_pb2.LogsRequest(namespace="system", id="chatty", tail_lines=-1), end=True
                )
                chunks = [m.bytes async for m in call]
            assert b"hello from chatty" in b"".join(chunks)
            async with stub.Dmesg.open() as call:
                await call.send_message(machine_pb2.DmesgRequest(), end=True)
                lines = [m.bytes async for m in call]
            assert lines == [b"[talos] booting\n", b"[talos] ready\n"]
            async with stub.Read.open() as call:
                await call.send_message(machine_pb2.ReadRequest(path="/var/log/hello.txt"), end=True)
                assert b"".join([m.bytes async for m in call]) == b"hi\n"
            async with stub.List.open() as call:
                await call.send_message(machine_pb2.ListRequest(root="/var/log"), end=True)
                names = [m.relative_name async for m in call]
            assert names[0] == "." and "hello.txt" in names
            with pytest.raises(GRPCError) as info:
                await stub.Rollback(machine_pb2.RollbackRequest())
            assert info.value.status is Status.FAILED_PRECONDITION
            assert info.value.message == "method is not supported in container mode"

    run(go())


def test_events_start_with_hello_then_follow_actor() -> None:
    async def go() -> None:
        async with serving() as (stub, node):
            reboot = await stub.Reboot(machine_pb2.RebootRequest())
            actor = reboot.messages[0].actor_id
            assert node.reboots == [actor]
            async with stub.Events.open() as call:
                await call.send_message(
                    machine_pb2.EventsRequest(tail_events=-1, with_actor_id=actor), end=True
                )
                hello = await call.recv_message()
                assert hello is not None and hello.data.type_url == "" and hello.HasField("data")
                event = await call.recv_message()
                assert event is not None and event.actor_id == actor
                assert event.data.type_url == "talos/runtime/machine.SequenceEvent"
                await call.cancel()

    run(go())


def test_logs_serves_the_controller_runtime_log_with_tail() -> None:
    lines = [
        b'2024-05-01T12:00:00.000Z DEBUG controller starting {"controller": "network.HostnameController"}\n',
        b'2024-05-01T12:00:00.001Z ERROR controller failed {"controller": "network.HostnameController"}\n',
        b'2024-05-01T12:00:00.002Z DEBUG controller starting {"controller": "network.HostnameController"}\n',
    ]

    async def logs(stub: Any, tail: int) -> list[bytes]:
        async with stub.Logs.open() as call:
            request = machine_pb2.LogsRequest(namespace="system", id="controller-runtime", tail_lines=tail)
            await call.send_message(request, end=True)
            return [m.bytes async for m in call]

    async def go() -> None:
        async with serving(("os:reader",)) as (stub, node):
            assert await logs(stub, -1) == []  # nothing logged yet is an empty log, not an error
            node.layout.controller_runtime_log.write_bytes(b"".join(lines))
            assert await logs(stub, -1) == lines
            assert await logs(stub, 2) == lines[1:]

    run(go())
