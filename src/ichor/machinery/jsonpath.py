"""The subset of Kubernetes JSONPath that resource print columns use.

Supported inside ``{...}``: ``.field``, ``['field']``, ``[n]`` (negative allowed), ``[*]``,
``[start:end]`` (``[:]`` = everything). Text outside braces is copied. Missing keys yield nothing
(``talosctl get`` runs JSONPath with missing keys allowed). Several results are joined by a space;
strings print as-is, maps and lists as compact JSON, booleans as ``true``/``false``.

This is a renderer for table cells; it must not grow into a query language.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["JSONPathError", "render_jsonpath"]


class JSONPathError(ValueError):
    """The expression is not valid in the supported subset."""


_STEP_RE = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*(?P<star>\*)\s*\]
      | \[\s*(?P<start>-?\d*)\s*:\s*(?P<end>-?\d*)\s*\]
      | \[\s*(?P<index>-?\d+)\s*\]
    """,
    re.VERBOSE,
)


def _steps(expr: str) -> list[re.Match[str]]:
    expr = expr.strip()
    if expr in ("", "."):
        return []
    if expr.startswith(("$", "@")):
        # Both the root ($) and the current value (@) are the whole value at the top level.
        expr = expr[1:]
    steps: list[re.Match[str]] = []
    pos = 0
    while pos < len(expr):
        match = _STEP_RE.match(expr, pos)
        if match is None:
            raise JSONPathError(f"unsupported JSONPath {expr!r} at offset {pos}")
        steps.append(match)
        pos = match.end()
    return steps


def _apply(step: re.Match[str], values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        key = step.group("field") if step.group("field") is not None else step.group("quoted")
        if key is not None:
            if isinstance(value, dict) and key in value:
                out.append(value[key])
        elif step.group("star") is not None:
            if isinstance(value, list):
                out.extend(value)
            elif isinstance(value, dict):
                out.extend(value.values())
        elif step.group("index") is not None:
            idx = int(step.group("index"))
            if isinstance(value, list) and -len(value) <= idx < len(value):
                out.append(value[idx])
        elif isinstance(value, list):
            start = int(step.group("start")) if step.group("start") else None
            end = int(step.group("end")) if step.group("end") else None
            out.extend(value[start:end])
    return out


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def render_jsonpath(template: str, data: Any) -> str:
    """Evaluate a JSONPath template such as ``{.stage}`` or ``{.aliases[:]}`` over plain data."""
    out: list[str] = []
    pos = 0
    while pos < len(template):
        open_at = template.find("{", pos)
        if open_at < 0:
            out.append(template[pos:])
            break
        close_at = template.find("}", open_at)
        if close_at < 0:
            raise JSONPathError(f"unclosed '{{' in JSONPath {template!r}")
        out.append(template[pos:open_at])
        values = [data]
        for step in _steps(template[open_at + 1 : close_at]):
            values = _apply(step, values)
        out.append(" ".join(_text(v) for v in values))
        pos = close_at + 1
    return "".join(out)
