"""Just enough TOML to write containerd's configuration and ``hosts.toml`` files, and the deep merge
of ``/etc/cri/conf.d/*.part`` (reading is the standard library's ``tomllib``).

Values are strings, booleans, integers, lists of those (or of lists, for ``client`` key pairs) and
tables; a table is written as ``[a."b.c"]`` with keys quoted whenever they are not bare words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["dumps", "merge"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps(document: Mapping[str, Any]) -> str:
    """``document`` as TOML text: plain keys first, then each table (depth first)."""
    lines: list[str] = []

    def table(path: list[str], body: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in body.items() if not isinstance(v, Mapping)]
        nested = [(k, v) for k, v in body.items() if isinstance(v, Mapping)]
        if path and (plain or not nested):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in plain)
        for k, v in nested:
            table([*path, k], v)

    table([], document)
    return "\n".join(lines) + "\n"


def merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: tables merge key by key, anything else in ``override`` replaces ``base``'s."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(dict(out[key]), value)
        else:
            out[key] = value
    return out
