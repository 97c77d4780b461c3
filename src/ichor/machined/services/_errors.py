"""Exceptions of the service supervisor; the tree is drawn in :mod:`ichor.machined.services`."""

from __future__ import annotations

__all__ = [
    "OperationNotSupportedError",
    "RunnerError",
    "ServiceError",
    "ServiceLoadError",
    "UnknownServiceError",
    "WaitTimeoutError",
]


class ServiceError(Exception):
    """Base of every error the supervisor raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class UnknownServiceError(ServiceError):
    """No service with this id is loaded (gRPC ``NOT_FOUND``)."""


class OperationNotSupportedError(ServiceError):
    """Talos refuses start/stop/restart of this service via the API."""


class ServiceLoadError(ServiceError):
    """A service definition that cannot be loaded (bad id, dependency cycle)."""


class WaitTimeoutError(ServiceError):
    """Services did not come up in time; the message says what each one is doing."""


class RunnerError(ServiceError):
    """A runner's work ended with an error (a process's non-zero exit, a goroutine's exception)."""
