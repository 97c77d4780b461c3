"""The exceptions of :mod:`ichor.machined.cri` (tree in the package docstring)."""

from __future__ import annotations

from ichor.machinery.errors import MachineryError

__all__ = ["CRIConfigError", "CRIError", "ContainerdUnavailableError"]


class CRIError(MachineryError):
    """Anything about the node's containerd instances; carries an optional ``hint``."""


class CRIConfigError(CRIError):
    """A configuration that cannot be rendered (a ``.part`` that is not TOML, a bad registry entry)."""


class ContainerdUnavailableError(CRIError):
    """containerd does not answer on its socket (not running yet, or gone)."""
