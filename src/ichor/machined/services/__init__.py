"""machined's service supervisor (Talos ``internal/app/machined/pkg/system``).

A :class:`Service` names what to run (a :func:`process` or a :func:`goroutine`), what it depends on
(other services that must be "up", :class:`Condition` s such as ``time sync`` or a file to exist),
how to check its health and when to restart it. The :class:`Supervisor` runs services through
Talos's states (:class:`ServiceState`) with Talos's event texts, keeps 64 events per service,
streams events to subscribers and service logs (``<log dir>/<id>.log``) to followers, and applies
Talos's rule for which services the API may start/stop/restart (:func:`check_api_operation`).

Exceptions::

    ServiceError                    anything the supervisor refuses; carries an optional ``hint``
    ├── UnknownServiceError         no service with this id is loaded ('service "x" not defined')
    ├── OperationNotSupportedError  'service "x" doesn't support stop operation via API'
    ├── ServiceLoadError            a service definition that cannot be loaded
    ├── WaitTimeoutError            services not up in time (says what each one is doing)
    └── RunnerError                 a run that ended in error (exit status, exception)

The supervisor itself builds no COSI resources and speaks no gRPC: ``v1alpha1.ServiceController``
turns :class:`ServiceInfo` into ``Services.v1alpha1.talos.dev`` and the node publishes
:class:`ServiceEvent` s as ``ServiceStateEvent``. The system services machined runs are defined one
per module here (``machined``, ``apid``, ``trustd``, ``etcd``, ``containerd``, extension services
``ext-<name>`` in ``extensions``), their resource-based conditions in
:mod:`~ichor.machined.services.conditions`.
"""

from __future__ import annotations

from ichor.machined.services._conditions import (
    API_CERTIFICATES,
    ETCD_SPEC,
    NETWORK,
    TIME_SYNC,
    Condition,
    event_is_set,
    file_exists,
    join_descriptions,
)
from ichor.machined.services._errors import (
    OperationNotSupportedError,
    RunnerError,
    ServiceError,
    ServiceLoadError,
    UnknownServiceError,
    WaitTimeoutError,
)
from ichor.machined.services._events import (
    MAX_EVENTS_TO_KEEP,
    HealthStatus,
    ServiceEvent,
    ServiceState,
)
from ichor.machined.services._runners import (
    GoroutineMain,
    GoroutineRunner,
    ProcessRunner,
    Recorder,
    RunContext,
    Runner,
    RunnerFactory,
    goroutine,
    process,
)
from ichor.machined.services._service import (
    DEFAULT_RESTART_DELAY,
    DEFAULT_STOP_TIMEOUT,
    ApiOperation,
    HealthCheck,
    RestartPolicy,
    Service,
    check_api_operation,
)
from ichor.machined.services._supervisor import ServiceInfo, Subscription, Supervisor

__all__ = [
    "API_CERTIFICATES",
    "DEFAULT_RESTART_DELAY",
    "DEFAULT_STOP_TIMEOUT",
    "ETCD_SPEC",
    "MAX_EVENTS_TO_KEEP",
    "NETWORK",
    "TIME_SYNC",
    "ApiOperation",
    "Condition",
    "GoroutineMain",
    "GoroutineRunner",
    "HealthCheck",
    "HealthStatus",
    "OperationNotSupportedError",
    "ProcessRunner",
    "Recorder",
    "RestartPolicy",
    "RunContext",
    "Runner",
    "RunnerError",
    "RunnerFactory",
    "Service",
    "ServiceError",
    "ServiceEvent",
    "ServiceInfo",
    "ServiceLoadError",
    "ServiceState",
    "Subscription",
    "Supervisor",
    "UnknownServiceError",
    "WaitTimeoutError",
    "check_api_operation",
    "event_is_set",
    "file_exists",
    "goroutine",
    "join_descriptions",
    "process",
]
