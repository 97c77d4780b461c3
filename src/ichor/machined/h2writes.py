"""One socket write per event-loop turn for each HTTP/2 connection of machined's gRPC stack.

grpclib writes to its transport after every HTTP/2 operation: a unary reply alone is three writes
(headers, message, trailers), each a TLS record and a ``send()`` on apid's connections. Under load
those writes were the largest single cost of a proxied call (``py-spy`` on a soaked control plane:
~14% of its CPU in the transports' ``write``). :func:`coalesce_h2_writes` makes every connection
opened from then on collect what is written during one turn of the event loop and hand it to the
transport at the start of the next turn, as one write: the same bytes in the same order, sent
microseconds later.

Nothing here changes what goes on the wire, only how it is cut into writes. Closing a connection
sends what was collected first; aborting it drops it, as aborting a transport does.
"""

from __future__ import annotations

__all__ = ["CoalescingTransport", "coalesce_h2_writes"]

import asyncio
from typing import Any


class CoalescingTransport:
    """A transport that collects writes and passes them on once per event-loop turn.

    Everything but writing and closing goes to the wrapped transport unchanged (flow control
    included: the wrapped transport still tells the protocol to pause and resume).
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self._pending.append(bytes(data))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Hand what was collected to the transport now (a no-op when nothing is waiting)."""
        self._scheduled = False
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def coalesce_h2_writes() -> None:
    """Make every grpclib HTTP/2 connection this process opens from now on coalesce its writes."""
    from grpclib.protocol import H2Protocol

    if getattr(H2Protocol.connection_made, "_ichor_coalescing", False):
        return
    original = H2Protocol.connection_made

    def connection_made(self: H2Protocol, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):
            transport = CoalescingTransport(transport, asyncio.get_running_loop())  # type: ignore[assignment]
        original(self, transport)

    connection_made._ichor_coalescing = True  # type: ignore[attr-defined]
    H2Protocol.connection_made = connection_made  # type: ignore[method-assign]
