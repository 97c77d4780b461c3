"""Kubernetes's rules for label keys and values and taints, as Talos 1.7 checks ``machine.nodeLabels``
and ``machine.nodeTaints`` (Talos's ``machinery/labels``: the same texts, each error at the key).

A key is a qualified name: an optional DNS-1123 subdomain prefix (at most 253 characters) and
``/``, then a name of at most 63 alphanumerics, ``-``, ``_`` and ``.`` that starts and ends
alphanumeric. A label value is empty or such a name. A taint is ``value:effect`` or ``effect``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ._paths import PathElem
from ._validate_base import _q, _Report

__all__ = ["TAINT_EFFECTS", "label_key_error", "label_value_error", "parse_taint", "validate_node_metadata"]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_MAX_NAME = 63
_MAX_SUBDOMAIN = 253


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a qualified name (Talos's words), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"invalid format: too many slashes: {_q(key)}"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return f"prefix cannot be empty: {_q(key)}"
        if len(prefix) > _MAX_SUBDOMAIN:
            return f"prefix {_q(prefix)} is invalid: domain name length exceeds limit of 253: {_q(prefix)}"
        if not _SUBDOMAIN.fullmatch(prefix):
            return f"prefix {_q(prefix)} is invalid: domain doesn't match required format: {_q(prefix)}"
    if not name:
        return f"name cannot be empty: {_q(key)}"
    if len(name) > _MAX_NAME:
        return f"name is too long: {_q(key)} (limit is {_MAX_NAME})"
    if not _NAME.fullmatch(name):
        return f"name {_q(name)} is invalid"
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a label value (Talos's words), or None."""
    if len(value) > _MAX_NAME:
        return f"label value length exceeds limit of {_MAX_NAME}: {_q(value)}"
    if value and not _NAME.fullmatch(value):
        return f"label value {_q(value)} is invalid"
    return None


def parse_taint(text: str) -> tuple[str, str]:
    """``value:effect`` or ``effect`` -> (value, effect), as Talos reads a ``machine.nodeTaints`` entry."""
    value, sep, effect = text.partition(":")
    return (value, effect) if sep else ("", value)


def validate_node_metadata(
    labels: Mapping[str, str] | None, taints: Mapping[str, str] | None, r: _Report
) -> None:
    """``machine.nodeLabels`` and ``machine.nodeTaints``: one error per bad entry, at its key."""
    for key in sorted(labels or {}):
        path: list[PathElem] = ["machine", "nodeLabels", key]
        for problem in (label_key_error(key), label_value_error(str((labels or {})[key] or ""))):
            if problem is not None:
                r.error(path, f"invalid machine node labels: {problem}")
    for key in sorted(taints or {}):
        path = ["machine", "nodeTaints", key]
        problem = label_key_error(key)
        raw = str((taints or {})[key] or "")
        value, effect = parse_taint(raw)
        if problem is None and effect not in TAINT_EFFECTS:
            problem = f"invalid taint effect: {_q(effect)} (one of {', '.join(TAINT_EFFECTS)})"
        if problem is None and ":" in raw:
            problem = label_value_error(value)
        if problem is not None:
            r.error(path, f"invalid machine node taints: {problem}")
