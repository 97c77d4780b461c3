"""``time.TimeService``: ``Time`` and ``TimeCheck`` (``talosctl time [--check server]``), as Talos's.

``Time`` asks the first of the node's ``machine.time.servers`` (Talos's default
``time.cloudflare.com`` when the config names none) and ``TimeCheck`` the server in the request,
with one SNTP query (:mod:`ichor.machined.sntp`). The reply is the server asked, the node's clock
when the answer came and the server's time at that moment (the node's clock plus the measured
offset). Every node shares the host's kernel clock, so the node time is the host's; this service
only reads it, never sets it. A server that does not answer, or answers with something that is
not a time, is Talos's error (``error querying NTP server "<server>": ...``, ``error validating
NTP response: ...``) with gRPC code Unknown, as a plain Go error is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.timeapi import time_grpc, time_pb2
from ichor.machined import authz, sntp
from ichor.machined.controllers.network.timeservers import DEFAULT_TIME_SERVERS

__all__ = ["TimeService"]

Query = Callable[[str], Awaitable[sntp.Sample]]
RolesOf = Callable[[Stream[Any, Any]], Collection[str]]


class TimeService(time_grpc.TimeServiceBase):
    """``servers()`` gives the node's configured time servers now (empty: Talos's default)."""

    def __init__(
        self,
        servers: Callable[[], list[str]],
        *,
        roles_of: RolesOf,
        query: Query = sntp.query,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._servers = servers
        self._roles_of = roles_of
        self._query = query
        self._clock = clock

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:
        authz.check(f"/time.TimeService/{name}", self._roles_of(stream))
        request = await stream.recv_message()
        assert request is not None
        return request

    async def Time(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "Time")
        servers = self._servers() or list(DEFAULT_TIME_SERVERS)
        await stream.send_message(await self._check(servers[0]))

    async def TimeCheck(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "TimeCheck")
        await stream.send_message(await self._check(request.server))

    async def _check(self, server: str) -> time_pb2.TimeResponse:
        try:
            sample = await self._query(server)
        except sntp.SNTPError as exc:
            raise GRPCError(Status.UNKNOWN, f"error validating NTP response: {exc}") from None
        except (OSError, TimeoutError) as exc:
            reason = str(exc) or ("i/o timeout" if isinstance(exc, TimeoutError) else type(exc).__name__)
            raise GRPCError(Status.UNKNOWN, f'error querying NTP server "{server}": {reason}') from None
        local = self._clock()
        reply = time_pb2.Time(server=server)
        reply.localtime.FromDatetime(local)
        reply.remotetime.FromDatetime(local + timedelta(seconds=sample.offset))
        return time_pb2.TimeResponse(messages=[reply])
