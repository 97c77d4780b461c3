"""The one exception tree of :mod:`ichor.kubebuild`.

::

    MachineryError (ichor.machinery.errors)
    └── KubeBuildError      a component that cannot be built, verified, packed or pushed; carries ``hint``
"""

from __future__ import annotations

__all__ = ["KubeBuildError"]

from ichor.machinery.errors import MachineryError


class KubeBuildError(MachineryError):
    """Kubernetes or one of its companions could not be built from its modules, packed or pushed."""
