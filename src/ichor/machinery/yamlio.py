"""YAML reading and writing in Talos's house style, keeping comments and key order.

Talos writes YAML with 4-space indentation, sequences indented under their key, no line folding,
``""`` for empty strings and ``|`` blocks for multi-line strings. Everything Ichor writes to disk
goes through :func:`dump_documents` so files round-trip byte for byte where Talos's would.

Reading is bounded by :data:`ichor.machinery.limits.INPUT_LIMITS` (size, alias expansion, nesting):
ruamel keeps an alias as a second reference to one object, so a small text can stand for an
enormous tree that any plain copy (:func:`to_plain`, the typed config models) would expand. The
composer counts what the expansion would hold while it reads and refuses past the limit.

This module only converts between text and (ruamel) Python objects; it knows nothing of configs.
"""

from __future__ import annotations

__all__ = [
    "dump_document",
    "dump_documents",
    "dump_sorted",
    "from_plain",
    "load_documents",
    "make_yaml",
    "to_plain",
]

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import ScalarString
from ruamel.yaml.scanner import RoundTripScanner

from ichor.machinery.errors import InputLimitError, YAMLError
from ichor.machinery.limits import INPUT_LIMITS, InputLimits


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


_BOMB_HINT = (
    "a machine config holds a few thousand nodes at most; aliases that multiply like this are a "
    '"billion laughs" alias bomb: write the values out or remove the aliases'
)


_DEPTH_HINT = "a machine config nests about 10 levels deep"


def _depth_error(source: str, limits: InputLimits, line: int) -> InputLimitError:
    return InputLimitError(
        f"{source}: YAML nested deeper than {limits.max_depth} levels (limit max_depth) (line {line})",
        limit="max_depth",
        hint=_DEPTH_HINT,
    )


class _BoundedScanner(RoundTripScanner):
    """ruamel's scanner, refusing flow nesting (``[[[[``) past the depth limit as it reads it.

    The composer checks depth too, but only after the scanner looked up to 1024 characters ahead
    for every open bracket (a possible simple key), which makes ``[`` * 100,000 cost a second.
    """

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: Any) -> None:
        limits: InputLimits = getattr(self.loader, "ichor_limits", INPUT_LIMITS)
        if len(self.flow_context) >= limits.max_depth:
            source: str = getattr(self.loader, "ichor_source", "<input>")
            raise _depth_error(source, limits, self.reader.line + 1)
        super().fetch_flow_collection_start(TokenClass, to_push)


class _BoundedComposer(Composer):
    """ruamel's composer, counting what the documents would hold with every alias expanded.

    Each node counts one; an alias counts the expanded size of the node it names (known once that
    node is complete, so an alias inside its own anchor is refused: it would expand forever).
    Counts run over the whole input; see :mod:`ichor.machinery.limits` for the values.
    """

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        # YAML allows redefining an anchor (the later one wins), as Go's yaml.v3 does: no warning.
        self.warn_double_anchors = False
        self.limits: InputLimits = getattr(loader, "ichor_limits", INPUT_LIMITS)
        self.source: str = getattr(loader, "ichor_source", "<input>")
        self.nodes = 0
        self.aliases = 0
        self.nesting = 0
        self.sizes: dict[int, int] = {}  # id(anchored node) -> its expanded size, once complete

    def compose_document(self) -> Any:
        self.sizes = {}  # anchors are per document (ruamel resets its own table too)
        return super().compose_document()

    def _refuse(self, what: str, limit: str, event: Any, hint: str) -> InputLimitError:
        line = f" (line {event.start_mark.line + 1})" if event.start_mark is not None else ""
        return InputLimitError(f"{self.source}: {what}{line}", limit=limit, hint=hint)

    def _count(self, size: int, event: Any) -> None:
        self.nodes += size
        if self.nodes > self.limits.max_nodes:
            if self.aliases:
                what = f"YAML aliases expand to more than {self.limits.max_nodes:,} nodes (limit max_nodes)"
                raise self._refuse(what, "max_nodes", event, _BOMB_HINT)
            what = f"the YAML holds more than {self.limits.max_nodes:,} nodes (limit max_nodes)"
            raise self._refuse(what, "max_nodes", event, "split the input or shorten its lists")

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias is ruamel's own error
                size = self.sizes.get(id(target))
                if size is None:
                    what = f"alias *{event.anchor} is used inside its own anchor &{event.anchor}"
                    raise self._refuse(
                        what, "max_nodes", event, "a config cannot contain itself; remove the alias"
                    )
                self.aliases += 1
                if self.aliases > self.limits.max_aliases:
                    what = f"more than {self.limits.max_aliases:,} YAML alias references (limit max_aliases)"
                    raise self._refuse(what, "max_aliases", event, _BOMB_HINT)
                self._count(size, event)
            return super().compose_node(parent, index)
        collection = isinstance(event, MappingStartEvent | SequenceStartEvent)
        if collection:
            self.nesting += 1
            if self.nesting > self.limits.max_depth:
                raise _depth_error(self.source, self.limits, event.start_mark.line + 1)
        start = self.nodes
        self._count(1, event)
        node = super().compose_node(parent, index)
        if collection:
            self.nesting -= 1
        if getattr(node, "anchor", None) is not None:
            self.sizes[id(node)] = self.nodes - start
        return node


def make_yaml() -> YAML:
    """A round-trip YAML instance configured the way Talos writes machine configs."""
    yaml = YAML(typ="rt")
    yaml.Representer = _TalosRepresenter
    yaml.Scanner = _BoundedScanner
    yaml.Composer = _BoundedComposer
    yaml.indent(mapping=4, sequence=6, offset=4)
    yaml.width = 1 << 20
    yaml.preserve_quotes = True
    yaml.explicit_start = False
    return yaml


def load_documents(
    text: str | bytes, *, source: str = "<input>", limits: InputLimits = INPUT_LIMITS
) -> list[Any]:
    """Parse every YAML document in ``text``; empty documents are dropped.

    Raises :class:`YAMLError` naming ``source`` and the line of the problem, and its subclass
    :class:`InputLimitError` for input over ``limits`` (checked before anything is expanded).
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise InputLimitError(
            f"{source}: {size:,} bytes is over the {limits.max_bytes:,}-byte limit for YAML input (limit max_bytes)",
            limit="max_bytes",
            hint="a machine config is tens of KiB; move large inline manifests to extraManifests URLs",
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YAMLError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    yaml = make_yaml()
    yaml.ichor_limits = limits  # type: ignore[attr-defined]
    yaml.ichor_source = source  # type: ignore[attr-defined]
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


def _sorted(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _sorted(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, list):
        return [_sorted(v) for v in obj]
    return obj


def dump_sorted(doc: Any, *, kubernetes: bool) -> str:
    """A plain document as Go's marshallers print a map: keys sorted, no line folding; with
    ``kubernetes`` as sigs.k8s.io/yaml (two spaces, lists at their key's level), else as
    gopkg.in/yaml.v3 (four spaces)."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 1 << 20
    if kubernetes:
        yaml.indent(mapping=2, sequence=2, offset=0)
    else:
        yaml.indent(mapping=4, sequence=6, offset=4)
    buf = io.StringIO()
    yaml.dump(_sorted(doc), buf)
    return buf.getvalue()


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
