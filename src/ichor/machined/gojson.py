"""JSON as Go's ``encoding/json`` writes a ``map[string]any``: what Talos sends and logs byte for byte.

Keys sorted, no spaces, ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (Go's HTML-safe default), and
numbers as Go's ``float64`` prints them (``1`` for ``1.0``): every JSON number Go decodes into an
``any`` is a ``float64``.
"""

from __future__ import annotations

__all__ = ["go_json"]

import json
from typing import Any

_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _go_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def go_json(value: dict[str, Any]) -> str:
    """``value`` as Go's ``json.Marshal`` writes a ``map[string]any``."""
    text = json.dumps(_go_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _ESCAPES:
        text = text.replace(char, escaped)
    return text
