"""Which kind of config document a raw YAML mapping is, and its identity in a multi-document config.

Talos's rules: a document with ``kind`` is selected by ``apiVersion`` + ``kind`` (and, for named kinds,
``name``); a document without ``kind`` is the v1alpha1 ``Config`` when it has ``version`` or any of
the legacy top-level keys (``machine``, ``cluster``, ``debug``, ``persist``).
Patching and loading both match documents by this identity.
"""

from __future__ import annotations

__all__ = ["V1ALPHA1", "DocIdentity", "document_identity", "is_v1alpha1"]

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

V1ALPHA1 = "v1alpha1"
_V1ALPHA1_KEYS = frozenset({"version", "machine", "cluster", "debug", "persist"})


def is_v1alpha1(raw: Mapping[str, Any]) -> bool:
    """True when ``raw`` is the v1alpha1 ``Config`` document (which has no ``kind``)."""
    return "kind" not in raw and any(key in raw for key in _V1ALPHA1_KEYS)


@dataclass(frozen=True)
class DocIdentity:
    """``apiVersion/kind[/name]``; the v1alpha1 Config is ``v1alpha1/Config``."""

    api_version: str
    kind: str
    name: str | None = None

    def __str__(self) -> str:
        base = f"{self.api_version}/{self.kind}"
        return f"{base}/{self.name}" if self.name else base

    @property
    def is_v1alpha1(self) -> bool:
        return self.kind == "Config" and self.api_version == V1ALPHA1


def document_identity(raw: Mapping[str, Any]) -> DocIdentity | None:
    """The identity of a raw document, or ``None`` when it has neither ``kind`` nor v1alpha1 keys."""
    if is_v1alpha1(raw):
        return DocIdentity(V1ALPHA1, "Config")
    kind = raw.get("kind")
    if kind is None:
        return None
    name = raw.get("name")
    return DocIdentity(str(raw.get("apiVersion", "")), str(kind), str(name) if name is not None else None)
