"""machined's memory after load: give freed heap back to the kernel once the node is idle, and an
opt-in tracemalloc dump for finding what Python holds.

glibc keeps memory freed by Python in its malloc arenas: after a burst of API calls the node's RSS
stays up by tens of MiB although nothing holds it (measured in ``benchmarks/soak.py``: 100 clients
left a control plane at 1.6x its idle RSS, ``malloc_trim(0)`` took a third of that back).
:class:`IdleTrimmer` calls ``malloc_trim(0)`` once the node has been idle for a while after being
busy, so the trim never competes with calls under load and an idle node is not trimmed again and
again. "Idle" is the process's own CPU use over the last window, which covers API calls,
controllers and everything else the node does without a hook in each of them.

``ICHOR_TRACEMALLOC=<frames>`` in machined's environment starts :mod:`tracemalloc` with that many
frames per traceback; then ``kill -USR1 <machined PID>`` writes a snapshot to
``<node root>/system/run/tracemalloc-<n>.snapshot`` (load it with ``tracemalloc.Snapshot.load``
and compare two with ``compare_to``). Debugging only: tracemalloc slows every allocation.

This module must not change what the node does: it only frees memory nobody holds.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import signal
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

__all__ = ["TRACEMALLOC_ENV", "IdleTrimmer", "glibc_trim", "start_tracemalloc_from_env"]

log = logging.getLogger(__name__)

TRACEMALLOC_ENV = "ICHOR_TRACEMALLOC"
#: Seconds of the window over which the node's CPU use decides whether it is idle: the trim comes
#: 2-4 s after the load ends.
IDLE_WINDOW = 2.0
#: The node is idle below this share of one CPU over :data:`IDLE_WINDOW` (an idle node's
#: controllers and health checks use about 1%; 20 clients keep it above 50%).
IDLE_CPU_SHARE = 0.05


def glibc_trim() -> Callable[[], int] | None:
    """``malloc_trim(0)`` of the C library, or None where there is none (musl has no such call)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


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


def start_tracemalloc_from_env(root: Path, environ: dict[str, str] | None = None) -> bool:
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
