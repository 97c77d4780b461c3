"""The discovery package's exceptions (drawn in the package docstring)."""

from __future__ import annotations

__all__ = ["DecryptError", "DiscoveryConfigError", "DiscoveryError"]


class DiscoveryError(Exception):
    """Base of every error this package raises on purpose; ``hint`` says what to fix."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class DiscoveryConfigError(DiscoveryError):
    """A client cannot be set up: bad endpoint, cluster id or cluster secret."""


class DecryptError(DiscoveryError):
    """An affiliate's data or endpoint does not open with this cluster's key."""
