"""Exceptions of the controller runtime; the tree is drawn in :mod:`ichor.machined.cosi`."""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "AmbiguousTypeError",
    "ConflictError",
    "CosiError",
    "DefinitionError",
    "InputNotDeclaredError",
    "NotFoundError",
    "OutputNotDeclaredError",
    "OwnerConflictError",
    "PendingFinalizersError",
    "PhaseConflictError",
    "RegistrationError",
    "UnknownTypeError",
]


class CosiError(Exception):
    """Base of every error the controller runtime raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class NotFoundError(CosiError):
    """The resource does not exist (gRPC ``NOT_FOUND``)."""


class ConflictError(CosiError):
    """The write contradicts the current state, e.g. a stale expected version."""


class AlreadyExistsError(ConflictError):
    """``create`` of an id that already exists."""


class OwnerConflictError(ConflictError):
    """The resource is owned by another controller (or by the user)."""


class PhaseConflictError(ConflictError):
    """The resource is not in the phase the writer expected (usually: already tearing down)."""


class PendingFinalizersError(ConflictError):
    """``destroy`` while finalizers are still attached."""


class OutputNotDeclaredError(CosiError):
    """A controller wrote a resource type it did not declare as an output."""


class InputNotDeclaredError(CosiError):
    """A controller read a resource it did not declare as an input."""


class DefinitionError(CosiError):
    """A resource type declaration breaks COSI's naming rules."""


class RegistrationError(CosiError):
    """A type or controller cannot be registered (duplicate name, two exclusive writers)."""


class UnknownTypeError(CosiError):
    """No registered type has this name or alias."""


class AmbiguousTypeError(CosiError):
    """More than one registered type answers to this alias."""
