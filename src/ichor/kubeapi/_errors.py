"""The exception tree of :mod:`ichor.kubeapi` (drawn in the package docstring)."""

from __future__ import annotations

__all__ = [
    "KubeAPIError",
    "KubeAlreadyExistsError",
    "KubeConnectionError",
    "KubeNotFoundError",
    "KubeResponseError",
    "KubeStatusError",
    "KubeUnknownKindError",
    "KubeconfigInvalidError",
]


class KubeAPIError(Exception):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class KubeconfigInvalidError(KubeAPIError):
    pass


class KubeConnectionError(KubeAPIError):
    pass


class KubeResponseError(KubeAPIError):
    pass


class KubeStatusError(KubeAPIError):
    """A ``Status`` failure: ``code`` is the HTTP status, ``reason`` Kubernetes's (``NotFound``...)."""

    def __init__(self, message: str, *, code: int, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.reason = reason


class KubeNotFoundError(KubeStatusError):
    pass


class KubeAlreadyExistsError(KubeStatusError):
    pass


class KubeUnknownKindError(KubeAPIError):
    pass
