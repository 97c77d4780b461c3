"""YAML paths: how a location inside a config document is written in messages, and its source line.

Paths are tuples of keys and list indexes, written ``machine.network.interfaces[0].addresses`` (keys
that are not plain words are quoted: ``machine.registries.mirrors["ghcr.io"]``). This module only
formats and locates; it knows nothing of config kinds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

PathElem = str | int

_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: Sequence[PathElem]) -> str:
    """``("machine", "kubelet", "image")`` -> ``machine.kubelet.image``; ``()`` -> ``(document root)``."""
    out = ""
    for elem in path:
        if isinstance(elem, int):
            out += f"[{elem}]"
        elif _WORD.match(elem):
            out += f".{elem}" if out else elem
        else:
            out += '["' + elem.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return out or "(document root)"


def line_of(raw: Any, path: Sequence[PathElem]) -> int | None:
    """1-based source line of ``path`` inside a ruamel-loaded document, if known."""
    node = raw
    line: int | None = None
    lc = getattr(node, "lc", None)
    if lc is not None and getattr(lc, "line", None) is not None:
        line = lc.line + 1
    for elem in path:
        try:
            if isinstance(node, Mapping):
                pos = node.lc.key(elem) if hasattr(node, "lc") else None
                node = node[elem]
            elif isinstance(node, list) and isinstance(elem, int):
                pos = node.lc.item(elem) if hasattr(node, "lc") else None
                node = node[elem]
            else:
                return line
        except (KeyError, IndexError, TypeError, AttributeError):
            return line
        if pos is not None and pos[0] is not None:
            line = pos[0] + 1
    return line
