"""The etcd RPCs of ``machine.MachineService`` (Bootstrap, EtcdRecover, Etcd*), as a mixin.

:class:`EtcdMethods` turns requests into calls on the node's
:class:`~ichor.machined.server._etcd_ops.EtcdOperations` and its answers into Talos's reply
messages; checks and error texts live there. It holds no state and never talks to etcd itself.
"""

from __future__ import annotations

from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2

_ALARMS = ("NONE", "NOSPACE", "CORRUPT")


def _alarm_messages(alarms: list[Any]) -> list[machine_pb2.EtcdMemberAlarm]:
    return [
        machine_pb2.EtcdMemberAlarm(member_id=a.member_id, alarm=a.alarm if a.alarm in _ALARMS else "NONE")
        for a in alarms
    ]


class EtcdMethods:
    """Mixed into MachineService: ``self._node.etcd`` is the node's ``EtcdOperations``."""

    _node: Any

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:  # provided by MachineService
        raise NotImplementedError

    def _authorize(self, stream: Stream[Any, Any], name: str) -> None:  # provided by MachineService
        raise NotImplementedError

    def _etcd(self) -> Any:
        etcd = getattr(self._node, "etcd", None)
        if etcd is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "the node is not configured yet (no etcd)")
        return etcd

    async def Bootstrap(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Bootstrap")
        await self._etcd().bootstrap(request.recover_etcd, request.recover_skip_hash_check)
        await stream.send_message(machine_pb2.BootstrapResponse(messages=[machine_pb2.Bootstrap()]))

    async def EtcdRecover(self, stream: Stream[Any, Any]) -> None:
        self._authorize(stream, "EtcdRecover")

        async def chunks() -> Any:
            async for message in stream:
                yield message.bytes

        await self._etcd().receive_snapshot(chunks())
        await stream.send_message(machine_pb2.EtcdRecoverResponse(messages=[machine_pb2.EtcdRecover()]))

    async def EtcdMemberList(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "EtcdMemberList")
        members = await self._etcd().members(request.query_local)
        reply = machine_pb2.EtcdMembers(
            legacy_members=[m.name for m in members],
            members=[machine_pb2.EtcdMember(id=m.id, hostname=m.name, peer_urls=list(m.peer_urls),
                                            client_urls=list(m.client_urls), is_learner=m.is_learner)
                     for m in members],
        )  # fmt: skip
        await stream.send_message(machine_pb2.EtcdMemberListResponse(messages=[reply]))

    async def EtcdRemoveMemberByID(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "EtcdRemoveMemberByID")
        await self._etcd().remove_member(request.member_id)
        await stream.send_message(
            machine_pb2.EtcdRemoveMemberByIDResponse(messages=[machine_pb2.EtcdRemoveMemberByID()])
        )

    async def EtcdLeaveCluster(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdLeaveCluster")
        await self._etcd().leave()
        await stream.send_message(
            machine_pb2.EtcdLeaveClusterResponse(messages=[machine_pb2.EtcdLeaveCluster()])
        )

    async def EtcdForfeitLeadership(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdForfeitLeadership")
        member = await self._etcd().forfeit_leadership()
        await stream.send_message(
            machine_pb2.EtcdForfeitLeadershipResponse(
                messages=[machine_pb2.EtcdForfeitLeadership(member=member)]
            )
        )

    async def EtcdStatus(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdStatus")
        s = await self._etcd().status()
        status = machine_pb2.EtcdMemberStatus(
            member_id=s.member_id, protocol_version=s.version, db_size=s.db_size, db_size_in_use=s.db_size_in_use,
            leader=s.leader, raft_index=s.raft_index, raft_term=s.raft_term, raft_applied_index=s.raft_applied_index,
            errors=list(s.errors), is_learner=s.is_learner,
        )  # fmt: skip
        await stream.send_message(
            machine_pb2.EtcdStatusResponse(messages=[machine_pb2.EtcdStatus(member_status=status)])
        )

    async def EtcdAlarmList(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdAlarmList")
        alarms = await self._etcd().alarms(disarm=False)
        await stream.send_message(
            machine_pb2.EtcdAlarmListResponse(
                messages=[machine_pb2.EtcdAlarm(member_alarms=_alarm_messages(alarms))]
            )
        )

    async def EtcdAlarmDisarm(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdAlarmDisarm")
        alarms = await self._etcd().alarms(disarm=True)
        reply = machine_pb2.EtcdAlarmDisarm(member_alarms=_alarm_messages(alarms))
        await stream.send_message(machine_pb2.EtcdAlarmDisarmResponse(messages=[reply]))

    async def EtcdDefragment(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdDefragment")
        await self._etcd().defragment()
        await stream.send_message(machine_pb2.EtcdDefragmentResponse(messages=[machine_pb2.EtcdDefragment()]))

    async def EtcdSnapshot(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EtcdSnapshot")
        async for chunk in self._etcd().snapshot():
            await stream.send_message(common_pb2.Data(bytes=chunk))
