"""machined's ``machine.MachineService``: the RPCs behind ``talosctl`` node commands.

Every RPC checks the caller's roles (from apid's ``talos-role`` metadata, or the maintenance
server's fixed reader role) against Talos's table first, then delegates to the node through the
small :class:`NodeContext` protocol, so this module holds no node state of its own. RPCs Ichor does
not serve yet answer ``UNIMPLEMENTED "method <Name> not implemented"`` exactly as Talos's gRPC
server does for unregistered methods. Upgrade, Rollback, MetaWrite and MetaDelete go to the node,
which serves them when it booted from its own disk (metal) and otherwise refuses them as Talos's
``container`` mode does, ``FAILED_PRECONDITION "method is not supported in container mode"``, once
the request has decoded (an undecodable one is ``INVALID_ARGUMENT`` first, as everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any, Protocol

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.machined import authz
from ichor.machined.events import EventBus, new_xid
from ichor.machined.kmsg import follow_kmsg
from ichor.machined.logfile import follow_file
from ichor.machined.platform import Layout
from ichor.machined.server import _files
from ichor.machined.server._containers import ContainerMethods
from ichor.machined.server._etcd import EtcdMethods
from ichor.machined.server._monitoring import MonitoringMethods
from ichor.machined.server._netstat import NetstatMethods
from ichor.machined.server._usage import CONTROLLER_RUNTIME_LOG, UsageMethods
from ichor.machined.services import (
    OperationNotSupportedError,
    ServiceError,
    ServiceInfo,
    Supervisor,
    UnknownServiceError,
)

RolesOf = Callable[[Stream[Any, Any]], Collection[str]]

__all__ = ["CONTROLLER_RUNTIME_LOG", "MachineService", "NodeContext", "UnimplementedMachineService"]


class NodeContext(Protocol):
    """What the machine service needs from the node it runs in."""

    layout: Layout
    supervisor: Supervisor
    events: EventBus
    boot_id: str

    def version(self) -> machine_pb2.Version: ...

    def hostname(self) -> str: ...

    def process_root(self) -> int: ...

    async def apply_configuration(
        self, request: machine_pb2.ApplyConfigurationRequest
    ) -> machine_pb2.ApplyConfiguration: ...

    def generate_client_configuration(
        self, roles: list[str], ttl: timedelta
    ) -> machine_pb2.GenerateClientConfiguration: ...

    def kubeconfig(self) -> bytes: ...

    def generate_configuration(
        self, request: machine_pb2.GenerateConfigurationRequest
    ) -> machine_pb2.GenerateConfiguration: ...

    def request_reboot(self, actor_id: str, mode: int) -> None: ...

    def request_shutdown(self, actor_id: str, force: bool) -> None: ...

    async def check_reset(self, request: machine_pb2.ResetRequest) -> None: ...

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None: ...

    async def upgrade(self, request: machine_pb2.UpgradeRequest, actor_id: str) -> str: ...

    async def rollback(self, actor_id: str) -> None: ...

    async def meta_write(self, key: int, value: bytes) -> None: ...

    async def meta_delete(self, key: int) -> None: ...


def _unimplemented(name: str) -> Callable[..., Any]:
    async def method(self: Any, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, f"method {name} not implemented")

    method.__name__ = name
    return method


# Every RPC defaults to Talos's "not implemented"; MachineService overrides what the node serves.
UnimplementedMachineService: type[machine_grpc.MachineServiceBase] = type(
    "UnimplementedMachineService",
    (machine_grpc.MachineServiceBase,),
    {name: _unimplemented(name) for name in machine_grpc.MachineServiceBase.__abstractmethods__},
)


def service_info_to_proto(info: ServiceInfo) -> machine_pb2.ServiceInfo:
    return machine_pb2.ServiceInfo(
        id=info.id,
        state=str(info.state),
        events=machine_pb2.ServiceEvents(
            events=[
                machine_pb2.ServiceEvent(msg=e.message, state=str(e.state), ts=e.timestamp)
                for e in info.events
            ]
        ),
        health=machine_pb2.ServiceHealth(
            unknown=info.health.unknown,
            healthy=bool(info.health.healthy),
            last_message=info.health.last_message,
            **({"last_change": info.health.last_change} if info.health.last_change else {}),
        ),
    )


def _service_error(exc: ServiceError) -> GRPCError:
    if isinstance(exc, UnknownServiceError):
        return GRPCError(Status.NOT_FOUND, str(exc))
    if isinstance(exc, OperationNotSupportedError):
        return GRPCError(Status.FAILED_PRECONDITION, str(exc))
    return GRPCError(Status.INTERNAL, str(exc))


class MachineService(
    ContainerMethods,
    EtcdMethods,
    NetstatMethods,
    MonitoringMethods,
    UsageMethods,
    UnimplementedMachineService,  # type: ignore[misc,valid-type]
):
    """The RPCs a process node serves; see the module docstring."""

    def __init__(self, node: NodeContext, *, roles_of: RolesOf) -> None:
        self._node = node
        self._roles_of = roles_of

    def _authorize(self, stream: Stream[Any, Any], name: str) -> None:
        authz.check(f"/machine.MachineService/{name}", self._roles_of(stream))

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:
        self._authorize(stream, name)
        request = await stream.recv_message()
        assert request is not None
        return request

    # --- identity and configuration --------------------------------------------------------------

    async def Version(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Version")
        await stream.send_message(machine_pb2.VersionResponse(messages=[self._node.version()]))

    async def Hostname(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Hostname")
        reply = machine_pb2.Hostname(hostname=self._node.hostname())
        await stream.send_message(machine_pb2.HostnameResponse(messages=[reply]))

    async def ApplyConfiguration(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "ApplyConfiguration")
        reply = await self._node.apply_configuration(request)
        await stream.send_message(machine_pb2.ApplyConfigurationResponse(messages=[reply]))

    async def GenerateClientConfiguration(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "GenerateClientConfiguration")
        ttl = request.crt_ttl.ToTimedelta()
        if ttl <= timedelta(0):
            raise GRPCError(Status.INVALID_ARGUMENT, "crt_ttl should be positive")
        reply = self._node.generate_client_configuration(list(request.roles), ttl)
        await stream.send_message(machine_pb2.GenerateClientConfigurationResponse(messages=[reply]))

    async def Kubeconfig(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Kubeconfig")
        await stream.send_message(common_pb2.Data(bytes=self._node.kubeconfig()))

    async def GenerateConfiguration(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "GenerateConfiguration")
        reply = self._node.generate_configuration(request)
        await stream.send_message(machine_pb2.GenerateConfigurationResponse(messages=[reply]))

    # --- services, logs, kernel log, events ------------------------------------------------------

    async def ServiceList(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "ServiceList")
        services = [service_info_to_proto(i) for i in self._node.supervisor.list()]
        await stream.send_message(
            machine_pb2.ServiceListResponse(messages=[machine_pb2.ServiceList(services=services)])
        )

    async def _service_op(self, stream: Stream[Any, Any], name: str, verb: str) -> str:
        request = await self._request(stream, name)
        supervisor = self._node.supervisor
        op = {
            "started": supervisor.api_start,
            "stopped": supervisor.api_stop,
            "restarted": supervisor.api_restart,
        }
        try:
            await op[verb](request.id)
        except ServiceError as exc:
            raise _service_error(exc) from None
        return f'Service "{request.id}" {verb}'

    async def ServiceStart(self, stream: Stream[Any, Any]) -> None:
        resp = await self._service_op(stream, "ServiceStart", "started")
        await stream.send_message(
            machine_pb2.ServiceStartResponse(messages=[machine_pb2.ServiceStart(resp=resp)])
        )

    async def ServiceStop(self, stream: Stream[Any, Any]) -> None:
        resp = await self._service_op(stream, "ServiceStop", "stopped")
        await stream.send_message(
            machine_pb2.ServiceStopResponse(messages=[machine_pb2.ServiceStop(resp=resp)])
        )

    async def ServiceRestart(self, stream: Stream[Any, Any]) -> None:
        resp = await self._service_op(stream, "ServiceRestart", "restarted")
        await stream.send_message(
            machine_pb2.ServiceRestartResponse(messages=[machine_pb2.ServiceRestart(resp=resp)])
        )

    async def Logs(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Logs")
        if request.namespace not in ("system", "") and request.id != "kubelet":
            async for line in self.container_log(request):
                await stream.send_message(common_pb2.Data(bytes=line))
            return
        tail = request.tail_lines if request.tail_lines >= 0 else None
        try:
            if request.id == CONTROLLER_RUNTIME_LOG:
                lines = follow_file(
                    self._node.layout.controller_runtime_log, tail=tail, follow=request.follow
                )
            else:
                lines = self._node.supervisor.follow_log(request.id, tail=tail, follow=request.follow)
            async for line in lines:
                await stream.send_message(common_pb2.Data(bytes=line))
        except UnknownServiceError:
            # Talos's logging manager: a plain error (code Unknown), whatever the id
            raise GRPCError(Status.UNKNOWN, f'log "{request.id}" was not registered') from None
        except ServiceError as exc:
            raise _service_error(exc) from None

    async def Dmesg(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Dmesg")
        # DmesgRequest.tail means "only new messages", not a line count
        tail = 0 if request.tail else None
        if self._node.layout.kernel_log is not None:  # metal: the machine's own kernel log
            lines = follow_kmsg(self._node.layout.kernel_log, only_new=tail == 0, follow=request.follow)
        else:
            lines = follow_file(self._node.layout.console_log, tail=tail, follow=request.follow)
        async for line in lines:
            await stream.send_message(common_pb2.Data(bytes=line))

    async def Events(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Events")
        # Talos always opens with a "hello" event (a fresh id, an empty Any); clients skip it.
        hello = machine_pb2.Event(data={}, id=new_xid(), actor_id=request.with_actor_id)
        await stream.send_message(hello)
        try:
            subscription = self._node.events.subscribe(
                tail_events=request.tail_events,
                tail_id=request.tail_id,
                tail_seconds=request.tail_seconds,
                actor_id=request.with_actor_id,
            )
            async for event in subscription:
                data = {"type_url": event.type_url, "value": event.payload.SerializeToString()}
                await stream.send_message(machine_pb2.Event(data=data, id=event.id, actor_id=event.actor_id))
        except ValueError as exc:  # only a tail_id that is no xid; Talos answers it as a plain error
            raise GRPCError(Status.UNKNOWN, f"error parsing tail_id: {exc}") from None

    # --- files and system facts ------------------------------------------------------------------

    async def List(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "List")
        for info in _files.list_files(self._node.layout, request):
            await stream.send_message(info)

    async def Read(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Read")
        if _files.is_boot_id(request.path):
            # The kernel's file is the host's on a shared kernel; each node boot has its own id
            # (Talos's `reboot --wait` compares it before and after).
            await stream.send_message(common_pb2.Data(bytes=f"{self._node.boot_id}\n".encode()))
            return
        for chunk in _files.read_file(self._node.layout, request.path):
            await stream.send_message(common_pb2.Data(bytes=chunk))

    async def Copy(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Copy")
        for chunk in _files.copy_tar_gz(self._node.layout, request.root_path):
            await stream.send_message(common_pb2.Data(bytes=chunk))

    async def Mounts(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Mounts")
        stats = _files.mounts(self._node.layout)
        await stream.send_message(machine_pb2.MountsResponse(messages=[machine_pb2.Mounts(stats=stats)]))

    async def Memory(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Memory")
        await stream.send_message(
            machine_pb2.MemoryResponse(messages=[machine_pb2.Memory(meminfo=_files.memory())])
        )

    async def Processes(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Processes")
        infos = _files.processes(_files.process_tree(self._node.process_root()))
        await stream.send_message(
            machine_pb2.ProcessesResponse(messages=[machine_pb2.Process(processes=infos)])
        )

    # --- lifecycle -------------------------------------------------------------------------------

    # Talos's container mode lacks Upgrade, Rollback and MetaKV (runtime.Mode): a node sharing the
    # host's kernel has no boot disk and no META partition. The node context refuses them with
    # FAILED_PRECONDITION "method is not supported in container mode"; a node booted from its own
    # disk serves them. The request is decoded first, as grpc-go does before any handler.

    def _require_boot_disk(self) -> None:
        if getattr(self._node, "upgrades", None) is not None:
            return
        mode = self._node.layout.platform.mode
        if mode == "container":
            raise GRPCError(Status.FAILED_PRECONDITION, f"method is not supported in {mode} mode")
        raise GRPCError(
            Status.FAILED_PRECONDITION,
            "this node runs from no installed disk (no BOOT and META): install it first (machine.install)",
        )

    async def Upgrade(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Upgrade")
        self._require_boot_disk()
        actor = _new_actor()
        ack = await self._node.upgrade(request, actor)
        await stream.send_message(
            machine_pb2.UpgradeResponse(messages=[machine_pb2.Upgrade(ack=ack, actor_id=actor)])
        )

    async def Rollback(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Rollback")
        self._require_boot_disk()
        await self._node.rollback(_new_actor())
        await stream.send_message(machine_pb2.RollbackResponse(messages=[machine_pb2.Rollback()]))

    async def MetaWrite(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "MetaWrite")
        self._require_boot_disk()
        await self._node.meta_write(request.key, request.value)
        await stream.send_message(machine_pb2.MetaWriteResponse(messages=[machine_pb2.MetaWrite()]))

    async def MetaDelete(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "MetaDelete")
        self._require_boot_disk()
        await self._node.meta_delete(request.key)
        await stream.send_message(machine_pb2.MetaDeleteResponse(messages=[machine_pb2.MetaDelete()]))

    async def Reboot(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Reboot")
        actor = _new_actor()
        self._node.request_reboot(actor, request.mode)
        await stream.send_message(machine_pb2.RebootResponse(messages=[machine_pb2.Reboot(actor_id=actor)]))

    async def Shutdown(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Shutdown")
        actor = _new_actor()
        self._node.request_shutdown(actor, request.force)
        await stream.send_message(
            machine_pb2.ShutdownResponse(messages=[machine_pb2.Shutdown(actor_id=actor)])
        )

    async def Reset(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Reset")
        await self._node.check_reset(request)
        actor = _new_actor()
        self._node.request_reset(actor, request)
        await stream.send_message(machine_pb2.ResetResponse(messages=[machine_pb2.Reset(actor_id=actor)]))


def _new_actor() -> str:
    import uuid

    return str(uuid.uuid4())
