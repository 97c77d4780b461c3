"""YAML reading and writing in Talos's house style, keeping comments and key order.

Talos writes YAML with 4-space indentation, sequences indented under their key, no line folding,
``""`` for empty strings and ``|`` blocks for multi-line strings. Everything Ichor writes to disk
goes through :func:`dump_documents` so files round-trip byte for byte where Talos's would.

This module only converts between text and (ruamel) Python objects; it knows nothing of configs.
"""

from __future__ import annotations

__all__ = [
    "dump_document",
    "dump_documents",
    "from_plain",
    "load_documents",
    "make_yaml",
    "to_plain",
]

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import ScalarString

from ichor.machinery.errors import YAMLError


class _TalosRepresenter(RoundTripRepresenter):
    """Round-trip representer with Talos's choices for plain Python strings."""

    def represent_str(self, data: str) -> Any:
        if isinstance(data, ScalarString):
            # Loaded with an explicit style (quotes, block): keep what the user wrote.
            return super().represent_str(data)
        if data == "":
            return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
        if "\n" in data:
            return self.represent_scalar("tag:yaml.org,2002:str", data, style="|")
        return self.represent_scalar("tag:yaml.org,2002:str", data)


_TalosRepresenter.add_representer(str, _TalosRepresenter.represent_str)


def make_yaml() -> YAML:
    """A round-trip YAML instance configured the way Talos writes machine configs."""
    yaml = YAML(typ="rt")
    yaml.Representer = _TalosRepresenter
    yaml.indent(mapping=4, sequence=6, offset=4)
    yaml.width = 1 << 20
    yaml.preserve_quotes = True
    yaml.explicit_start = False
    return yaml


def load_documents(text: str | bytes, *, source: str = "<input>") -> list[Any]:
    """Parse every YAML document in ``text``; empty documents are dropped.

    Raises :class:`YAMLError` naming ``source`` and the line of the problem.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YAMLError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    yaml = make_yaml()
    try:
        docs = [doc for doc in yaml.load_all(text) if doc is not None]
    except MarkedYAMLError as exc:
        where = ""
        if exc.problem_mark is not None:
            where = f" at line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1}"
        problem = exc.problem or exc.context or "invalid YAML"
        raise YAMLError(f"{source}: invalid YAML{where}: {problem}") from None
    except RuamelYAMLError as exc:
        raise YAMLError(f"{source}: invalid YAML: {exc}") from None
    return docs


def dump_document(doc: Any) -> str:
    """Serialize one document (no ``---`` marker)."""
    buf = io.StringIO()
    make_yaml().dump(doc, buf)
    return buf.getvalue()


def dump_documents(docs: list[Any]) -> str:
    """Serialize documents separated by ``---`` lines, as Talos writes multi-document configs."""
    return "---\n".join(dump_document(doc) for doc in docs)


def to_plain(obj: Any) -> Any:
    """Convert ruamel containers and scalar strings into plain ``dict``/``list``/``str`` values."""
    if isinstance(obj, dict):
        return {str(k) if isinstance(k, ScalarString) else k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_plain(v) for v in obj]
    if isinstance(obj, ScalarString):
        return str(obj)
    if isinstance(obj, bool | int | float | str) or obj is None:
        # ruamel's ScalarFloat/ScalarInt/ScalarBoolean subclass these; normalize to the base type.
        for base in (bool, int, float, str):
            if isinstance(obj, base):
                return base(obj)
    return obj


def from_plain(obj: Any) -> Any:
    """Convert plain containers into ruamel's commented ones, so they can carry comments."""
    if isinstance(obj, CommentedMap | CommentedSeq):
        return obj
    if isinstance(obj, dict):
        out = CommentedMap()
        for k, v in obj.items():
            out[k] = from_plain(v)
        return out
    if isinstance(obj, list):
        return CommentedSeq(from_plain(v) for v in obj)
    return obj
