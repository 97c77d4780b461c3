"""The supervisor: runs loaded services through Talos's state machine and keeps their history.

One :class:`Supervisor` per node, entered as an async context manager: it owns a TaskGroup with one
task per started service, so no service outlives it (leaving it stops everything in reverse
dependency order). Each service task goes Starting -> Waiting (dependencies and conditions, the
unmet ones listed) -> Preparing -> Running (restarted by its policy) -> Finished/Failed/Skipped,
recording Talos's event texts. Health checks run beside the runner. Time is injected (``clock``
for timestamps, ``sleep`` for restart delays and health intervals).

This module must not publish resources or speak gRPC: machined mirrors services into COSI through
``on_change``/:meth:`Supervisor.subscribe` and maps errors to gRPC codes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from ichor.machined.cosi import Clock, Sleep, utc_now
from ichor.machined.logfile import follow_file
from ichor.machined.platform import Layout
from ichor.machined.services._conditions import Condition, join_descriptions
from ichor.machined.services._errors import (
    RunnerError,
    ServiceError,
    UnknownServiceError,
    WaitTimeoutError,
)
from ichor.machined.services._events import (
    MAX_EVENTS_TO_KEEP,
    EventHistory,
    HealthStatus,
    ServiceEvent,
    ServiceState,
)
from ichor.machined.services._runners import RunContext, Runner, race
from ichor.machined.services._service import (
    ApiOperation,
    RestartPolicy,
    Service,
    check_api_operation,
)

__all__ = ["REVERSE_DEPENDENCY_STOP_TIMEOUT", "ServiceInfo", "Subscription", "Supervisor"]

log = logging.getLogger("ichor.machined.services")

REVERSE_DEPENDENCY_STOP_TIMEOUT = 30.0
"""How long stop_all lets a service wait for its dependents to stop (Talos Shutdown: 30 s)."""

SUBSCRIPTION_BUFFER = 1024
"""Events a slow subscriber may lag behind before the oldest are dropped."""


@dataclass(frozen=True)
class ServiceInfo:
    """A snapshot of one service for ``talosctl services`` and the ``Services`` resource."""

    id: str
    description: str
    state: ServiceState
    health: HealthStatus
    events: tuple[ServiceEvent, ...]
    running: bool
    """The service's task is alive (it was started and has not reached a terminal state)."""
    up: bool
    """Talos "up": Running and healthy (or without a health check), or Finished/Skipped."""
    waiting_for: str | None
    """While Waiting: what for (``service "cri" to be "up", network``), or ``restart``."""
    waiting_since: datetime | None
    """While Waiting: when the service entered Waiting."""
    has_health_check: bool


class _Failed(Exception):
    """Ends a service run as Failed with this (lower-case, Talos-wrapped) message."""


def _capitalize(message: str) -> str:
    return message[:1].upper() + message[1:]


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


