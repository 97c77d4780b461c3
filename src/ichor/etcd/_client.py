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
"""

from __future__ import annotations

__all__ = ["EtcdClient", "parse_endpoint"]

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar
from urllib.parse import urlsplit

from grpclib.client import Channel
from grpclib.const import Status as GRPCStatus
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.protocol import H2Protocol

from ichor.api.gen.etcd import kv_pb2, rpc_grpc, rpc_pb2
from ichor.etcd._errors import (
    EtcdConfigError,
    EtcdError,
    EtcdLearnerNotReadyError,
    EtcdNoSpaceError,
    EtcdNotFoundError,
    EtcdNotLeaderError,
    EtcdRequestError,
    EtcdTLSError,
    EtcdTooManyLearnersError,
    EtcdUnavailableError,
)
from ichor.etcd._types import KV, Alarm, HealthResult, Member, RangeResult, Status
from ichor.machinery.errors import PKIError
from ichor.machinery.pki import load_into_ssl_context

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 3.0
HEALTH_KEY = b"health"  # what `etcdctl endpoint health` reads


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``https://10.5.0.2:2379`` (or ``10.5.0.2:2379``, ``[::1]:2379``) -> ``(host, port)``."""
    text = endpoint if "://" in endpoint else f"https://{endpoint}"
    parts = urlsplit(text)
    if parts.scheme != "https":
        raise EtcdConfigError(
            f"etcd endpoint {endpoint!r} is not https",
            hint="Talos's etcd only accepts mutual TLS: use https://<address>:2379",
        )
    try:
        port = parts.port or 2379
    except ValueError:
        port = -1
    if not parts.hostname or port <= 0:
        raise EtcdConfigError(
            f"invalid etcd endpoint {endpoint!r}", hint="endpoints look like https://10.5.0.2:2379"
        )
    return parts.hostname, port


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


# etcd's error texts (rpctypes) -> our errors and what to do about them.
_KNOWN_ERRORS: tuple[tuple[str, type[EtcdRequestError], str], ...] = (
    ("member not found", EtcdNotFoundError, "check the member ID against the current member list"),
    (
        "can only promote a learner member which is in sync with leader",
        EtcdLearnerNotReadyError,
        "the learner has not caught up with the leader yet: retry the promotion in a few seconds",
    ),
    (
        "too many learner members in cluster",
        EtcdTooManyLearnersError,
        "promote or remove the existing learner member before adding another",
    ),
    ("not leader", EtcdNotLeaderError, "send the request to the current leader"),
    (
        "database space exceeded",
        EtcdNoSpaceError,
        "defragment the members, then disarm the NOSPACE alarm",
    ),
)
_UNAVAILABLE_TEXTS = ("no leader", "request timed out", "leader changed", "unhealthy cluster", "timed out")


def translate_grpc_error(exc: GRPCError, *, what: str, endpoint: str) -> EtcdError:
    """The :mod:`ichor.etcd` error for a gRPC error etcd answered ``what`` with."""
    text = exc.message or exc.status.name
    message = f"{what} failed ({endpoint}): {text}"
    for needle, cls, hint in _KNOWN_ERRORS:
        if text.endswith(needle):
            return cls(message, status=exc.status.name, etcd_message=text, hint=hint)
    if exc.status in (GRPCStatus.UNAVAILABLE, GRPCStatus.DEADLINE_EXCEEDED) or any(
        t in text for t in _UNAVAILABLE_TEXTS
    ):
        return EtcdUnavailableError(message, hint="etcd may have lost quorum: check that most members are up")
    return EtcdRequestError(message, status=exc.status.name, etcd_message=text)


