"""Config documents and containers: decoding raw YAML into typed models with Talos's rules.

The raw ruamel mapping is the source of truth (it carries comments and key order); the pydantic
model is a typed, checked view built from it. Decoding follows Talos's ``configloader``: a document
without ``kind`` is the v1alpha1 ``Config``; others are chosen by ``apiVersion`` + ``kind``; unknown
keys and wrongly typed values are refused, every one of them reported at once with its YAML path.

This module must not validate semantics (that is :mod:`._validate`) nor write anywhere but through
:func:`ichor.machinery.files.write_atomic`.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic

from ichor.machinery import yamlio
from ichor.machinery.docident import DocIdentity, document_identity, is_v1alpha1
from ichor.machinery.errors import ConfigDecodeError, YAMLError
from ichor.machinery.files import write_atomic

from . import _models
from ._ichor_models import ICHOR_CHILDREN, ICHOR_KIND_MODELS
from ._paths import PathElem, format_path, line_of

ALL_KIND_MODELS: dict[tuple[str, str], type[pydantic.BaseModel]] = {
    **_models.KIND_MODELS,
    **ICHOR_KIND_MODELS,
}
"""Talos's kinds (generated from its schema) and Ichor's own (``_ichor_models``)."""
_REGISTERED: dict[tuple[str, str], type[pydantic.BaseModel]] = {
    key: model for key, model in ALL_KIND_MODELS.items() if key != ("v1alpha1", "Config")
}
_CHILDREN = {**_models.CHILDREN, **ICHOR_CHILDREN}
_MODELS_BY_NAME: dict[str, type[pydantic.BaseModel]] = {
    **_models.MODELS_BY_NAME,
    **{model.__name__: model for model in ICHOR_KIND_MODELS.values()},
}

_EXPECTED = {
    "bool_type": "a boolean (true or false)",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "string_pattern_mismatch": "a duration such as 30s, 5m or 1h30m",
}


def talos_doc_id(identity: DocIdentity) -> str:
    """Talos's document id in messages: ``v1alpha1`` for the main document, else ``Kind/name``."""
    if identity.is_v1alpha1:
        return "v1alpha1.Config"
    return f"{identity.kind}/{identity.name or ''}"


