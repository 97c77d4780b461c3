"""The images package's one exception (a :class:`~ichor.machinery.errors.MachineryError`, so the CLI
edge prints it with its hint)."""

from __future__ import annotations

from ichor.machinery.errors import MachineryError

__all__ = ["ImageError"]


class ImageError(MachineryError):
    """An image, reference or registry the user named is wrong, or a registry did not do its part."""
