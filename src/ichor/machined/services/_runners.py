"""Runners: what a service actually runs — a child process, or an async function ("goroutine").

A runner runs its work once per call of :meth:`Runner.run`; restart policy, health and states live
in the supervisor. ``run`` returns when the work ends by itself (None = success, :class:`RunnerError`
= failure) or, once ``stop`` is set, after stopping it: a process gets SIGTERM, then SIGKILL after
the service's stop timeout; a goroutine is cancelled. Runners never leave anything behind: a child's
whole process group is killed whenever ``run`` returns or is cancelled.

Processes start only through :mod:`ichor.machinery.proc`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ichor.machined.services._errors import RunnerError
from ichor.machined.services._events import ServiceState
from ichor.machinery import proc
from ichor.machinery.aio import race
from ichor.machinery.errors import ProcessError
from ichor.machinery.goquote import quote

__all__ = [
    "GoroutineMain",
    "GoroutineRunner",
    "ProcessRunner",
    "Recorder",
    "RunContext",
    "Runner",
    "RunnerFactory",
    "goroutine",
    "process",
]


Recorder = Callable[[ServiceState, str], None]
"""How a runner reports a state change with Talos's message (``Process ... started with PID n``)."""

GoroutineMain = Callable[[IO[str]], Awaitable[None]]
"""A goroutine service's body: gets its log (text, line-buffered), is cancelled to stop."""


@dataclass(frozen=True)
class RunContext:
    """What the supervisor tells a runner factory about the service it runs for."""

    service_id: str
    log_path: Path
    stop_timeout: float


class Runner(Protocol):
    def __str__(self) -> str:
        """Talos's runner name used in messages: ``Process(["/bin/x" "-a"])``, ``Goroutine("apid")``."""
        ...

    async def run(self, record: Recorder, stop: asyncio.Event) -> None: ...


RunnerFactory = Callable[[RunContext], "Runner | None"]
"""Builds a fresh runner for each start; returning None makes the service ``Skipped``."""


def _exit_text(code: int) -> str:
    """Go's ``exec.ExitError`` text, which Talos puts into restart and failure events."""
    if code < 0:
        name = signal.strsignal(-code) or f"signal {-code}"
        return f"signal: {name.lower()}"
    return f"exit status {code}"


class ProcessRunner:
    """Runs one child process with stdout+stderr appended to the service log."""

    def __init__(
        self,
        args: Sequence[str],
        context: RunContext,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.args = [str(a) for a in args]
        self.context = context
        self.env = env
        self.cwd = cwd
        self.process: proc.Process | None = None

    def __str__(self) -> str:
        return f"Process([{' '.join(quote(a) for a in self.args)}])"

    @property
    def pids(self) -> list[int]:
        """Live PIDs of the current child's process group (empty when nothing runs)."""
        return self.process.group_pids() if self.process is not None else []

    async def run(self, record: Recorder, stop: asyncio.Event) -> None:
        try:
            child = await proc.spawn(self.args, output=self.context.log_path, env=self.env, cwd=self.cwd)
        except ProcessError as err:
            raise RunnerError(f"error starting process: {err}") from err
        self.process = child
        try:
            record(ServiceState.RUNNING, f"Process {self} started with PID {child.pid}")
            stopped, code = await race(child.wait(), stop)
            if not stopped:
                # Whatever the leader forked dies with it, as Talos's cgroup kill does.
                child.kill()
                if code:
                    raise RunnerError(_exit_text(code))
                return
            record(ServiceState.STOPPING, f"Sending SIGTERM to {self}")
            child.terminate()
            try:
                async with asyncio.timeout(self.context.stop_timeout):
                    await child.wait()
            except TimeoutError:
                record(ServiceState.STOPPING, f"Sending SIGKILL to {self}")
                child.kill()
                await child.wait()
            child.kill()
        finally:
            if child.exit_code is None:
                child.kill()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(child.wait())
            else:
                child.kill()


class GoroutineRunner:
    """Runs an async function as a task of its own; stopping cancels it."""

    def __init__(self, main: GoroutineMain, context: RunContext) -> None:
        self.main = main
        self.context = context

    def __str__(self) -> str:
        return f"Goroutine({quote(self.context.service_id)})"

    async def run(self, record: Recorder, stop: asyncio.Event) -> None:
        self.context.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.context.log_path.open("a", buffering=1) as log:
            record(ServiceState.RUNNING, "Service started as goroutine")
            try:
                # A body that cancels itself ends cleanly, like Go's context.Canceled.
                await race(self.main(log), stop)
            except Exception as err:
                raise RunnerError(str(err) or type(err).__name__) from err


def process(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> RunnerFactory:
    """A runner factory for a child process (``args[0]`` is the program)."""

    def factory(context: RunContext) -> Runner:
        return ProcessRunner(args, context, env=env, cwd=cwd)

    return factory


def goroutine(main: GoroutineMain) -> RunnerFactory:
    """A runner factory for an async function run inside machined (apid, trustd, maintenance)."""

    def factory(context: RunContext) -> Runner:
        return GoroutineRunner(main, context)

    return factory
