"""``cluster.ClusterService/HealthCheck``: the cluster health checks, run on the node.

The checks are :mod:`ichor.client.health`'s; they need a Talos API client (to reach every node
through apid), which the integrator supplies as ``client_factory`` (an async context manager
factory), and the nodes to check come from the request or, when it names none, from the cluster
members that client's node knows (:func:`ichor.client.health.discover`, the reader ``talosctl
health --server=false`` uses too) or, if the integrator passes one, from ``members`` (``(machine
type, addresses)`` each). Each progress line is streamed as a ``HealthCheckProgress``; a check that
fails or runs out of time ends the stream with a gRPC error (DeadlineExceeded for a timeout).
Nothing here knows how the client is built or which node we are.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.cluster import cluster_grpc, cluster_pb2

ClientFactory = Callable[[], AbstractAsyncContextManager[Any]]
DEFAULT_WAIT = timedelta(minutes=20)


class ClusterService(cluster_grpc.ClusterServiceBase):
    """HealthCheck over a client from ``client_factory`` (check ``interval`` in seconds, for tests)."""

    def __init__(
        self,
        client_factory: ClientFactory,
        *,
        interval: float = 1.0,
        roles_of: Callable[[Stream[Any, Any]], Collection[str]] | None = None,
        members: Callable[[], list[tuple[str, list[str]]]] | None = None,
    ) -> None:
        self._factory = client_factory
        self._interval = interval
        self._roles_of = roles_of
        self._members = members

    async def HealthCheck(
        self, stream: Stream[cluster_pb2.HealthCheckRequest, cluster_pb2.HealthCheckProgress]
    ) -> None:
        from ichor.client.health import ClusterInfo, HealthCheckError, HealthError, discover, run_checks

        if self._roles_of is not None:
            from ichor.machined import authz

            authz.check("/cluster.ClusterService/HealthCheck", self._roles_of(stream))
        request = await stream.recv_message()
        assert request is not None
        info = request.cluster_info
        try:
            given = ClusterInfo.from_flags(list(info.control_plane_nodes), list(info.worker_nodes))
            from_request = given is not None
            if given is None and self._members is not None:
                given = ClusterInfo.from_members(self._members())
        except HealthError as exc:
            raise GRPCError(Status.INVALID_ARGUMENT, f"{exc}: {exc.hint}") from None
        wait = (
            request.wait_timeout.ToTimedelta() if request.HasField("wait_timeout") else DEFAULT_WAIT
        ) or DEFAULT_WAIT
        lines: list[str] = []

        async def announce(cluster: ClusterInfo) -> None:
            nodes = " ".join(f'"{n}"' for n in [*cluster.control_plane_nodes, *cluster.worker_nodes])
            await stream.send_message(cluster_pb2.HealthCheckProgress(message=f"discovered nodes: [{nodes}]"))

        async def flush() -> None:
            while lines:
                await stream.send_message(cluster_pb2.HealthCheckProgress(message=lines.pop(0)))

        async def sleep(seconds: float) -> None:
            import asyncio

            await flush()
            await asyncio.sleep(seconds)

        if given is not None and not from_request:  # nodes the caller named were not discovered
            await announce(given)
        async with self._factory() as client:
            if given is None:
                try:
                    given = await discover(client)
                except HealthError as exc:
                    raise GRPCError(Status.INVALID_ARGUMENT, f"{exc}: {exc.hint}") from None
                await announce(given)
            cluster = given
            try:
                await run_checks(
                    client,
                    cluster,
                    timeout=wait,
                    report=lines.append,
                    interval=self._interval,
                    sleep=sleep,
                    k8s_endpoint=request.cluster_info.force_endpoint,
                )
            except HealthCheckError as exc:
                await flush()
                code = (
                    Status.DEADLINE_EXCEEDED
                    if str(exc).startswith("timed out")
                    else Status.FAILED_PRECONDITION
                )
                raise GRPCError(code, str(exc)) from None
            await flush()
