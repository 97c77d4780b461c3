"""etcd leases, create-if-absent, compare-and-swap and waiting for a key to go: what an election
(and a claim such as the etcd backup's one-snapshot-per-slot) needs.

A key written with a lease goes when the lease expires (its holder stopped sending keepalives) or
is revoked, so an election built on these calls survives a holder that dies without resigning.
This module holds only the calls; the election (who leads, when to resign) is the caller's.
"""

from __future__ import annotations

__all__ = ["LeaseCalls"]

from grpclib.client import Channel

from ichor.api.gen.etcd import rpc_grpc, rpc_pb2
from ichor.etcd._connection import _Connection
from ichor.etcd._errors import EtcdRequestError

_CREATE_REVISION = rpc_pb2.Compare.CompareTarget.CREATE
_MOD_REVISION = rpc_pb2.Compare.CompareTarget.MOD
_EQUAL = rpc_pb2.Compare.CompareResult.EQUAL
_DELETE = 1  # mvccpb.Event.EventType.DELETE


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


class LeaseCalls(_Connection):
    """Lease grant/keepalive/revoke, ``create`` and ``wait_deleted`` (mixed into ``EtcdClient``)."""

    async def lease_grant(self, ttl: int, *, timeout: float | None = None) -> int:
        """A new lease of ``ttl`` seconds; returns its id."""

        async def call(channel: Channel) -> rpc_pb2.LeaseGrantResponse:
            return await rpc_grpc.LeaseStub(channel).LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=ttl))

        reply = await self._call("lease grant", call, timeout=timeout)
        if reply.error:
            raise EtcdRequestError(f"lease grant failed: {reply.error}", status="", etcd_message=reply.error)
        return int(reply.ID)

    async def lease_keepalive(self, lease: int, *, timeout: float | None = None) -> int:
        """Renew ``lease`` once; returns its TTL again, 0 when it has already expired."""

        async def call(channel: Channel) -> int:
            async with rpc_grpc.LeaseStub(channel).LeaseKeepAlive.open() as stream:
                await stream.send_message(rpc_pb2.LeaseKeepAliveRequest(ID=lease))
                reply = await stream.recv_message()
                await stream.end()
            return int(reply.TTL) if reply is not None else 0

        return await self._call("lease keepalive", call, timeout=timeout)

    async def lease_revoke(self, lease: int, *, timeout: float | None = None) -> None:
        """End ``lease`` now, deleting every key written with it."""

        async def call(channel: Channel) -> rpc_pb2.LeaseRevokeResponse:
            return await rpc_grpc.LeaseStub(channel).LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=lease))

        await self._call("lease revoke", call, timeout=timeout)

    async def create(
        self, key: str | bytes, value: str | bytes, *, lease: int = 0, timeout: float | None = None
    ) -> int | None:
        """Write ``key`` only if it does not exist (one transaction); its create revision, or None."""
        raw = _as_bytes(key)
        request = rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(result=_EQUAL, target=_CREATE_REVISION, key=raw, create_revision=0)],
            success=[
                rpc_pb2.RequestOp(
                    request_put=rpc_pb2.PutRequest(key=raw, value=_as_bytes(value), lease=lease)
                )
            ],
        )

        async def call(channel: Channel) -> rpc_pb2.TxnResponse:
            return await rpc_grpc.KVStub(channel).Txn(request)

        reply = await self._call("create", call, timeout=timeout)
        return int(reply.header.revision) if reply.succeeded else None

    async def put_if_unchanged(
        self, key: str | bytes, value: str | bytes, *, mod_revision: int, timeout: float | None = None
    ) -> bool:
        """Write ``key`` only if it was last modified at ``mod_revision`` (0: only if it does not
        exist), in one transaction; True when written. Two writers that read the same revision
        cannot both succeed."""
        raw = _as_bytes(key)
        request = rpc_pb2.TxnRequest(
            compare=[
                rpc_pb2.Compare(result=_EQUAL, target=_MOD_REVISION, key=raw, mod_revision=mod_revision)
            ],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=raw, value=_as_bytes(value)))],
        )

        async def call(channel: Channel) -> rpc_pb2.TxnResponse:
            return await rpc_grpc.KVStub(channel).Txn(request)

        reply = await self._call("compare-and-swap", call, timeout=timeout)
        return bool(reply.succeeded)

    async def wait_deleted(self, key: str | bytes, *, after: int, timeout: float | None = None) -> int:
        """Wait until ``key`` is deleted at a revision after ``after``; returns that revision.

        Returns at once when the deletion already happened (etcd replays history from ``after + 1``).
        """
        request = rpc_pb2.WatchRequest(
            create_request=rpc_pb2.WatchCreateRequest(key=_as_bytes(key), start_revision=after + 1)
        )

        async def call(channel: Channel) -> int:
            async with rpc_grpc.WatchStub(channel).Watch.open() as stream:
                await stream.send_message(request)
                async for reply in stream:
                    if reply.canceled:
                        raise EtcdRequestError(
                            f"watch canceled: {reply.cancel_reason or 'compacted'}", status="",
                            etcd_message=reply.cancel_reason,
                        )  # fmt: skip
                    for event in reply.events:
                        if event.type == _DELETE:
                            await stream.cancel()
                            return int(event.kv.mod_revision)
            raise EtcdRequestError("watch ended without an answer", status="", etcd_message="")

        return await self._call("watch", call, timeout=timeout)
