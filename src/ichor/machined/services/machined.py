"""The ``machined`` service: the machine API (and COSI, storage, cluster, inspect) on machined's unix
socket ``/system/run/machined/machine.sock``, which apid proxies to."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import IO, Any

from ichor.machined.platform import Layout
from ichor.machined.server._codec import grpc_server
from ichor.machined.services import RestartPolicy, Service, goroutine

__all__ = ["machined_service"]


def machined_service(layout: Layout, handlers: Callable[[], list[Any]]) -> Service:
    """``handlers`` builds the gRPC services to serve (fresh for every start)."""

    async def run(log_file: IO[str]) -> None:
        sock = layout.machined_socket
        sock.unlink(missing_ok=True)
        server = grpc_server(handlers())
        await server.start(path=str(sock))
        log_file.write(f"serving machine API on {sock}\n")
        log_file.flush()
        try:
            await asyncio.Event().wait()
        finally:
            server.close()
            await server.wait_closed()
            sock.unlink(missing_ok=True)
            if sock != layout.path("/system/run/machined/machine.sock"):
                with contextlib.suppress(OSError):  # the short stand-in directory, if now empty
                    sock.parent.rmdir()

    return Service("machined", goroutine(run), description="Machine API", restart=RestartPolicy.FOREVER)
