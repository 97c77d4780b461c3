"""How errors of :mod:`ichor.machined.cosi` reach gRPC clients: one status code per error class.

The codes are those COSI's gRPC server (runtime v0.4.1) uses, so a Go client's ``state.IsNotFoundError``
and friends work against Ichor. Messages are the runtime's own (Talos adds no hints on the wire).
This module maps errors; it must not decide whether a call is allowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.machined.cosi import (
    AlreadyExistsError,
    AmbiguousTypeError,
    ConflictError,
    CosiError,
    DefinitionError,
    InputNotDeclaredError,
    NotFoundError,
    OutputNotDeclaredError,
    OwnerConflictError,
    PhaseConflictError,
    RegistrationError,
    UnknownTypeError,
)

__all__ = ["NOT_AUTHORIZED", "cosi_errors", "grpc_status_of", "not_authorized", "to_grpc_error"]

NOT_AUTHORIZED = "not authorized"
"""Talos's RBAC refusal text (``authz.ErrNotAuthorized``), always with ``PERMISSION_DENIED``."""

# Most specific first: subclasses before their bases.
_STATUS_BY_ERROR: tuple[tuple[type[CosiError], Status], ...] = (
    (NotFoundError, Status.NOT_FOUND),
    (OwnerConflictError, Status.PERMISSION_DENIED),
    (PhaseConflictError, Status.INVALID_ARGUMENT),
    (AlreadyExistsError, Status.ALREADY_EXISTS),
    (ConflictError, Status.FAILED_PRECONDITION),
    (UnknownTypeError, Status.NOT_FOUND),
    (AmbiguousTypeError, Status.INVALID_ARGUMENT),
    # These are bugs in the node, not in the request.
    (DefinitionError, Status.INTERNAL),
    (RegistrationError, Status.INTERNAL),
    (InputNotDeclaredError, Status.INTERNAL),
    (OutputNotDeclaredError, Status.INTERNAL),
)


def grpc_status_of(exc: CosiError) -> Status:
    """The gRPC status for a runtime error; ``UNKNOWN`` (what Go sends for a plain error) otherwise."""
    for error_class, status in _STATUS_BY_ERROR:
        if isinstance(exc, error_class):
            return status
    return Status.UNKNOWN


def to_grpc_error(exc: CosiError) -> GRPCError:
    return GRPCError(grpc_status_of(exc), str(exc))


def not_authorized() -> GRPCError:
    return GRPCError(Status.PERMISSION_DENIED, NOT_AUTHORIZED)


@contextmanager
def cosi_errors() -> Iterator[None]:
    """Re-raise any :class:`CosiError` raised inside the block as the matching :class:`GRPCError`."""
    try:
        yield
    except CosiError as exc:
        raise to_grpc_error(exc) from exc