def _describe_connect_failure(exc: BaseException, timeout: float) -> tuple[str, bool]:
    """(reason, is_tls) for a failed connection attempt."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"tls: the server certificate is not trusted: {exc.verify_message}", True
    if isinstance(exc, ssl.SSLError):
        return f"tls handshake failed: {exc.reason or exc}", True
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g}s", False
    if isinstance(exc, ConnectionResetError):
        return "connection reset during the TLS handshake", True
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:], False
    return str(exc) or type(exc).__name__, False


class _Channel(Channel):
    """A grpclib channel that aborts its TLS transport on close.

    A graceful TLS close waits for the peer's close_notify in later loop turns; an event loop
    that ends right after ``close()`` (``asyncio.run``) would leak the socket. etcd loses nothing
    when we drop a connection with no call in flight.
    """

    _transport: asyncio.Transport | None = None

    async def _create_connection(self) -> H2Protocol:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(
            self._protocol_factory, self._host, self._port, ssl=self._ssl
        )
        assert isinstance(transport, asyncio.Transport) and isinstance(protocol, H2Protocol)
        self._transport = transport
        return protocol

    def close(self) -> None:
        super().close()
        if self._transport is not None:
            self._transport.abort()
            self._transport = None


class EtcdClient:
    """etcd over mutual TLS; use ``async with EtcdClient(...) as client`` (or call :meth:`close`).

    ``ca``, ``cert`` and ``key`` are PEM bytes (the etcd CA certificate and, on a node, the
    ``admin`` pair from ``/system/secrets/etcd``). Every call takes ``timeout`` (seconds; the
    client's default otherwise).
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        ca: bytes,
        cert: bytes,
        key: bytes,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        if not endpoints:
            raise EtcdConfigError("no etcd endpoints given", hint="pass at least one https://<address>:2379")
        self._endpoints = list(dict.fromkeys(endpoints))
        self._addresses = {ep: parse_endpoint(ep) for ep in self._endpoints}
        self._ssl = self._ssl_context(ca, cert, key)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._channels: dict[str, _Channel] = {}
        self._current = 0

    @staticmethod
    def _ssl_context(ca: bytes, cert: bytes, key: bytes) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
            raise EtcdConfigError(
                f"cannot load the etcd CA certificate: {exc}", hint="pass the PEM of cluster.etcd.ca.crt"
            ) from None
        try:
            load_into_ssl_context(ctx, cert, key)
        except (PKIError, ssl.SSLError) as exc:
            raise EtcdConfigError(
                f"cannot load the etcd client certificate: {exc}",
                hint="pass a PEM certificate and its private key issued by the etcd CA",
            ) from None
        ctx.set_alpn_protocols(["h2"])
        return ctx

    @property
    def endpoints(self) -> list[str]:
        return list(self._endpoints)

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        # TLS transports finish closing in loop callbacks; give them turns before the loop ends.
        for _ in range(3):
            await asyncio.sleep(0)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    # --- plumbing ---------------------------------------------------------------------------------

    def _drop(self, endpoint: str) -> None:
        channel = self._channels.pop(endpoint, None)
        if channel is not None:
            channel.close()

    async def _connect(self, endpoint: str) -> _Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            host, port = self._addresses.get(endpoint) or parse_endpoint(endpoint)
            channel = _Channel(host, port, ssl=self._ssl)
            self._channels[endpoint] = channel
        try:
            async with asyncio.timeout(self._connect_timeout):
                await channel.__connect__()
        except BaseException:
            self._drop(endpoint)
            raise
        return channel

    def _dial_order(self) -> list[str]:
        return self._endpoints[self._current :] + self._endpoints[: self._current]

    async def _call(
        self,
        what: str,
        fn: Callable[[Channel], Awaitable[T]],
        *,
        endpoint: str | None = None,
        timeout: float | None = None,
    ) -> T:
        targets = [endpoint] if endpoint is not None else self._dial_order()
        failures: list[str] = []
        tls_failures = 0
        for ep in targets:
            try:
                channel = await self._connect(ep)
            except (OSError, TimeoutError) as exc:
                reason, is_tls = _describe_connect_failure(exc, self._connect_timeout)
                failures.append(f"{ep}: {reason}")
                tls_failures += is_tls
                continue
            if ep in self._endpoints:
                self._current = self._endpoints.index(ep)
            limit = self._timeout if timeout is None else timeout
            try:
                async with asyncio.timeout(limit):
                    return await fn(channel)
            except GRPCError as exc:
                raise translate_grpc_error(exc, what=what, endpoint=ep) from None
            except TimeoutError:
                raise EtcdUnavailableError(
                    f"{what} failed ({ep}): no answer within {limit:g}s",
                    hint="etcd may be overloaded or without quorum; retry with a longer timeout",
                ) from None
            except (StreamTerminatedError, OSError) as exc:
                self._drop(ep)
                raise EtcdUnavailableError(
                    f"{what} failed ({ep}): connection lost: {exc}",
                    hint="the etcd member stopped or closed the connection; retry",
                ) from None
        detail = "; ".join(failures)
        if tls_failures == len(failures):
            raise EtcdTLSError(
                f"{what} failed: TLS with every etcd endpoint failed: {detail}",
                hint="the client certificate must be issued by the cluster's etcd CA (cluster.etcd.ca), "
                "and the CA given must be the one that signed etcd's server certificate",
            )
        raise EtcdUnavailableError(
            f"{what} failed: no etcd endpoint is reachable: {detail}",
            hint="check that etcd is running on the control-plane nodes and listening on port 2379",
        )

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
