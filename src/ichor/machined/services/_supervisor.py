"""The supervisor: runs loaded services through Talos's state machine and keeps their history.

One :class:`Supervisor` per node, entered as an async context manager: it owns a TaskGroup with one
task per started service, so no service outlives it (leaving it stops everything in reverse
dependency order). Each service task goes Starting -> Waiting (dependencies and conditions, the
unmet ones listed) -> Preparing -> Running (restarted by its policy) -> Finished/Failed/Skipped,
recording Talos's event texts. Health checks run beside the runner. Time is injected (``clock``
for timestamps, ``sleep`` for restart delays and health intervals).
A service's own run (states, restarts, health checks) is in ``_service_runner``.

This module must not publish resources or speak gRPC: machined mirrors services into COSI through
``on_change``/:meth:`Supervisor.subscribe` and maps errors to gRPC codes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from pathlib import Path
from types import TracebackType

from ichor.machined.cosi import Clock, Sleep, utc_now
from ichor.machined.logfile import follow_file
from ichor.machined.platform import Layout
from ichor.machined.services._conditions import Condition
from ichor.machined.services._errors import ServiceError, UnknownServiceError, WaitTimeoutError
from ichor.machined.services._events import MAX_EVENTS_TO_KEEP, ServiceEvent, ServiceState
from ichor.machined.services._runners import Runner
from ichor.machined.services._service import ApiOperation, Service, check_api_operation
from ichor.machined.services._service_runner import ServiceInfo, _last_message, _ServiceRunner

__all__ = ["REVERSE_DEPENDENCY_STOP_TIMEOUT", "ServiceInfo", "Subscription", "Supervisor"]

log = logging.getLogger("ichor.machined.services")

REVERSE_DEPENDENCY_STOP_TIMEOUT = 30.0
"""How long stop_all lets a service wait for its dependents to stop (Talos Shutdown: 30 s)."""

SUBSCRIPTION_BUFFER = 1024
"""Events a slow subscriber may lag behind before the oldest are dropped."""


class Subscription:
    """Service events as they happen; use ``async with`` (or :meth:`close`) to unsubscribe."""

    def __init__(self, owner: Supervisor) -> None:
        self._owner = owner
        self._queue: asyncio.Queue[ServiceEvent] = asyncio.Queue(SUBSCRIPTION_BUFFER)

    def _offer(self, event: ServiceEvent) -> None:
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(event)

    def close(self) -> None:
        self._owner._subscribers.discard(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> ServiceEvent:
        return await self._queue.get()


class Supervisor:
    """Loads, starts, stops and reports on a node's services (Talos ``system.Services``).

    ``on_change`` is called with a fresh :class:`ServiceInfo` after every event of a service (state
    change or health change); machined mirrors it into ``Services.v1alpha1.talos.dev``. It must not
    block.
    """

    def __init__(
        self,
        layout: Layout,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        on_change: Callable[[ServiceInfo], None] | None = None,
        history_size: int = MAX_EVENTS_TO_KEEP,
    ) -> None:
        self.layout = layout
        self.clock: Clock = clock or utc_now
        self.sleep: Sleep = sleep or asyncio.sleep
        self.on_change = on_change
        self.history_size = history_size
        self._services: dict[str, _ServiceRunner] = {}
        self._subscribers: set[Subscription] = set()
        self._changed = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._terminating = False

    # --- ownership ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Supervisor:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._group is not None
        self._terminating = True
        try:
            if exc_type is None:
                await self.stop_all()
            else:
                for runner in self._services.values():
                    runner.stop_event.set()
        finally:
            group, self._group = self._group, None
            await group.__aexit__(exc_type, exc, tb)

    # --- notifications -----------------------------------------------------------------------------

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _publish(self, event: ServiceEvent, runner: _ServiceRunner) -> None:
        for subscription in list(self._subscribers):
            subscription._offer(event)
        if self.on_change is not None:
            try:
                self.on_change(runner.info())
            except Exception:
                log.exception("on_change hook failed for service %s", event.service)
        self._notify()

    async def _wait_until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    def _dependency(self, dep: str) -> Condition:
        def describe() -> str:
            if dep not in self._services:
                return f'service "{dep}" to be registered'
            return f'service "{dep}" to be "up"'

        async def wait() -> None:
            await self._wait_until(lambda: dep in self._services and self._services[dep].up)

        return Condition(f'service "{dep}" to be "up"', wait, describe)

    def subscribe(self) -> Subscription:
        """Every service event from now on (``talosctl events``); close it when done."""
        subscription = Subscription(self)
        self._subscribers.add(subscription)
        return subscription

    # --- loading and queries -----------------------------------------------------------------------

    def load(self, *services: Service) -> list[str]:
        """Add services; an id that is already loaded keeps its first definition (as in Talos)."""
        ids = []
        for service in services:
            ids.append(service.id)
            if service.id not in self._services and not self._terminating:
                self._services[service.id] = _ServiceRunner(service, self)
        self._notify()
        return ids

    def _get(self, service_id: str) -> _ServiceRunner:
        try:
            return self._services[service_id]
        except KeyError:
            raise UnknownServiceError(
                f'service "{service_id}" not defined',
                hint=f"loaded services: {', '.join(sorted(self._services)) or 'none'}",
            ) from None

    def log_path(self, service_id: str) -> Path:
        return self.layout.log_dir / f"{service_id}.log"

    def info(self, service_id: str) -> ServiceInfo:
        return self._get(service_id).info()

    def list(self) -> list[ServiceInfo]:
        """Every loaded service, by id."""
        return [self._services[i].info() for i in sorted(self._services)]

    def is_running(self, service_id: str) -> bool:
        return self._get(service_id).running

    def runner(self, service_id: str) -> Runner | None:
        """The runner of a service's current run (None unless it got that far)."""
        return self._get(service_id).runner

    # --- control -----------------------------------------------------------------------------------

    def start(self, *service_ids: str) -> None:
        """Start services (already running ones are left alone); records "Starting service"."""
        runners = [self._get(i) for i in service_ids]
        if self._group is None:
            raise ServiceError(
                "the service supervisor is not running",
                hint="start services inside `async with Supervisor(...)`",
            )
        if self._terminating:
            return
        for runner in runners:
            if runner.running:
                continue
            runner.stop_event = asyncio.Event()
            runner.stop_reason = None
            runner.record(ServiceState.STARTING, "Starting service")
            runner.task = self._group.create_task(runner.lifecycle(), name=f"service {runner.service.id}")

    def start_all(self) -> None:
        self.start(*sorted(self._services))

    async def stop(self, *service_ids: str, reason: str | None = None) -> None:
        """Stop services and wait until each has reached a terminal state (and its processes are gone).

        With a ``reason``, a service stopped before it ran (waiting, or in its pre stage) is Finished
        with that reason rather than Failed with "context canceled".
        """
        runners = [self._get(i) for i in service_ids]
        tasks = []
        for runner in runners:
            if runner.task is not None and not runner.task.done():
                runner.stop_reason = reason
                runner.stop_event.set()
                tasks.append(runner.task)
        if tasks:
            await asyncio.wait(tasks)

    async def restart(self, service_id: str) -> None:
        await self.stop(service_id)
        self.start(service_id)

    async def stop_all(self, *, keep: Collection[str] = ()) -> None:
        """Stop every service but ``keep``, each only after the services depending on it have stopped.

        Unlike Talos, a dependent that was never started counts as stopped, so it does not hold its
        dependencies for the whole 30 s limit.
        """
        dependents: dict[str, list[str]] = {i: [] for i in self._services}
        for runner in self._services.values():
            for dep in runner.service.depends_on:
                if dep in dependents:
                    dependents[dep].append(runner.service.id)

        async def stop_one(service_id: str) -> None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REVERSE_DEPENDENCY_STOP_TIMEOUT):
                    await self._wait_until(
                        lambda: not any(self._services[d].running for d in dependents[service_id])
                    )
            await self.stop(service_id)

        async with asyncio.TaskGroup() as group:
            for service_id in sorted(set(self._services) - set(keep)):
                group.create_task(stop_one(service_id))

    async def wait_up(self, service_ids: Iterable[str], timeout: float) -> None:
        """Wait until every service is up; on timeout say what each one still is doing."""
        runners = [self._get(i) for i in service_ids]
        try:
            async with asyncio.timeout(timeout):
                await self._wait_until(lambda: all(r.up for r in runners))
        except TimeoutError:
            lagging = [r for r in runners if not r.up]
            details = "; ".join(f'service "{r.service.id}" is {r.state}: {_last_message(r)}' for r in lagging)
            raise WaitTimeoutError(
                f"timed out after {timeout:g} s waiting for services to be up: {details}",
                hint="see `talosctl services` and `talosctl logs <service>` on the node",
            ) from None

    # --- the Talos API rules -----------------------------------------------------------------------

    async def api_start(self, service_id: str) -> None:
        """``talosctl service <id> start``: a running service is left alone."""
        runner = self._get(service_id)
        if runner.running:
            return
        check_api_operation(service_id, ApiOperation.START)
        self.start(service_id)

    async def api_stop(self, service_id: str) -> None:
        """``talosctl service <id> stop``: a service that is not running is left alone."""
        runner = self._get(service_id)
        if not runner.running:
            return
        check_api_operation(service_id, ApiOperation.STOP)
        await self.stop(service_id)

    async def api_restart(self, service_id: str) -> None:
        """``talosctl service <id> restart``: restart of a service not running is a start."""
        runner = self._get(service_id)
        if not runner.running:
            await self.api_start(service_id)
            return
        check_api_operation(service_id, ApiOperation.RESTART)
        await self.restart(service_id)

    # --- logs --------------------------------------------------------------------------------------

    def follow_log(
        self,
        service_id: str,
        *,
        tail: int | None = None,
        follow: bool = False,
        poll_interval: float = 0.1,
    ) -> AsyncIterator[bytes]:
        """Lines of a service's log (see :func:`~ichor.machined.logfile.follow_file`); an unknown
        service is refused here, before the first line."""
        self._get(service_id)
        return follow_file(self.log_path(service_id), tail=tail, follow=follow, poll_interval=poll_interval)
