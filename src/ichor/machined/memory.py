"""machined's memory after load: a bound on what HTTP/2 connections remember, freed heap given back
to the kernel once the node is idle, and an opt-in tracemalloc dump for finding what Python holds.

h2 remembers how each closed stream of a connection ended, up to 65536 streams per connection: on
the connections that live as long as the node (apid to machined, both ends in this process, and
apid to other nodes) that grew by ~100 bytes a call to ~8 MiB each, most of what a soak left behind
(``tracemalloc``: +725 KiB after 8000 calls, all in ``H2Connection._closed_streams``).
:func:`bound_h2_closed_streams` keeps the last :data:`H2_CLOSED_STREAMS` instead: what a late frame
on a stream this end reset needs is the streams closed within one round trip.

grpclib's server keeps the handler of every closed connection until ten more connections have
arrived (its ``__gc_step__``), and with the handler its last finished calls, through which the
connection's HTTP/2 state and TLS buffers stay alive: after 100 clients hung up, a control plane
held ~18 MiB for connections that no longer existed, until new clients happened to come (the soak
at 100 clients x 40 s: 1.25x its idle RSS after the run, whatever the allocator settings).
:func:`release_closed_grpc_connections` drops them; the idle trim below does it first.

glibc keeps memory freed by Python in its malloc arenas: after a burst of API calls the node's RSS
stays up by tens of MiB although nothing holds it (measured in ``benchmarks/soak.py``: 100 clients
left a control plane at 1.6x its idle RSS, ``malloc_trim(0)`` took a third of that back).
:class:`IdleTrimmer` runs a full garbage collection (cycles left by a burst, such as the
tracebacks of failed calls, would otherwise wait for a rare full collection) and ``malloc_trim(0)``
once the node has been idle for a while after being busy, so the trim never competes with calls under load and an idle node is not trimmed again and
again. "Idle" is the process's own CPU use over the last window, which covers API calls,
controllers and everything else the node does without a hook in each of them.
``ICHOR_MALLOC_TRIM=0`` in machined's environment turns it off (to measure the node without it).

``ICHOR_TRACEMALLOC=<frames>`` in machined's environment starts :mod:`tracemalloc` with that many
frames per traceback; then ``kill -USR1 <machined PID>`` writes a snapshot to
``<node root>/system/run/tracemalloc-<n>.snapshot`` (load it with ``tracemalloc.Snapshot.load``
and compare two with ``compare_to``). Debugging only: tracemalloc slows every allocation.

What a burst leaves after all that (~15% of the idle RSS after 100 clients) is allocator high
water, not objects: tracemalloc saw +0.4 MiB of Python allocations where RSS grew by 14 MiB, the
growth sat in heap pages and pymalloc arenas still holding a few live objects each, and a second
100-client burst right after the first added 0.7 MiB (the memory is reused). Neither
``MALLOC_ARENA_MAX=2`` nor ``PYTHONMALLOC=malloc`` lowered it (measured before the release above:
1.23x and 1.25x against 1.25x), nor, after it, a fixed ``MALLOC_MMAP_THRESHOLD_`` (1.16x against
1.16x) or remembering 256 closed HTTP/2 streams instead of 4096 (1.15x).

Nothing here changes what the node answers: it bounds and frees memory nobody needs.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import time
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = [
    "H2_CLOSED_STREAMS",
    "MALLOC_TRIM_ENV",
    "TRACEMALLOC_ENV",
    "IdleTrimmer",
    "bound_h2_closed_streams",
    "glibc_trim",
    "release_closed_grpc_connections",
    "start_tracemalloc_from_env",
]

log = logging.getLogger(__name__)

TRACEMALLOC_ENV = "ICHOR_TRACEMALLOC"
MALLOC_TRIM_ENV = "ICHOR_MALLOC_TRIM"
#: Seconds of the window over which the node's CPU use decides whether it is idle: the trim comes
#: 2-4 s after the load ends.
IDLE_WINDOW = 2.0
#: The node is idle below this share of one CPU over :data:`IDLE_WINDOW` (an idle node's
#: controllers and health checks use about 1%; 20 clients keep it above 50%).
IDLE_CPU_SHARE = 0.05
#: Closed streams an HTTP/2 connection remembers (h2's default: 65536): ten seconds of calls at the
#: ~400 calls/s a node serves, far more than can close while a reset stream's late frames arrive.
H2_CLOSED_STREAMS = 4096


def bound_h2_closed_streams(limit: int = H2_CLOSED_STREAMS) -> None:
    """Make every HTTP/2 connection this process opens from now on remember ``limit`` closed streams."""
    from h2.connection import H2Connection

    H2Connection.MAX_CLOSED_STREAMS = limit


def release_closed_grpc_connections() -> int:
    """Make every grpclib server of this process forget its closed connections now; returns how many
    connections the servers still hold (the open ones, and closed ones whose calls still finish)."""
    from grpclib._registry import servers

    held = 0
    for server in list(servers):
        server.__gc_collect__()
        held += len(server._handlers)
    return held


def glibc_trim(environ: Mapping[str, str] | None = None) -> Callable[[], int] | None:
    """Closed gRPC connections released (:func:`release_closed_grpc_connections`), a full
    ``gc.collect()``, then ``malloc_trim(0)`` of the C library; or None where there is none (musl
    has no such call) or ``ICHOR_MALLOC_TRIM=0`` turns it off (to measure the node without it)."""
    if (os.environ if environ is None else environ).get(MALLOC_TRIM_ENV) == "0":
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def collect_and_trim() -> int:
        release_closed_grpc_connections()
        gc.collect()
        return int(trim(0))

    return collect_and_trim


class IdleTrimmer:
    """Calls ``trim`` once per idle period that follows a busy one.

    ``cpu`` is the process's CPU seconds so far and ``clock`` a monotonic clock, both injectable:
    :meth:`tick` decides from them alone, so a test drives it without sleeping.
    """

    def __init__(
        self,
        trim: Callable[[], int],
        *,
        window: float = IDLE_WINDOW,
        idle_share: float = IDLE_CPU_SHARE,
        cpu: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = trim
        self.window = window
        self._idle_share = idle_share
        self._cpu = cpu
        self._clock = clock
        self._last = (clock(), cpu())
        # A node starts busy (boot); the first idle window after it trims.
        self._busy_since_trim = True
        self.trims = 0

    def tick(self) -> bool:
        """Look at the CPU used since the last tick; trim if it was idle after a busy spell."""
        now, used = self._clock(), self._cpu()
        (then, before), self._last = self._last, (now, used)
        elapsed = now - then
        if elapsed <= 0:
            return False
        if (used - before) / elapsed >= self._idle_share:
            self._busy_since_trim = True
            return False
        if not self._busy_since_trim:
            return False
        self._busy_since_trim = False
        self._trim()
        self.trims += 1
        return True

    async def run(self) -> None:
        """Tick every :attr:`window` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.window)
            self.tick()


def start_tracemalloc_from_env(root: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Start tracemalloc and the SIGUSR1 snapshot dump if ``ICHOR_TRACEMALLOC`` asks for it."""
    value = (os.environ if environ is None else environ).get(TRACEMALLOC_ENV, "")
    if not value:
        return False
    try:
        frames = int(value)
    except ValueError:
        log.warning("%s=%r is not a number of frames; tracemalloc stays off", TRACEMALLOC_ENV, value)
        return False
    tracemalloc.start(max(1, frames))
    counter = iter(range(1, 1_000_000))

    def dump(signum: int, frame: object) -> None:
        target = root / "system/run" / f"tracemalloc-{next(counter)}.snapshot"
        target.parent.mkdir(parents=True, exist_ok=True)
        tracemalloc.take_snapshot().dump(str(target))
        log.warning("tracemalloc snapshot written to %s", target)

    signal.signal(signal.SIGUSR1, dump)
    log.warning("tracemalloc on (%d frames): kill -USR1 %d writes a snapshot", frames, os.getpid())
    return True
