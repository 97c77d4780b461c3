"""The controller runtime: runs every registered controller, wakes it, restarts it.

Each controller is supervised by one task in an :class:`asyncio.TaskGroup`, plus one watch task per
input type. Any input change (and any change to an output it owns that is tearing down, so it can
finish the teardown once finalizers are released) sets the controller's wake-up flag; bursts
coalesce into one pass. A controller that raises is restarted after an exponential backoff, read
through an injectable sleep, and its last error is kept in :meth:`Runtime.status`. Every start,
failure (with the error and the restart delay) and finish is a line of the runtime's log
(:class:`RuntimeLog`, a file given at construction).

:meth:`Runtime.run` returns only when cancelled; cancelling it cancels every controller. The runtime
must not know what any controller does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from datetime import datetime

from ichor.machined.cosi._controller import Controller, ControllerContext, OutputKind, Sleep
from ichor.machined.cosi._definitions import Registry
from ichor.machined.cosi._errors import RegistrationError
from ichor.machined.cosi._log import ControllerLogger, LogLevel, RuntimeLog, go_duration
from ichor.machined.cosi._resource import Clock, Phase, utc_now
from ichor.machined.cosi._state import EventType, State, Watch
from ichor.machined.cosi._waits import WAIT_STATUSES

__all__ = ["Backoff", "ControllerStatus", "Runtime"]


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Delay before restart number ``n`` (1-based): ``initial * factor**(n-1)``, capped at ``maximum``."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 60.0

    def delay(self, failures: int) -> float:
        return float(min(self.maximum, self.initial * self.factor ** max(0, failures - 1)))


@dataclasses.dataclass(frozen=True)
class ControllerStatus:
    name: str
    running: bool
    restarts: int
    """Times the controller was restarted after an error, since the runtime started."""
    consecutive_failures: int
    """Failures since the last pass that completed; drives the backoff."""
    last_error: str | None
    last_error_at: datetime | None
    next_delay: float | None
    """Backoff the next failure would wait."""


@dataclasses.dataclass
class _Supervised:
    controller: Controller
    wakeup: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    running: bool = False
    restarts: int = 0
    failures: int = 0
    last_error: str | None = None
    last_error_at: datetime | None = None


class Runtime:
    """Runs controllers against one :class:`State`."""

    def __init__(
        self,
        state: State,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        backoff: Backoff | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """``log_path``: where the runtime's own log goes (controllers starting, failing, restarting,
        finishing, and what they log through ``ctx.logger``), one line each in Talos's shape."""
        self.state = state
        self.registry = registry
        self._clock = clock or utc_now
        self.log = RuntimeLog(log_path, clock=self._clock)
        self._sleep: Sleep = sleep or asyncio.sleep
        self._backoff = backoff or Backoff()
        self._controllers: dict[str, _Supervised] = {}
        self._started = False

    def register(self, controller: Controller) -> None:
        """Add a controller before :meth:`run`; names are unique and an exclusive output has one writer."""
        if self._started:
            raise RegistrationError(f'controller "{controller.name}": cannot register while the runtime runs')
        if not getattr(controller, "name", ""):
            raise RegistrationError(f"{type(controller).__name__} has no name")
        if controller.name in self._controllers:
            raise RegistrationError(f'controller "{controller.name}" is already registered')
        for out in controller.outputs:
            for other in self._controllers.values():
                for theirs in other.controller.outputs:
                    if theirs.type.type != out.type.type:
                        continue
                    if OutputKind.EXCLUSIVE in (out.kind, theirs.kind):
                        raise RegistrationError(
                            f'controller "{controller.name}" cannot output {out.type.type}: '
                            f'controller "{other.controller.name}" already does ({theirs.kind})',
                            hint="two controllers may write a type only when both declare it shared",
                        )
        self._controllers[controller.name] = _Supervised(controller)

    @property
    def controllers(self) -> Sequence[str]:
        return list(self._controllers)

    def registered(self) -> Sequence[Controller]:
        """The controllers in registration order: with their declared inputs and outputs, the
        controller graph (``talosctl inspect dependencies``)."""
        return [sup.controller for sup in self._controllers.values()]

    def status(self, name: str) -> ControllerStatus:
        sup = self._controllers[name]
        return ControllerStatus(
            name=name,
            running=sup.running,
            restarts=sup.restarts,
            consecutive_failures=sup.failures,
            last_error=sup.last_error,
            last_error_at=sup.last_error_at,
            next_delay=self._backoff.delay(sup.failures + 1),
        )

    async def run(self) -> None:
        """Run until cancelled."""
        if self._started:
            raise RuntimeError("the runtime is already running")
        self._started = True
        if self.registry is not None:
            if WAIT_STATUSES.type not in self.registry:
                self.registry.register(WAIT_STATUSES)
            self.registry.publish(self.state)
        try:
            async with asyncio.TaskGroup() as tg:
                for sup in self._controllers.values():
                    # Watches open here, before any controller runs, so no change slips between
                    # a controller's first read and its first wait.
                    for ns, type_name, id, own_outputs in self._watched(sup.controller):
                        watch = self.state.watch_kind(ns, type_name, bootstrap=False)
                        tg.create_task(
                            self._forward(sup, watch, ns, type_name, id, own_outputs),
                            name=f"watch {sup.controller.name} {type_name}",
                        )
                    tg.create_task(self._supervise(sup), name=f"controller {sup.controller.name}")
                await asyncio.Event().wait()
        finally:
            self._started = False

    @staticmethod
    def _watched(controller: Controller) -> list[tuple[str, str, str | None, bool]]:
        out: list[tuple[str, str, str | None, bool]] = [
            (inp.ns, inp.type.type, inp.id, False) for inp in controller.inputs
        ]
        for output in controller.outputs:
            out.append((output.ns, output.type.type, None, True))
        return out

    async def _forward(
        self, sup: _Supervised, watch: Watch, ns: str, type_name: str, id: str | None, own_outputs: bool
    ) -> None:
        name = sup.controller.name
        while True:
            async for event in watch:
                if event.type is EventType.ERRORED:
                    # Missed events only mean "something changed": a pass reads the state afresh.
                    sup.wakeup.set()
                    break
                if own_outputs:
                    meta = event.resource.metadata
                    if meta.owner == name and meta.phase is Phase.TEARING_DOWN:
                        sup.wakeup.set()
                elif id is None or event.resource.id == id:
                    sup.wakeup.set()
            watch = self.state.watch_kind(ns, type_name, bootstrap=False)

    async def _supervise(self, sup: _Supervised) -> None:
        name = sup.controller.name

        def pass_done() -> None:
            sup.failures = 0

        while True:
            sup.wakeup.set()
            ctx = ControllerContext(
                sup.controller,
                self.state,
                sup.wakeup,
                clock=self._clock,
                sleep=self._sleep,
                on_pass_done=pass_done,
                logger=ControllerLogger(self.log, name),
            )
            sup.running = True
            self.log.write(LogLevel.DEBUG, name, "controller starting")
            try:
                await sup.controller.run(ctx)
            except Exception as exc:
                sup.failures += 1
                sup.restarts += 1
                sup.last_error = f"{type(exc).__name__}: {exc}"
                sup.last_error_at = self._clock()
                delay = self._backoff.delay(sup.failures)
                self.log.write(LogLevel.ERROR, name, "controller failed", error=sup.last_error)
                self.log.write(LogLevel.DEBUG, name, f"restarting controller in {go_duration(delay)}")
                await self._sleep(delay)
                continue
            finally:
                sup.running = False
            self.log.write(LogLevel.DEBUG, name, "controller finished")
            return
