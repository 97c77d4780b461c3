"""Every RPC machined serves refuses a request body that does not decode: InvalidArgument, no traceback.

Raw bytes go over a real unix socket to the servers machined runs (the machine API, maintenance
mode, trustd), built with the same factory machined uses, for every method they map.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.machined.apid import RawCodec
from ichor.machined.cosi import State
from ichor.machined.platform import Layout
from ichor.machined.server._cluster import ClusterService
from ichor.machined.server._codec import grpc_server
from ichor.machined.server._cosi import StateService
from ichor.machined.server._inspect import InspectService
from ichor.machined.server._machine import MachineService
from ichor.machined.server._maintenance import MaintenanceService
from ichor.machined.server._storage import StorageService
from ichor.machined.trustd import SecurityService

ADMIN = ("os:admin",)
MALFORMED = {
    "truncated varint": b"\xff",
    "length past the end": b"\x0a\x05ab",
    "wire type 7": b"\x0f",
}


def _admin(_stream: Any) -> tuple[str, ...]:
    return ADMIN


class _Etcd:
    async def receive_snapshot(self, chunks: AsyncIterator[bytes]) -> None:
        async for _ in chunks:  # EtcdRecover decodes its stream here, as the node's etcd reads it
            pass


class _Node:
    etcd = _Etcd()


def _machine_api(layout: Layout) -> list[Any]:
    # The dependencies are never reached: a request that does not decode stops before them.
    unused: Any = object()
    return [
        MachineService(_Node(), roles_of=_admin),  # type: ignore[arg-type]
        StateService(State(), roles_of=_admin),
        StorageService(layout),
        ClusterService(lambda: unused, roles_of=_admin, members=list),
        InspectService(unused, roles_of=_admin),
    ]


SERVERS: dict[str, Callable[[Layout], list[Any]]] = {
    "machine API": _machine_api,
    "maintenance": lambda layout: [MaintenanceService(object())],  # type: ignore[arg-type]
    "trustd": lambda layout: [SecurityService(object(), "token", [])],  # type: ignore[arg-type]
}


async def _answers(handlers: list[Any], body: bytes, sock: str) -> dict[str, Status | None]:
    server = grpc_server(handlers)
    await server.start(path=sock)
    channel = Channel(path=sock, codec=RawCodec())
    answers: dict[str, Status | None] = {}
    try:
        for handler in handlers:
            for path, method in handler.__mapping__().items():
                try:
                    async with asyncio.timeout(5):
                        async with channel.request(
                            path, method.cardinality, bytes, bytes, metadata={"token": "token"}
                        ) as stream:
                            await stream.send_message(body, end=True)
                            async for _ in stream:
                                pass
                    answers[path] = None
                except GRPCError as exc:
                    answers[path] = exc.status
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
    return answers


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
@pytest.mark.parametrize("server", list(SERVERS))
def test_every_rpc_answers_invalid_argument_to_a_body_that_does_not_decode(
    server: str, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = Layout(root=Path(tmp), address="127.5.0.2")
        handlers = SERVERS[server](layout)
        answers = asyncio.run(_answers(handlers, body, str(Path(tmp) / "api.sock")))
    # Maintenance mode serves only ApplyConfiguration; everything else is refused before decoding.
    decoded = {p: s for p, s in answers.items() if s is not Status.UNIMPLEMENTED}
    assert decoded, "no RPC read its request"
    wrong = {p: s for p, s in decoded.items() if s is not Status.INVALID_ARGUMENT}
    assert wrong == {}
    assert [r for r in caplog.records if r.exc_info] == [], "a traceback reached the node log"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
