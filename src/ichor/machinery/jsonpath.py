"""The subset of Kubernetes JSONPath that resource print columns and ``talosctl get -o jsonpath`` use.

Supported inside ``{...}``: ``.field``, ``['field']``, ``[n]`` (negative allowed), ``[*]``,
``[start:end]`` (``[:]`` = everything), and the equality filter ``[?(@.field=="value")]`` (Talos's
StaticPodStatus column ``{.conditions[?(@.type=="Ready")].status}``). Two evaluations:

* :func:`render_jsonpath` renders a table cell: text outside braces is copied, missing keys yield
  nothing, several results are joined by a space; strings print as-is, maps and lists as compact
  JSON, booleans as ``true``/``false``.
* :func:`find_results` is Kubernetes' ``FindResults`` without missing keys allowed (talosctl's
  ``-o jsonpath``): one list of results per template part (text outside braces is a part of its
  own), and a field nobody has or an index past the end raises :class:`JSONPathNotFoundError`.

This is a renderer and a lookup; it must not grow into a query language.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["JSONPathError", "JSONPathNotFoundError", "find_results", "parse_template", "render_jsonpath"]


class JSONPathError(ValueError):
    """The expression is not valid in the supported subset."""


class JSONPathNotFoundError(LookupError):
    """:func:`find_results`: the path matches nothing in the data (Kubernetes' ``<key> is not found``)."""


_STEP_RE = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*(?P<star>\*)\s*\]
      | \[\s*(?P<start>-?\d*)\s*:\s*(?P<end>-?\d*)\s*\]
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*\?\(\s*@\.(?P<by>[A-Za-z0-9_\-]+)\s*==\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*\)\s*\]
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


def _apply(step: re.Match[str], values: list[Any], *, strict: bool = False) -> list[Any]:
    out: list[Any] = []
    key = step.group("field") if step.group("field") is not None else step.group("quoted")
    for value in values:
        if key is not None:
            if isinstance(value, dict) and key in value:
                out.append(value[key])
        elif step.group("by") is not None:
            wanted = step.group("dq") if step.group("dq") is not None else step.group("sq")
            if isinstance(value, list):
                by = step.group("by")
                out.extend(v for v in value if isinstance(v, dict) and by in v and _text(v[by]) == wanted)
        elif step.group("star") is not None:
            if isinstance(value, list):
                out.extend(value)
            elif isinstance(value, dict):
                out.extend(value.values())
        elif step.group("index") is not None:
            idx = int(step.group("index"))
            if isinstance(value, list) and -len(value) <= idx < len(value):
                out.append(value[idx])
            elif strict and isinstance(value, list):
                raise JSONPathNotFoundError(f"array index out of bounds: index {idx}, length {len(value)}")
            elif strict:
                raise JSONPathNotFoundError(f"{_text(value)} is not array or slice")
        elif isinstance(value, list):
            start = int(step.group("start")) if step.group("start") else None
            end = int(step.group("end")) if step.group("end") else None
            out.extend(value[start:end])
    if strict and key is not None and not out:
        raise JSONPathNotFoundError(f"{key} is not found")
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


def parse_template(template: str) -> list[str | list[re.Match[str]]]:
    """The template's parts: text outside braces, and the steps of each ``{...}``; raises
    :class:`JSONPathError` for what the supported subset does not have."""
    parts: list[str | list[re.Match[str]]] = []
    pos = 0
    while pos < len(template):
        open_at = template.find("{", pos)
        if open_at < 0:
            parts.append(template[pos:])
            break
        close_at = template.find("}", open_at)
        if close_at < 0:
            raise JSONPathError(f"unclosed '{{' in JSONPath {template!r}")
        if open_at > pos:
            parts.append(template[pos:open_at])
        parts.append(_steps(template[open_at + 1 : close_at]))
        pos = close_at + 1
    return parts


def render_jsonpath(template: str, data: Any) -> str:
    """Evaluate a JSONPath template such as ``{.stage}`` or ``{.aliases[:]}`` over plain data."""
    out: list[str] = []
    for part in parse_template(template):
        if isinstance(part, str):
            out.append(part)
            continue
        values = [data]
        for step in part:
            values = _apply(step, values)
        out.append(" ".join(_text(v) for v in values))
    return "".join(out)


def find_results(template: str, data: Any) -> list[list[Any]]:
    """Every part's results, as Kubernetes' ``FindResults`` (text parts give their text); raises
    :class:`JSONPathNotFoundError` when a part matches nothing, :class:`JSONPathError` when invalid."""
    results: list[list[Any]] = []
    for part in parse_template(template):
        if isinstance(part, str):
            results.append([part])
            continue
        values = [data]
        for step in part:
            values = _apply(step, values, strict=True)
        results.append(values)
    return results
