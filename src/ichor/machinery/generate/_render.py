"""Render config documents as Talos writes them: struct field order, optional docs and examples.

Talos re-encodes every config it generates (patches included): fields come out in the order of its
Go structs (which is the property order of the official JSON schema), free-form maps come out with
sorted keys, and ``--with-docs`` puts the first line of each field's documentation beside scalars
and above mappings and lists. ``--with-examples`` adds commented-out examples for fields that are
not set. This module does exactly that for plain data (dicts, lists, scalars); it never changes a
value, and its output always parses back to the same data (a tested property).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from ichor.machinery.docident import document_identity
from ichor.machinery.generate._examples import EXAMPLES

_INDENT = 4

# Strings YAML would read as something else (YAML 1.1 and 1.2 core), so they need quotes.
_NON_STRING = re.compile(
    r"""^(?:
        ~|null|Null|NULL|
        y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|
        [-+]?(?:0|[1-9][0-9_]*)|
        0o?[0-7_]+|0x[0-9a-fA-F_]+|0b[01_]+|
        [-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|
        [-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|
        [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|
        <<|=
    )$""",
    re.VERBOSE,
)
_PLAIN_FIRST_BAD = set("-?:,[]{}#&*!|>'\"%@`")
# Number-like text that some YAML readers mis-resolve (e.g. "._" or "-_"): quote it to be safe.
_NUMBERISH = re.compile(r"^[-+._0-9:eExXoObBaAcCdDfF]*[._0-9][-+._0-9:eExXoObBaAcCdDfF]*$")
_PLAIN_SAFE = re.compile(r"^[^\x00-\x1f\x7f-\x9f\ufeff\ud800-\udfff\ufffe\uffff]+$")


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def _printable(ch: str) -> bool:
    # YAML's printable set (1.2 §5.1), which is narrower than Python's.
    code = ord(ch)
    return (
        code in (0x09, 0x0A, 0x0D)
        or 0x20 <= code <= 0x7E
        or code == 0x85
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    )


def _quote_double(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif not _printable(ch) or ch == "\x85":
            code = ord(ch)
            out.append(
                f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def format_scalar(value: Any) -> str:
    """One scalar in YAML flow form, quoted only when it must be (as go-yaml does)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if text == "" or _NON_STRING.match(text) or _NUMBERISH.match(text):
        return _quote_double(text)
    if not _PLAIN_SAFE.match(text) or text != text.strip():
        return _quote_double(text)
    needs_quotes = (
        (text[0] in _PLAIN_FIRST_BAD and not (text[0] in "-?:" and len(text) > 1 and text[1] not in " \t"))
        or ": " in text
        or " #" in text
        or text.endswith(":")
    )
    if needs_quotes:
        return "'" + text.replace("'", "''") + "'"
    return text


# --- the schema, as a guide to field order and documentation -------------------------------------


@cache
def _schema_defs() -> dict[str, Any]:
    raw = resources.files("ichor.machinery.schema").joinpath("talos-1.7-config.schema.json").read_text()
    defs: dict[str, Any] = json.loads(raw)["$defs"]
    return defs


def _resolve(node: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if node is None:
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _schema_defs().get(ref.rsplit("/", 1)[-1])
    return node


def _child(node: Mapping[str, Any] | None, key: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """Schema of a mapping's value at ``key`` and that field's one-line documentation."""
    node = _resolve(node)
    if node is None:
        return None, None
    props = node.get("properties")
    if isinstance(props, Mapping) and key in props:
        field = props[key]
        return _resolve(field), _first_line(field)
    for extra in (node.get("additionalProperties"), *(node.get("patternProperties") or {}).values()):
        if isinstance(extra, Mapping):
            return _resolve(extra), None
    return None, None


def _items(node: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    node = _resolve(node)
    if node is None:
        return None
    items = node.get("items")
    return _resolve(items) if isinstance(items, Mapping) else None


def _first_line(field: Mapping[str, Any]) -> str | None:
    text = field.get("markdownDescription") or field.get("description")
    if not isinstance(text, str):
        return None
    for line in text.strip().splitlines():
        line = line.strip()
        # A few upstream doc comments start with a stray "description: |" marker line.
        if line and not line.startswith("description:"):
            return line
    return None


# Fields Talos encodes that the published schema leaves out, placed after the named field.
_UNLISTED_FIELDS = {"debug": "persist"}


def _field_order(props: Mapping[str, Any]) -> list[str]:
    order: list[str] = []
    for key in props:
        order.append(key)
        extra = _UNLISTED_FIELDS.get(key)
        if extra is not None and extra not in props:
            order.append(extra)
    return order


def _ordered_keys(node: Mapping[str, Any] | None, mapping: Mapping[str, Any]) -> list[str]:
    node = _resolve(node)
    props = node.get("properties") if node is not None else None
    if isinstance(props, Mapping):
        order = _field_order(props)
        known = [key for key in order if key in mapping]
        unknown = sorted(key for key in mapping if key not in order)
        return known + unknown
    return sorted(mapping, key=str)


def schema_for_document(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema definition of a document, found by its identity."""
    identity = document_identity(doc)
    if identity is None:
        return None
    defs = _schema_defs()
    if identity.is_v1alpha1:
        return _resolve(defs.get("v1alpha1.Config"))
    for definition in defs.values():
        kind = (definition.get("properties") or {}).get("kind") or {}
        if identity.kind in (kind.get("enum") or []):
            return _resolve(definition)
    return None


# --- the emitter -----------------------------------------------------------------------------------


class _Emitter:
    def __init__(self, *, docs: bool, examples: bool) -> None:
        self.docs = docs
        self.examples = examples
        self.lines: list[str] = []

    def mapping(
        self,
        mapping: Mapping[str, Any],
        schema: Mapping[str, Any] | None,
        indent: int,
        path: tuple[str, ...],
        *,
        in_sequence: bool = False,
        undocumented: str | None = None,
    ) -> None:
        """Emit a non-empty mapping whose block starts at column ``indent``.

        As a sequence item (``in_sequence``) the first key follows the ``- `` at ``indent`` and the
        other keys align with it, while nested blocks still indent from the dash (go-yaml's layout).
        """
        key_col = indent + 2 if in_sequence else indent
        pad = " " * key_col
        first_prefix = " " * indent + "- " if in_sequence else None
        for n, key in enumerate(_ordered_keys(schema, mapping)):
            value = mapping[key]
            child_schema, doc = _child(schema, key)
            lead = first_prefix if (n == 0 and first_prefix is not None) else pad
            key_text = format_scalar(key)
            comment = doc if self.docs and key != undocumented else None
            if _is_block(value):
                if comment:
                    self.lines.append(f"{lead}# {comment}")
                    lead = pad
                self.lines.append(f"{lead}{key_text}:")
                self._block(value, child_schema, indent + _INDENT, (*path, key))
            elif isinstance(value, str) and _literal_ok(value):
                suffix = f" # {comment}" if comment else ""
                self.lines.append(f"{lead}{key_text}: {_block_indicator(value)}{suffix}")
                self._literal(value, indent + _INDENT)
            else:
                text = _flow_empty(value) if isinstance(value, dict | list) else format_scalar(value)
                if comment and isinstance(value, dict | list):
                    self.lines.append(f"{lead}# {comment}")
                    lead = pad
                    comment = None
                suffix = f" # {comment}" if comment else ""
                self.lines.append(f"{lead}{key_text}: {text}{suffix}")
            if self.examples and isinstance(value, dict | list) and not value:
                self._examples_for((*path, key), child_schema, key_col, own=True)
        if self.examples:
            self._missing_examples(mapping, schema, key_col, path)

    def _block(
        self, value: Any, schema: Mapping[str, Any] | None, indent: int, path: tuple[str, ...]
    ) -> None:
        if isinstance(value, dict):
            self.mapping(value, schema, indent, path)
            return
        item_schema = _items(schema)
        pad = " " * indent
        for item in value:
            if _is_block(item):
                if isinstance(item, dict):
                    self.mapping(item, item_schema, indent, path, in_sequence=True)
                else:
                    self.lines.append(f"{pad}-")
                    self._block(item, item_schema, indent + _INDENT, path)
            elif isinstance(item, str) and _literal_ok(item):
                self.lines.append(f"{pad}- {_block_indicator(item)}")
                self._literal(item, indent + _INDENT)
            else:
                text = _flow_empty(item) if isinstance(item, dict | list) else format_scalar(item)
                self.lines.append(f"{pad}- {text}")

    def _literal(self, text: str, indent: int) -> None:
        pad = " " * indent
        for line in text.rstrip("\n").split("\n"):
            self.lines.append(f"{pad}{line}" if line else "")

    def _examples_for(
        self, path: tuple[str, ...], schema: Mapping[str, Any] | None, indent: int, *, own: bool
    ) -> None:
        example = EXAMPLES.get(path)
        if example is None or not own:
            return
        pad = " " * indent
        for line in example.render_items(schema):
            self.lines.append(f"{pad}# {line}")

    def _missing_examples(
        self, mapping: Mapping[str, Any], schema: Mapping[str, Any] | None, indent: int, path: tuple[str, ...]
    ) -> None:
        node = _resolve(schema)
        props = node.get("properties") if node is not None else None
        if not isinstance(props, Mapping):
            return
        pad = " " * indent
        for key, field in props.items():
            if key in mapping:
                continue
            example = EXAMPLES.get((*path, key))
            if example is None:
                continue
            self.lines.append("")
            doc = _first_line(field)
            if doc:
                self.lines.append(f"{pad}# # {doc}")
            sub = _Emitter(docs=True, examples=False)
            sub.mapping({key: example.value}, schema, 0, path, undocumented=key)
            if example.note:
                self.lines.append(f"{pad}# # {example.note}")
            for line in sub.lines:
                self.lines.append(f"{pad}# {line}" if line else f"{pad}#")


def _literal_ok(text: str) -> bool:
    """Whether a multi-line string survives as a ``|`` block (else it is double-quoted)."""
    if "\n" not in text or not text.strip("\n"):
        return False
    if any(ch in "\r\x85\u2028\u2029" or not _printable(ch) for ch in text if ch != "\n"):
        return False
    lines = text.rstrip("\n").split("\n")
    first = next(line for line in lines if line)
    return first[0] not in " \t" and not any(line and not line.strip() for line in lines)


def _is_block(value: Any) -> bool:
    return isinstance(value, dict | list) and bool(value)


def _flow_empty(value: dict[str, Any] | list[Any]) -> str:
    return "{}" if isinstance(value, dict) else "[]"


def _block_indicator(text: str) -> str:
    if not text.endswith("\n"):
        return "|-"
    if text.endswith("\n\n"):
        return "|+"
    return "|"


def render_document(doc: Mapping[str, Any], *, with_docs: bool = False, with_examples: bool = False) -> str:
    """One document as YAML text (ends with a newline)."""
    if not doc:
        return "{}\n"
    emitter = _Emitter(docs=with_docs, examples=with_examples)
    emitter.mapping(doc, schema_for_document(doc), 0, ())
    return "\n".join(emitter.lines) + "\n"


def render_documents(
    docs: Sequence[Mapping[str, Any]], *, with_docs: bool = False, with_examples: bool = False
) -> str:
    """Documents separated by ``---`` lines, as Talos writes a multi-document config."""
    return "---\n".join(render_document(d, with_docs=with_docs, with_examples=with_examples) for d in docs)