class _ServiceRunner:
    """One loaded service: its state, history, health and (while started) its task."""

    def __init__(self, service: Service, owner: Supervisor) -> None:
        self.service = service
        self.owner = owner
        self.state = ServiceState.INITIALIZED
        self.history = EventHistory(owner.history_size)
        self.health = HealthStatus()
        self.waiting_for: str | None = None
        self.waiting_since: datetime | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop_event = asyncio.Event()
        self.runner: Runner | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    @property
    def up(self) -> bool:
        if self.state in (ServiceState.FINISHED, ServiceState.SKIPPED):
            return True
        if self.state is ServiceState.RUNNING:
            return self.service.health_check is None or self.health.healthy is True
        return False

    def info(self) -> ServiceInfo:
        return ServiceInfo(
            id=self.service.id,
            description=self.service.description,
            state=self.state,
            health=self.health,
            events=tuple(self.history),
            running=self.running,
            up=self.up,
            waiting_for=self.waiting_for,
            waiting_since=self.waiting_since,
            has_health_check=self.service.health_check is not None,
        )

    def record(self, state: ServiceState, message: str, *, waiting_for: str | None = None) -> None:
        now = self.owner.clock()
        if state is ServiceState.WAITING:
            if self.state is not ServiceState.WAITING:
                self.waiting_since = now
            self.waiting_for = waiting_for
        else:
            self.waiting_since = None
            self.waiting_for = None
        self.state = state
        self._emit(ServiceEvent(self.service.id, state, message, now, self.health))

    def record_from_runner(self, state: ServiceState, message: str) -> None:
        """What runners and the restart loop report; leaving Running makes the service unhealthy."""
        waiting_for = "restart" if state is ServiceState.WAITING else None
        self.record(state, message, waiting_for=waiting_for)
        if state is not ServiceState.RUNNING and self.service.health_check is not None:
            self.update_health(False, "service not running")

    def update_health(self, healthy: bool, message: str) -> None:
        changed = self.health.healthy is None or self.health.healthy != healthy
        last_change = self.owner.clock() if changed else self.health.last_change
        self.health = HealthStatus(healthy=healthy, last_message=message, last_change=last_change)
        if not changed or self.state is not ServiceState.RUNNING:
            # Talos reports health only on a change and only while running.
            self.owner._notify()
            return
        text = "Health check successful" if healthy else f"Health check failed: {message}"
        self._emit(ServiceEvent(self.service.id, self.state, text, self.owner.clock(), self.health))

    def _emit(self, event: ServiceEvent) -> None:
        self.history.push(event)
        log.info("service[%s](%s): %s", event.service, event.state, event.message)
        self.owner._publish(event, self)

    # --- the service's life, run as one task of the supervisor -------------------------------------

    async def lifecycle(self) -> None:
        try:
            await self._lifecycle()
        except _Failed as failure:
            self.record(ServiceState.FAILED, _capitalize(str(failure)))
        except Exception as err:  # a bug in a runner or a pre function must not take machined down
            log.exception("service %s crashed", self.service.id)
            self.record(ServiceState.FAILED, _capitalize(f"failed running service: {err}"))
        finally:
            self.runner = None

    async def _lifecycle(self) -> None:
        service = self.service
        conditions = [self.owner._dependency(dep) for dep in service.depends_on]
        conditions.extend(service.conditions)
        if conditions:
            await self._wait_for(conditions)

        self.record(ServiceState.PREPARING, "Running pre state")
        if service.pre is not None:
            try:
                stopped, _ = await race(service.pre(), self.stop_event)
            except Exception as err:
                raise _Failed(f"failed to run pre stage: {err}") from err
            if stopped:
                raise _Failed("failed to run pre stage: context canceled")

        self.record(ServiceState.PREPARING, "Creating service runner")
        context = RunContext(
            service_id=service.id,
            log_path=self.owner.log_path(service.id),
            stop_timeout=service.stop_timeout,
        )
        try:
            runner = service.runner(context)
        except Exception as err:
            raise _Failed(f"failed to create runner: {err}") from err
        if runner is None:
            self.record(ServiceState.SKIPPED, "Service skipped")
            return
        self.runner = runner

        try:
            await self._supervise(runner)
        except RunnerError as err:
            raise _Failed(f"failed running service: error running service: {err}") from err
        self.record(ServiceState.FINISHED, "Service finished successfully")

    async def _wait_for(self, conditions: list[Condition]) -> None:
        pending: dict[asyncio.Future[Any], Condition] = {
            asyncio.ensure_future(c.wait()): c for c in conditions
        }
        stopper: asyncio.Future[Any] = asyncio.ensure_future(self.stop_event.wait())
        changed: asyncio.Future[Any] = asyncio.ensure_future(self.owner._changed.wait())
        shown = ""

        def show() -> None:
            nonlocal shown
            text = join_descriptions([c for c in conditions if c in pending.values()])
            if text and text != shown:
                shown = text
                self.record(ServiceState.WAITING, f"Waiting for {text}", waiting_for=text)

        try:
            show()
            while pending:
                done, _ = await asyncio.wait(
                    {*pending, stopper, changed}, return_when=asyncio.FIRST_COMPLETED
                )
                if stopper in done:
                    raise _Failed("condition failed: context canceled")
                for future in done & pending.keys():
                    del pending[future]
                    err = future.exception()
                    if err is not None:
                        raise _Failed(f"condition failed: {err}") from err
                if changed.done():
                    # Descriptions may change without a condition completing ("to be registered").
                    changed = asyncio.ensure_future(self.owner._changed.wait())
                show()
        finally:
            leftovers = [*pending, stopper, changed]
            for future in leftovers:
                future.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)

    async def _supervise(self, runner: Runner) -> None:
        check = self.service.health_check
        if check is None:
            await self._restart_loop(runner)
            return
        self.health = HealthStatus(healthy=None, last_message="Unknown", last_change=self.owner.clock())
        async with asyncio.TaskGroup() as group:
            prober = group.create_task(self._probe_health(), name=f"health {self.service.id}")
            try:
                await self._restart_loop(runner)
            finally:
                prober.cancel()

    async def _probe_health(self) -> None:
        check = self.service.health_check
        assert check is not None
        await self.owner.sleep(check.initial_delay)
        while True:
            try:
                async with asyncio.timeout(check.timeout):
                    await check.check()
            except TimeoutError:
                self.update_health(False, "context deadline exceeded")
            except Exception as err:
                self.update_health(False, str(err) or type(err).__name__)
            else:
                self.update_health(True, "")
            await self.owner.sleep(check.period)

    async def _restart_loop(self, runner: Runner) -> None:
        service = self.service
        while True:
            error: RunnerError | None = None
            try:
                await runner.run(self.record_from_runner, self.stop_event)
            except RunnerError as err:
                error = err
            if self.stop_event.is_set() or service.restart is RestartPolicy.ONCE:
                if error is not None:
                    raise error
                return
            if service.restart is RestartPolicy.UNTIL_SUCCESS:
                if error is None:
                    return
                self.record_from_runner(
                    ServiceState.WAITING,
                    f"Error running {runner}, going to restart until it succeeds: {error}",
                )
            elif error is None:
                self.record_from_runner(
                    ServiceState.WAITING, f"Runner {runner} exited without error, going to restart it"
                )
            else:
                self.record_from_runner(
                    ServiceState.WAITING, f"Error running {runner}, going to restart forever: {error}"
                )
            stopped, _ = await race(self.owner.sleep(service.restart_delay), self.stop_event)
            if stopped:
                self.record_from_runner(ServiceState.STOPPING, "Aborting restart sequence")
                return


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
            runner.record(ServiceState.STARTING, "Starting service")
            runner.task = self._group.create_task(runner.lifecycle(), name=f"service {runner.service.id}")

    def start_all(self) -> None:
        self.start(*sorted(self._services))

    async def stop(self, *service_ids: str) -> None:
        """Stop services and wait until each has reached a terminal state (and its processes are gone)."""
        runners = [self._get(i) for i in service_ids]
        tasks = []
        for runner in runners:
            if runner.task is not None and not runner.task.done():
                runner.stop_event.set()
                tasks.append(runner.task)
        if tasks:
            await asyncio.wait(tasks)

    async def restart(self, service_id: str) -> None:
        await self.stop(service_id)
        self.start(service_id)

    async def stop_all(self) -> None:
        """Stop every service, each only after the services depending on it have stopped.

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
            for service_id in sorted(self._services):
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


def _last_message(runner: _ServiceRunner) -> str:
    events = runner.history.last(1)
    return events[0].message if events else "not started"