def _describe_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    plain = yamlio.to_plain(value)
    try:
        return json.dumps(plain, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(plain)


def _walk_loc(raw: Any, loc: Sequence[int | str]) -> tuple[list[PathElem], Any, bool]:
    """Map a pydantic error location onto the raw document (dropping union/validator tags).

    Returns the YAML path, the value found there and whether the path exists in the document.
    """
    path: list[PathElem] = []
    node = raw
    found = True
    for elem in loc:
        if isinstance(node, Mapping):
            hit = None
            for key in node:
                if key == elem or (not isinstance(key, str) and str(key) == str(elem)):
                    hit = key
                    break
            if hit is None:
                found = False
                continue
            path.append(hit if isinstance(hit, str | int) else str(hit))
            node = node[hit]
        elif isinstance(node, list) and isinstance(elem, int) and 0 <= elem < len(node):
            path.append(elem)
            node = node[elem]
        # anything else is a pydantic tag such as "int", "str" or "function-before[...]"
    return path, node, found


def _known_keys(model: type[pydantic.BaseModel], raw: Any, parent: list[PathElem]) -> list[str]:
    """The YAML keys the model at ``parent`` accepts (best effort, for "did you mean" hints)."""
    cls_name = model.__name__
    for elem in parent:
        if isinstance(elem, int):
            continue
        kids = _CHILDREN.get(cls_name, {})
        if elem in kids:
            cls_name = kids[elem][1]
        elif cls_name in _CHILDREN and not kids:
            return []
    target = _MODELS_BY_NAME.get(cls_name)
    if target is None:
        return []
    return [f.alias for f in target.model_fields.values() if f.alias]


def _decode_model(model: type[pydantic.BaseModel], raw: Any, *, where: str) -> pydantic.BaseModel:
    try:
        return model.model_validate(yamlio.to_plain(raw))
    except pydantic.ValidationError as exc:
        raise _decode_error(model, raw, exc, where=where) from None


def _decode_error(
    model: type[pydantic.BaseModel], raw: Any, exc: pydantic.ValidationError, *, where: str
) -> ConfigDecodeError:
    unknown: list[str] = []
    suggestions: list[str] = []
    wrong: dict[str, tuple[set[str], str]] = {}
    for err in exc.errors():
        path, value, _ = _walk_loc(raw, err["loc"])
        line = line_of(raw, path)
        at = format_path(path) + (f" (line {line})" if line else "")
        if err["type"] == "extra_forbidden":
            unknown.append(at)
            key = path[-1] if path else None
            if isinstance(key, str):
                close = difflib.get_close_matches(key, _known_keys(model, raw, path[:-1]), n=1)
                if close:
                    suggestions.append(f"{format_path(path)} -> {close[0]}?")
            continue
        if err["type"] == "literal_error":
            expected_text = "one of " + str(err.get("ctx", {}).get("expected", ""))
        else:
            expected_text = _EXPECTED.get(err["type"], err["msg"].lower())
        entry = wrong.setdefault(at, (set(), _describe_value(value)))
        entry[0].add(expected_text)
    lines: list[str] = []
    if unknown:
        lines.append("unknown keys found during decoding:")
        lines.extend(f"    {u}" for u in unknown)
    if wrong:
        lines.append("wrong value types:")
        for at, (expected, got) in wrong.items():
            lines.append(f"    {at}: expected {' or '.join(sorted(expected))}, got {got}")
    hints: list[str] = []
    if unknown:
        hint = "remove or rename the unknown keys (see the Talos v1.7 machine configuration reference)"
        if suggestions:
            hint += "; did you mean: " + ", ".join(suggestions)
        hints.append(hint)
    if wrong:
        hints.append("fix the values at the listed YAML paths")
    return ConfigDecodeError(f"{where}: " + "\n".join(lines), hint="; ".join(hints))


class Document:
    """One config document: the raw YAML mapping (source of truth) plus its typed model."""

    def __init__(self, raw: Any, *, source: str = "<input>", index: int = 0) -> None:
        self.raw = raw
        self.source = source
        self.index = index
        self.identity = _identify(raw, source=source, index=index)
        self._model: pydantic.BaseModel | None = None

    @property
    def where(self) -> str:
        line = line_of(self.raw, [])
        at = f" (line {line})" if line else ""
        return f"{self.source}: document {self.index + 1} {self.identity}{at}"

    @property
    def model_class(self) -> type[pydantic.BaseModel]:
        return ALL_KIND_MODELS[(self.identity.api_version, self.identity.kind)]

    @property
    def model(self) -> pydantic.BaseModel:
        """The typed view of :attr:`raw`, built on first use (call :meth:`refresh` after editing raw)."""
        if self._model is None:
            self._model = _decode_model(self.model_class, self.raw, where=self.where)
        return self._model

    def refresh(self) -> None:
        """Re-identify and re-decode after :attr:`raw` was edited; raises :class:`ConfigDecodeError`."""
        self.identity = _identify(self.raw, source=self.source, index=self.index)
        self._model = None
        _ = self.model

    @property
    def talos_id(self) -> str:
        return talos_doc_id(self.identity)

    def __repr__(self) -> str:
        return f"Document({self.identity})"


def _identify(raw: Any, *, source: str, index: int) -> DocIdentity:
    where = f"{source}: document {index + 1}"
    line = line_of(raw, [])
    if line:
        where += f" (line {line})"
    if not isinstance(raw, Mapping):
        raise ConfigDecodeError(
            f"{where}: expected a YAML document (a mapping of keys), got {_describe_value(raw)}",
            hint="each document of a machine config must be a mapping such as `version: v1alpha1`",
        )
    for key in ("kind", "apiVersion"):
        if key in raw and not isinstance(raw[key], str):
            raise ConfigDecodeError(
                f"{where}: {key}: expected a string, got {_describe_value(raw[key])}",
                hint=f"set `{key}` to a string such as `v1alpha1`",
            )
    if "kind" not in raw and not is_v1alpha1(raw):
        raise ConfigDecodeError(
            f"{where}: missing kind",
            hint="add `kind:` (and `apiVersion: v1alpha1`), or `version: v1alpha1` for the main machine config",
        )
    if "kind" in raw and "apiVersion" not in raw:
        raise ConfigDecodeError(
            f"{where}: missing apiVersion", hint="add `apiVersion: v1alpha1` to the document"
        )
    identity = document_identity(raw)
    assert identity is not None
    if not identity.is_v1alpha1 and (identity.api_version, identity.kind) not in _REGISTERED:
        known = ", ".join(sorted(kind for _, kind in _REGISTERED))
        raise ConfigDecodeError(
            f'{where}: error decoding document: "{identity.kind}" "{identity.api_version}": not registered',
            hint=f"Talos v1.7 knows the v1alpha1 Config (no kind) and kinds {known} (apiVersion v1alpha1)",
        )
    return identity


class Container:
    """The ordered documents of one machine config (at most one v1alpha1 ``Config``)."""

    def __init__(
        self, documents: Iterable[Document], *, source: str = "<input>", text: str | None = None
    ) -> None:
        self._documents = list(documents)
        self.source = source
        seen: dict[str, Document] = {}
        for doc in self._documents:
            key = doc.talos_id
            if key in seen:
                if doc.identity.is_v1alpha1:
                    message = "duplicate v1alpha1.Config"
                else:
                    message = f"duplicate document: {key}"
                raise ConfigDecodeError(
                    f"{doc.where}: {message}",
                    hint="merge the two documents into one; a config holds each apiVersion/kind[/name] once",
                )
            seen[key] = doc
        self._text = text
        self._dumped_at_load = yamlio.dump_documents(self.raw_documents()) if text is not None else None

    @property
    def documents(self) -> list[Document]:
        return list(self._documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)

    @property
    def v1alpha1(self) -> Document | None:
        for doc in self._documents:
            if doc.identity.is_v1alpha1:
                return doc
        return None

    def find(self, kind: str, name: str | None = None) -> Document | None:
        for doc in self._documents:
            if doc.identity.kind == kind and (name is None or doc.identity.name == name):
                return doc
        return None

    def raw_documents(self) -> list[Any]:
        return [doc.raw for doc in self._documents]

    def to_text(self) -> str:
        """YAML text of all documents; unchanged documents come back exactly as they were read."""
        dumped = yamlio.dump_documents(self.raw_documents())
        if self._text is not None and dumped == self._dumped_at_load:
            # Nothing changed since loading: keep the user's bytes (leading `---`, blank lines, ...).
            return self._text
        return dumped

    def write(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write :meth:`to_text` atomically (mode 0600); refuses to overwrite unless ``force``."""
        return write_atomic(path, self.to_text(), mode=0o600, force=force)


def load_config(text: str | bytes, *, source: str = "<input>") -> Container:
    """Decode a (multi-document) machine config; raises :class:`ConfigDecodeError` or ``YAMLError``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigDecodeError(
                f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                hint="machine configs are UTF-8 YAML",
            ) from None
    try:
        raws = yamlio.load_documents(text, source=source)
    except YAMLError as exc:
        if exc.hint:
            raise
        raise YAMLError(
            str(exc), hint="fix the YAML syntax at the reported line (indentation, brackets, quotes)"
        ) from None
    if not raws:
        raise ConfigDecodeError(
            f"{source}: config not found: the input has no YAML documents",
            hint="generate a machine config with `talosctl gen config <cluster-name> <endpoint>`",
        )
    documents = [Document(raw, source=source, index=i) for i, raw in enumerate(raws)]
    container = Container(documents, source=source, text=text)
    errors: list[ConfigDecodeError] = []
    for doc in documents:
        try:
            _ = doc.model
        except ConfigDecodeError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigDecodeError(
            "\n".join(str(e) for e in errors), hint="; ".join(dict.fromkeys(e.hint for e in errors if e.hint))
        )
    return container


def load_config_file(path: str | os.PathLike[str]) -> Container:
    """Read and decode a machine config file; an unreadable file is a :class:`ConfigDecodeError`."""
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        raise ConfigDecodeError(
            f"{str(target)!r}: no such file", hint="check the path given with --config"
        ) from None
    except IsADirectoryError:
        raise ConfigDecodeError(
            f"{str(target)!r} is a directory, not a file", hint="pass a file path"
        ) from None
    except OSError as exc:
        raise ConfigDecodeError(
            f"cannot read {str(target)!r}: {exc.strerror}", hint="check the file's permissions"
        ) from None
    return load_config(data, source=str(target))
