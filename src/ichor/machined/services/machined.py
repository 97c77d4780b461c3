"""The ``machined`` service: the machine API (and COSI, storage, cluster, inspect) on machined's unix
socket ``/system/run/machined/machine.sock``, which apid proxies to.

apid runs in the same process; the service also publishes its handlers to ``machine_api`` while it
serves, and apid calls them in-process (:mod:`ichor.machined.apid._inproc`) instead of over the
socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from ichor.machined.platform import Layout
from ichor.machined.server._codec import grpc_server
from ichor.machined.services import RestartPolicy, Service, goroutine

if TYPE_CHECKING:
    from ichor.machined.apid import MachineApi

__all__ = ["machined_service"]


CLOSE_TIMEOUT = 10.0
"""Seconds the machine API waits for its cancelled calls to end when it stops."""


def machined_service(
    layout: Layout, handlers: Callable[[], list[Any]], machine_api: MachineApi | None = None
) -> Service:
    """``handlers`` builds the gRPC services to serve (fresh for every start)."""

    async def run(log_file: IO[str]) -> None:
        sock = layout.machined_socket
        sock.unlink(missing_ok=True)
        servables = handlers()
        server = grpc_server(servables)
        await server.start(path=str(sock))
        if machine_api is not None:
            machine_api.publish(servables)
        log_file.write(f"serving machine API on {sock}\n")
        log_file.flush()
        try:
            await asyncio.Event().wait()
        finally:
            if machine_api is not None:
                machine_api.withdraw()
            server.close()
            try:  # cancelled calls end at once; one that does not must not hold the node's stop
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await server.wait_closed()
            except TimeoutError:
                log_file.write(f"calls still running {CLOSE_TIMEOUT:.0f} s after the machine API stopped\n")
            sock.unlink(missing_ok=True)
            if sock != layout.path("/system/run/machined/machine.sock"):
                with contextlib.suppress(OSError):  # the short stand-in directory, if now empty
                    sock.parent.rmdir()

    return Service("machined", goroutine(run), description="Machine API", restart=RestartPolicy.FOREVER)
