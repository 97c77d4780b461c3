"""An asyncio etcd v3 client over mutual TLS (grpclib), with failover across endpoints.

Speaks etcd's own gRPC API (``/etcdserverpb.KV/Range`` ...) with a client certificate from the
cluster's etcd CA. Endpoints are tried in order from the one that last answered; an endpoint that
cannot be connected to (refused, timed out, TLS handshake failed) is skipped, but a request that
reached etcd is never re-sent elsewhere (a put or member-add must not happen twice).

TLS is capped at 1.2 on purpose: etcd verifies the client certificate inside a TLS 1.2 handshake,
so a certificate from another CA fails the connection with a clear reason instead of surfacing as
a lost connection on the first request (TLS 1.3 verifies it after the handshake). The suites
Talos allows for etcd are all TLS 1.2 suites anyway.

gRPC errors from etcd become :mod:`ichor.etcd` errors keeping etcd's text. This module does not
retry requests or decide policy (promotion loops, health intervals belong to the caller).

Dialling, TLS and failover are in ``_connection`` (the base class); this module holds the etcd calls.
"""

from __future__ import annotations

__all__ = ["EtcdClient", "parse_endpoint"]

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from types import TracebackType

from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError

from ichor.api.gen.etcd import kv_pb2, rpc_grpc, rpc_pb2
from ichor.etcd._connection import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from ichor.etcd._connection import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ichor.etcd._connection import (
    _describe_connect_failure,
    parse_endpoint,
    translate_grpc_error,
)
from ichor.etcd._errors import (
    EtcdConfigError,
    EtcdError,
    EtcdUnavailableError,
)
from ichor.etcd._lease import LeaseCalls
from ichor.etcd._types import KV, Alarm, HealthResult, Member, RangeResult, Status

HEALTH_KEY = b"health"  # what `etcdctl endpoint health` reads


def _range_end(key: bytes) -> bytes:
    """The end of the range holding every key that starts with ``key`` (etcd's prefix rule)."""
    end = bytearray(key)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"  # all bytes 0xff (or empty key): every key from here on


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _kv(pb: kv_pb2.KeyValue) -> KV:
    return KV(pb.key, pb.value, pb.create_revision, pb.mod_revision, pb.version, pb.lease)


def _member(pb: rpc_pb2.Member) -> Member:
    return Member(pb.ID, pb.name, tuple(pb.peerURLs), tuple(pb.clientURLs), pb.isLearner)


