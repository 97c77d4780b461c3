"""What a service is: id, runner, dependencies, conditions, health check, restart policy.

Definitions only (frozen values and Talos's API operation rule); running them is the supervisor's
job.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ichor.machined.services._conditions import Condition
from ichor.machined.services._errors import OperationNotSupportedError, ServiceLoadError
from ichor.machined.services._runners import RunnerFactory

__all__ = [
    "DEFAULT_RESTART_DELAY",
    "DEFAULT_STOP_TIMEOUT",
    "ApiOperation",
    "HealthCheck",
    "RestartPolicy",
    "Service",
    "check_api_operation",
]

DEFAULT_RESTART_DELAY = 5.0
"""Seconds between restarts (Talos ``restart.DefaultOptions``)."""

DEFAULT_STOP_TIMEOUT = 10.0
"""Seconds between SIGTERM and SIGKILL (Talos ``GracefulShutdownTimeout``)."""

_ID = re.compile(r"^[-_a-z0-9]+$")


class RestartPolicy(enum.StrEnum):
    """When a runner that exited is started again (Talos ``restart.Type``)."""

    ONCE = "Once"
    UNTIL_SUCCESS = "UntilSuccess"
    FOREVER = "Forever"


@dataclass(frozen=True)
class HealthCheck:
    """A health probe: ``check()`` raising means unhealthy, its message is shown to users.

    Defaults are Talos's (``health.DefaultSettings``): first check after 500 ms, then every second,
    each limited to 5 s.
    """

    check: Callable[[], Awaitable[None]]
    initial_delay: float = 0.5
    period: float = 1.0
    timeout: float = 5.0
    startup_period: float | None = None
    """Until the first check passes, probe this often instead (a service that has just come up is
    reported healthy within about this long, not a whole ``period`` later)."""


@dataclass(frozen=True)
class Service:
    """A service machined supervises.

    ``pre`` runs after the conditions are met and before the runner is created (Talos PreFunc);
    ``runner`` is called for every start and may return None to skip the service.
    """

    id: str
    runner: RunnerFactory
    description: str = ""
    depends_on: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()
    health_check: HealthCheck | None = None
    restart: RestartPolicy = RestartPolicy.FOREVER
    restart_delay: float = DEFAULT_RESTART_DELAY
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    pre: Callable[[], Awaitable[None]] | None = field(default=None)
    skip_reason: str = ""
    """Why this node cannot run the service at all: it is shown as Skipped with this reason
    (``Service skipped: ...``) instead of being started."""

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ServiceLoadError(
                f"invalid service id {self.id!r}",
                hint="service ids are lower-case letters, digits, '-' and '_'",
            )
        if self.id in self.depends_on:
            raise ServiceLoadError(f'service "{self.id}" cannot depend on itself')


class ApiOperation(enum.StrEnum):
    START = "start"
    STOP = "stop"
    RESTART = "restart"


def check_api_operation(service_id: str, operation: ApiOperation) -> None:
    """Talos's rule for ``talosctl service <id> start|stop|restart``.

    kubelet may be started and restarted, extension services (``ext-*``) started, stopped and
    restarted; every other service refuses with Talos's message.
    """
    if service_id.startswith("ext-"):
        return
    if service_id == "kubelet" and operation in (ApiOperation.START, ApiOperation.RESTART):
        return
    raise OperationNotSupportedError(
        f'service "{service_id}" doesn\'t support {operation} operation via API',
        hint="only kubelet (start, restart) and extension services ext-* can be controlled via the API",
    )
