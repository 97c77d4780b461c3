"""One loaded service's life: Starting -> Waiting -> Preparing -> Running (restarted by its policy,
health-checked beside the runner) -> Finished/Failed/Skipped, with Talos's event texts and history.

:class:`_ServiceRunner` is what the :class:`~ichor.machined.services.Supervisor` keeps per service; it
reports each event back to its owner and reads time (``clock``, ``sleep``) from it. It never starts a
task itself: the supervisor runs :meth:`_ServiceRunner.lifecycle` in its TaskGroup.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ichor.machined.services._conditions import Condition, join_descriptions
from ichor.machined.services._errors import RunnerError
from ichor.machined.services._events import EventHistory, HealthStatus, ServiceEvent, ServiceState
from ichor.machined.services._runners import RunContext, Runner
from ichor.machined.services._service import RestartPolicy, Service
from ichor.machinery.aio import race

if TYPE_CHECKING:
    from ichor.machined.services._supervisor import Supervisor

__all__ = ["ServiceInfo"]

log = logging.getLogger("ichor.machined.services")


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


class _Stopped(Exception):
    """Ends a service run that a stop with a reason interrupted before it ran: Finished, with the reason."""


def _capitalize(message: str) -> str:
    return message[:1].upper() + message[1:]


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
        self.stop_reason: str | None = None
        """Why the current stop was asked for; a stop with a reason before the service ran is a
        finish (Talos's ``[Finished]: Bootstrap requested``), not a failure."""
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
        except _Stopped:
            assert self.stop_reason is not None
            self.record(ServiceState.FINISHED, self.stop_reason)
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
                raise self._stopped("failed to run pre stage: context canceled")

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
            reason = f": {service.skip_reason}" if service.skip_reason else ""
            self.record(ServiceState.SKIPPED, f"Service skipped{reason}")
            return
        self.runner = runner

        try:
            await self._supervise(runner)
        except RunnerError as err:
            raise _Failed(f"failed running service: error running service: {err}") from err
        self.record(ServiceState.FINISHED, "Service finished successfully")

    def _stopped(self, failure: str) -> Exception:
        return _Stopped() if self.stop_reason is not None else _Failed(failure)

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
                    raise self._stopped("condition failed: context canceled")
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
        passed = False
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
                passed = True
            starting = not passed and check.startup_period is not None
            await self.owner.sleep(
                check.startup_period if starting and check.startup_period else check.period
            )

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


def _last_message(runner: _ServiceRunner) -> str:
    events = runner.history.last(1)
    return events[0].message if events else "not started"