class EtcdClient(LeaseCalls):
    """etcd over mutual TLS; use ``async with EtcdClient(...) as client`` (or call :meth:`close`).

    ``ca``, ``cert`` and ``key`` are PEM bytes (the etcd CA certificate and, on a node, the
    ``admin`` pair from ``/system/secrets/etcd``). Every call takes ``timeout`` (seconds; the
    client's default otherwise).
    """

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        # TLS transports finish closing in loop callbacks; give them turns before the loop ends.
        for _ in range(3):
            await asyncio.sleep(0)

    # --- KV -----------------------------------------------------------------------------------------

    async def get(
        self,
        key: str | bytes,
        *,
        prefix: bool = False,
        serializable: bool = False,
        endpoint: str | None = None,
        timeout: float | None = None,
    ) -> RangeResult:
        """The key (or every key under a prefix); linearizable unless ``serializable``."""
        raw = _as_bytes(key)
        request = rpc_pb2.RangeRequest(key=raw, serializable=serializable)
        if prefix:
            request.range_end = _range_end(raw)

        async def call(channel: Channel) -> rpc_pb2.RangeResponse:
            return await rpc_grpc.KVStub(channel).Range(request)

        reply = await self._call("get", call, endpoint=endpoint, timeout=timeout)
        return RangeResult([_kv(kv) for kv in reply.kvs], reply.header.revision, reply.count)

    async def put(self, key: str | bytes, value: str | bytes, *, timeout: float | None = None) -> int:
        """Store ``value``; returns the new store revision."""
        request = rpc_pb2.PutRequest(key=_as_bytes(key), value=_as_bytes(value))

        async def call(channel: Channel) -> rpc_pb2.PutResponse:
            return await rpc_grpc.KVStub(channel).Put(request)

        reply = await self._call("put", call, timeout=timeout)
        return int(reply.header.revision)

    async def delete(self, key: str | bytes, *, prefix: bool = False, timeout: float | None = None) -> int:
        """Delete the key (or every key under a prefix); returns how many were deleted."""
        raw = _as_bytes(key)
        request = rpc_pb2.DeleteRangeRequest(key=raw, range_end=_range_end(raw) if prefix else b"")

        async def call(channel: Channel) -> rpc_pb2.DeleteRangeResponse:
            return await rpc_grpc.KVStub(channel).DeleteRange(request)

        reply = await self._call("delete", call, timeout=timeout)
        return int(reply.deleted)

    # --- Cluster ------------------------------------------------------------------------------------

    async def member_list(self, *, linearizable: bool = True, timeout: float | None = None) -> list[Member]:
        request = rpc_pb2.MemberListRequest(linearizable=linearizable)

        async def call(channel: Channel) -> rpc_pb2.MemberListResponse:
            return await rpc_grpc.ClusterStub(channel).MemberList(request)

        reply = await self._call("member list", call, timeout=timeout)
        return [_member(m) for m in reply.members]

    async def member_add(
        self, peer_urls: Sequence[str], *, learner: bool, timeout: float | None = None
    ) -> Member:
        """Add a member (a learner when ``learner``) that will start with these peer URLs."""
        request = rpc_pb2.MemberAddRequest(peerURLs=list(peer_urls), isLearner=learner)

        async def call(channel: Channel) -> rpc_pb2.MemberAddResponse:
            return await rpc_grpc.ClusterStub(channel).MemberAdd(request)

        reply = await self._call("member add", call, timeout=timeout)
        return _member(reply.member)

    async def member_remove(self, member_id: int, *, timeout: float | None = None) -> None:
        request = rpc_pb2.MemberRemoveRequest(ID=member_id)

        async def call(channel: Channel) -> rpc_pb2.MemberRemoveResponse:
            return await rpc_grpc.ClusterStub(channel).MemberRemove(request)

        await self._call(f"member remove {member_id:x}", call, timeout=timeout)

    async def member_promote(self, member_id: int, *, timeout: float | None = None) -> None:
        """Promote a learner; :class:`EtcdLearnerNotReadyError` until it has caught up."""
        request = rpc_pb2.MemberPromoteRequest(ID=member_id)

        async def call(channel: Channel) -> rpc_pb2.MemberPromoteResponse:
            return await rpc_grpc.ClusterStub(channel).MemberPromote(request)

        await self._call(f"member promote {member_id:x}", call, timeout=timeout)

    # --- Maintenance --------------------------------------------------------------------------------

    async def status(self, endpoint: str | None = None, *, timeout: float | None = None) -> Status:
        """The status of one member (``endpoint``; the current endpoint when omitted)."""

        async def call(channel: Channel) -> rpc_pb2.StatusResponse:
            return await rpc_grpc.MaintenanceStub(channel).Status(rpc_pb2.StatusRequest())

        target = endpoint if endpoint is not None else None
        reply = await self._call("status", call, endpoint=target, timeout=timeout)
        return Status(
            endpoint=target or self._endpoints[self._current],
            member_id=reply.header.member_id,
            leader=reply.leader,
            version=reply.version,
            db_size=reply.dbSize,
            db_size_in_use=reply.dbSizeInUse,
            raft_index=reply.raftIndex,
            raft_term=reply.raftTerm,
            raft_applied_index=reply.raftAppliedIndex,
            errors=tuple(reply.errors),
            is_learner=reply.isLearner,
        )

    async def _alarm(
        self, action: int, member_id: int, alarm: int, what: str, timeout: float | None
    ) -> list[Alarm]:
        request = rpc_pb2.AlarmRequest(action=action, memberID=member_id, alarm=alarm)  # type: ignore[arg-type]

        async def call(channel: Channel) -> rpc_pb2.AlarmResponse:
            return await rpc_grpc.MaintenanceStub(channel).Alarm(request)

        reply = await self._call(what, call, timeout=timeout)
        return [Alarm(a.memberID, rpc_pb2.AlarmType.Name(a.alarm)) for a in reply.alarms]

    async def alarm_list(self, *, timeout: float | None = None) -> list[Alarm]:
        """Active alarms of every member."""
        return await self._alarm(rpc_pb2.AlarmRequest.GET, 0, rpc_pb2.NONE, "alarm list", timeout)

    async def alarm_disarm(
        self, member_id: int = 0, alarm: str = "NONE", *, timeout: float | None = None
    ) -> list[Alarm]:
        """Deactivate ``alarm`` on ``member_id`` (0 and ``NONE``: every alarm, like etcdctl)."""
        try:
            alarm_type = rpc_pb2.AlarmType.Value(alarm.upper())
        except ValueError:
            raise EtcdConfigError(
                f"unknown etcd alarm {alarm!r}", hint="etcd alarms are NOSPACE and CORRUPT"
            ) from None
        if member_id == 0 or alarm_type == rpc_pb2.NONE:
            disarmed: list[Alarm] = []
            for active in await self.alarm_list(timeout=timeout):
                if member_id in (0, active.member_id) and alarm_type in (rpc_pb2.NONE, active.alarm):
                    disarmed += await self._alarm(
                        rpc_pb2.AlarmRequest.DEACTIVATE,
                        active.member_id,
                        rpc_pb2.AlarmType.Value(active.alarm),
                        "alarm disarm",
                        timeout,
                    )
            return disarmed
        return await self._alarm(
            rpc_pb2.AlarmRequest.DEACTIVATE, member_id, alarm_type, "alarm disarm", timeout
        )

    async def defragment(self, endpoint: str | None = None, *, timeout: float | None = None) -> None:
        """Defragment one member's backend (blocks that member while it runs)."""

        async def call(channel: Channel) -> rpc_pb2.DefragmentResponse:
            return await rpc_grpc.MaintenanceStub(channel).Defragment(rpc_pb2.DefragmentRequest())

        await self._call("defragment", call, endpoint=endpoint, timeout=timeout)

    async def leader_endpoint(self, *, timeout: float | None = None) -> str:
        """An endpoint of the current leader: one of ours if it is the leader, else its client URL."""
        leader = 0
        for ep in self._endpoints:
            try:
                st = await self.status(ep, timeout=timeout)
            except EtcdUnavailableError:
                continue
            if st.member_id == st.leader:
                return ep
            leader = leader or st.leader
        if leader:
            for member in await self.member_list(timeout=timeout):
                if member.id == leader and member.client_urls:
                    return member.client_urls[0]
        raise EtcdUnavailableError(
            "cannot find the etcd leader", hint="etcd may have lost quorum: check that most members are up"
        )

    async def move_leader(self, target_id: int, *, timeout: float | None = None) -> None:
        """Hand leadership to ``target_id`` (sent to the leader, as etcd requires)."""
        request = rpc_pb2.MoveLeaderRequest(targetID=target_id)
        endpoint = await self.leader_endpoint(timeout=timeout)

        async def call(channel: Channel) -> rpc_pb2.MoveLeaderResponse:
            return await rpc_grpc.MaintenanceStub(channel).MoveLeader(request)

        await self._call(f"move leader to {target_id:x}", call, endpoint=endpoint, timeout=timeout)

    async def snapshot(self, *, endpoint: str | None = None, timeout: float = 300.0) -> AsyncIterator[bytes]:
        """The member's backend database as a stream of chunks (ending with etcd's SHA-256 trailer)."""
        targets = [endpoint] if endpoint is not None else self._dial_order()
        last: BaseException | None = None
        for ep in targets:
            try:
                channel = await self._connect(ep)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            try:
                async with asyncio.timeout(timeout):
                    async with rpc_grpc.MaintenanceStub(channel).Snapshot.open() as stream:
                        await stream.send_message(rpc_pb2.SnapshotRequest(), end=True)
                        async for reply in stream:
                            if reply.blob:
                                yield reply.blob
            except GRPCError as exc:
                raise translate_grpc_error(exc, what="snapshot", endpoint=ep) from None
            except TimeoutError:
                raise EtcdUnavailableError(
                    f"snapshot failed ({ep}): not finished within {timeout:g}s",
                    hint="retry with a longer timeout",
                ) from None
            except (StreamTerminatedError, OSError) as exc:
                self._drop(ep)
                raise EtcdUnavailableError(f"snapshot failed ({ep}): connection lost: {exc}") from None
            return
        reason = _describe_connect_failure(last, self._connect_timeout)[0] if last else "no endpoint"
        raise EtcdUnavailableError(
            f"snapshot failed: no etcd endpoint is reachable: {reason}",
            hint="check that etcd is running on the control-plane nodes",
        )

    async def health(self, endpoint: str, *, timeout: float | None = None) -> HealthResult:
        """A linearizable read of ``health`` on one endpoint (what ``etcdctl endpoint health`` does).

        Never raises for an unhealthy member: the reason is in :attr:`HealthResult.error`.
        """
        start = time.monotonic()
        try:
            await self.get(HEALTH_KEY, endpoint=endpoint, timeout=timeout)
            alarms = await self.alarm_list(timeout=timeout)
        except EtcdError as exc:
            return HealthResult(endpoint, False, time.monotonic() - start, str(exc))
        took = time.monotonic() - start
        if alarms:
            names = ", ".join(sorted({a.alarm for a in alarms}))
            return HealthResult(endpoint, False, took, f"Active Alarm(s): {names}")
        return HealthResult(endpoint, True, took)
