"""A bound on the node's way out: once a reboot, shutdown or reset has begun stopping services, the
process exits with its code within :data:`SHUTDOWN_LIMIT` seconds, whatever still waits.

An orderly stop awaits many things (each service's end, the controllers' drain, every task the event
loop still holds when ``asyncio.run`` cancels them); one that never ends (a request handler blocked
on a client that keeps its connection open, a cancellation lost in a timeout) would otherwise hold a
machine in "stopping" until something outside gives up (CI saw an upgrade written and the node still
up 20 minutes later). When the limit passes, a thread of its own (the event loop may be the thing
that is stuck) says so on the console, asks the loop for the stacks of the tasks still pending,
dumps every thread's stack, and ends the process with the code the sequence chose, so the launcher
reboots or powers off as asked (Talos's sequencer gives its shutdown tasks a deadline too).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO

__all__ = ["SHUTDOWN_LIMIT", "ExitDeadline", "pending_task_report"]

SHUTDOWN_LIMIT = 150.0
"""Seconds from "stopping all services" to the process's exit at the latest: the sequencer's own
bound on stopping services (90 s) plus room for the controllers' drain and the loop's teardown."""
REPORT_WAIT = 2.0
"""Seconds the deadline thread gives the event loop to report its pending tasks before exiting."""


def pending_task_report(loop: asyncio.AbstractEventLoop, *, frames: int = 4) -> str:
    """Every task still pending on ``loop`` (call on the loop): its name and innermost frames."""
    lines = []
    for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
        if task is asyncio.current_task(loop) or task.done():
            continue
        stack = task.get_stack(limit=frames)
        where = " <- ".join(f"{f.f_code.co_name} ({os.path.basename(f.f_code.co_filename)}:{f.f_lineno})"
                            for f in reversed(stack)) or "not started"  # fmt: skip
        lines.append(f"task {task.get_name()!r}: {where}")
    return "\n".join(lines) or "no task pending"


class ExitDeadline:
    """Armed once with the exit code; see the module docstring."""

    def __init__(
        self,
        say: Callable[[str], None],
        *,
        limit: float = SHUTDOWN_LIMIT,
        exit: Callable[[int], None] = os._exit,
        dump: Callable[[TextIO], None] = lambda out: faulthandler.dump_traceback(out, all_threads=True),
        out: TextIO | None = None,
    ) -> None:
        self._say = say
        self._limit = limit
        self._exit = exit
        self._dump = dump
        self._out = out
        self._armed = threading.Event()
        self._disarmed = threading.Event()

    def arm(self, code: int) -> None:
        """Start counting (the first call only): the process exits with ``code`` at the limit."""
        if self._armed.is_set():
            return
        self._armed.set()
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._watch, args=(loop, code), name="exit deadline", daemon=True).start()

    def disarm(self) -> None:
        """The process is about to end on its own (tests; a clean exit needs no call)."""
        self._disarmed.set()

    def _tell(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a console closed under it still ends the process
            self._say(line)

    def _watch(self, loop: asyncio.AbstractEventLoop, code: int) -> None:
        if self._disarmed.wait(self._limit):
            return
        self._tell(f"the node did not stop within {self._limit:.0f} s of stopping its services: exiting "
                   f"with code {code} all the same; still pending:")  # fmt: skip
        reported = threading.Event()

        def report() -> None:
            try:
                self._tell(pending_task_report(loop))
            finally:
                reported.set()

        try:
            loop.call_soon_threadsafe(report)
        except RuntimeError:  # the loop is closed: only threads are left to show
            reported.set()
        reported.wait(REPORT_WAIT)
        out = self._out if self._out is not None else sys.stderr
        try:
            self._dump(out)
            out.flush()
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        if not self._disarmed.is_set():
            self._exit(code)
