"""Machine config patches: loading ``--config-patch`` / ``-p`` values and applying them to raw documents.

A patch is what a user passes to ``talosctl gen config --config-patch``, ``apply-config -p`` or
``machineconfig patch -p``: ``@path/to/file`` or the patch text itself. As in Talos 1.7 a value with
no space and no newline that does not start with ``[`` or ``{`` is taken as a file name without ``@``.

Two kinds of patch, detected in this order (Talos's order):

1. **Strategic merge** (:class:`StrategicMergePatch`): one or more YAML documents that are config
   documents (the v1alpha1 ``Config``, recognised by ``version``/``machine``/``cluster``/``debug``/
   ``persist``, or ``apiVersion`` + ``kind`` [+ ``name``]).
2. **RFC 6902 JSON patch** (:class:`JSONPatch`): a list of operations, written as JSON or as YAML.

Strategic merge rules (Talos 1.7, ``pkg/machinery/config/merge`` + the ``merge:"replace"`` struct tags
and the ``Merge`` methods of the v1alpha1 types), applied to raw documents:

* patch documents are matched to config documents by ``apiVersion/kind[/name]``; an unmatched
  patch document is appended to the config;
* only keys present in the patch are considered; ``null`` is skipped (a Go nil), and so are the
  zero scalars ``""`` and ``0`` -- but boolean ``false`` does overwrite;
* mappings merge key by key; lists **append** (``[]``/``{}`` change nothing where a value exists);
* replaced as a whole: ``cluster.network.podSubnets``, ``cluster.network.serviceSubnets``,
  ``cluster.apiServer.auditPolicy`` and, in ``NetworkRuleConfig``, ``ingress`` and
  ``portSelector.ports`` (an explicit ``[]`` clears them);
* merged by key: ``machine.network.interfaces`` (by ``interface``, else by an equal
  ``deviceSelector``), their ``vlans`` (by ``vlanId``), ``cluster.apiServer.admissionControl``
  (by ``name``); a matched item merges with the rules above, an unmatched one is appended;
* a mapping where the config has a list (or the other way round) is an error naming the key.

Consequence worth knowing: applying the same patch twice appends its list items twice (Talos does
the same), while replace and merge-by-key fields come out identical.

Beyond Talos 1.7 (``$patch`` directives, which Talos gained only in 1.8):

* ``key: {$patch: delete}`` removes ``key``; ``key: {$patch: replace, ...}`` replaces the value
  instead of merging it;
* in a list, an item ``{$patch: delete, <merge key>: <value>}`` removes the item with that key
  (merge-by-key lists); in other lists of mappings it removes every item containing all the given
  fields; ``{$patch: delete, $value: <scalar>}`` removes a scalar from a list of scalars; an item
  ``{$patch: replace}`` makes the other patch items replace the list;
* a whole patch document carrying ``$patch: delete`` removes the matching config document, and
  ``$patch: replace`` replaces it.

Deleting something that is not there changes nothing, so a patch stays safe to apply twice.

JSON patch: Talos applies RFC 6902 patches only to single-document configs ("JSON6902 patches are
not supported for multi-document machine configuration"). Ichor keeps that error for operations
without a selector and adds one: an operation member ``"document"`` names the document it applies to,
as ``<kind>``, ``<kind>/<name>``, ``<apiVersion>/<kind>[/<name>]``, or ``v1alpha1`` for the v1alpha1
``Config``, for example::

    - op: add
      document: NetworkRuleConfig/ingress-http
      path: /ingress/-
      value: {subnet: 10.0.0.0/8}

A selector must match exactly one document; one that matches none is "a patch for a document that
is not there". Untouched parts of a patched document keep their comments and key order.

This module changes documents only; it does not decode or validate configs, and never writes files.
"""

from __future__ import annotations

__all__ = [
    "JSONPatch",
    "JSONPatchOp",
    "Patch",
    "StrategicMergePatch",
    "apply_patches",
    "load_patch",
    "load_patches",
]

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ichor.machinery.docident import document_identity
from ichor.machinery.errors import PatchError, YAMLError
from ichor.machinery.patch._merge import kind_of

_JSON_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_SELECTOR_RE = re.compile(r"^[^/\s]+(/[^/\s]+){0,2}$")


@dataclass(frozen=True)
class Patch:
    """A loaded config patch; ``source`` says where it came from (for error messages)."""

    source: str


@dataclass(frozen=True)
class StrategicMergePatch(Patch):
    """Config documents to merge into a config (raw ruamel documents, as loaded)."""

    documents: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class JSONPatchOp:
    """One RFC 6902 operation; ``document`` is Ichor's optional document selector."""

    op: str
    path: str
    value: Any = None
    from_: str | None = None
    document: str | None = None
    has_value: bool = False

    def as_rfc6902(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "path": self.path}
        if self.has_value:
            out["value"] = self.value
        if self.from_ is not None:
            out["from"] = self.from_
        return out

    def describe(self) -> str:
        target = f" in {self.document}" if self.document else ""
        return f"{self.op} {self.path}{target}"


@dataclass(frozen=True)
class JSONPatch(Patch):
    """An RFC 6902 patch: operations applied in order."""

    operations: list[JSONPatchOp] = field(default_factory=list)


def load_patch(spec: str, *, base_dir: Path | None = None, flag: str = "--config-patch") -> Patch:
    """Load one patch given as ``@file``, a bare file name, or inline YAML/JSON text.

    ``base_dir`` resolves relative file names (default: the current directory); ``flag`` is the
    option the user typed, named in error hints. Raises :class:`PatchError`.
    """
    text, source = _read_spec(spec, base_dir=base_dir, flag=flag)
    return parse_patch(text, source=source, flag=flag)


def load_patches(
    specs: Sequence[str], *, base_dir: Path | None = None, flag: str = "--config-patch"
) -> list[Patch]:
    """Load every patch in order; JSON patches that follow each other are joined, as Talos does."""
    result: list[Patch] = []
    for spec in specs:
        patch = load_patch(spec, base_dir=base_dir, flag=flag)
        if isinstance(patch, JSONPatch) and result and isinstance(result[-1], JSONPatch):
            previous = result[-1]
            result[-1] = JSONPatch(
                source=f"{previous.source}, {patch.source}",
                operations=[*previous.operations, *patch.operations],
            )
        else:
            result.append(patch)
    return result


def apply_patches(docs: list[Any], patches: Sequence[Patch]) -> list[Any]:
    """Apply ``patches`` in order to raw config documents; returns new documents.

    The input documents and patches are left untouched. Raises :class:`PatchError`.
    """
    from ichor.machinery.patch._json import apply_json_patch
    from ichor.machinery.patch._merge import apply_strategic_patch

    result = copy.deepcopy(list(docs))
    for patch in patches:
        if isinstance(patch, StrategicMergePatch):
            result = apply_strategic_patch(result, patch.documents, source=patch.source)
        elif isinstance(patch, JSONPatch):
            result = apply_json_patch(result, patch.operations, source=patch.source)
        else:
            raise TypeError(f"not a patch: {patch!r}")
    return result


def _read_spec(spec: str, *, base_dir: Path | None, flag: str) -> tuple[str, str]:
    """The patch text and a name for it (``file.yaml`` or ``inline patch``)."""
    if spec.startswith("@"):
        name = spec[1:]
    elif spec and not any(c in spec for c in " \n") and not spec.startswith(("[", "{")):
        # Talos's rule: inline patches always contain a space or newline, or start with [ or {.
        name = spec
    else:
        return spec, f"inline patch given to {flag}"
    if not name:
        raise PatchError(f"{flag} @: no file name after '@'", hint=f"write {flag} @path/to/patch.yaml")
    path = Path(name).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PatchError(
            f"patch file {name!r} given to {flag} does not exist",
            hint=f"check the path after {flag} (relative paths start at {base_dir or 'the current directory'})",
        ) from None
    except IsADirectoryError:
        raise PatchError(
            f"patch file {name!r} given to {flag} is a directory", hint=f"give {flag} a patch file"
        ) from None
    except OSError as exc:
        raise PatchError(
            f"cannot read patch file {name!r} given to {flag}: {exc.strerror}",
            hint="check the file's permissions",
        ) from None
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError:
        raise PatchError(
            f"patch file {name!r} given to {flag} is not UTF-8 text", hint="a patch is YAML or JSON text"
        ) from None


def parse_patch(text: str, *, source: str, flag: str = "--config-patch") -> Patch:
    """Detect and parse a patch: strategic merge first, then an RFC 6902 operation list."""
    from ichor.machinery.yamlio import load_documents

    try:
        docs = load_documents(text, source=source)
    except YAMLError as exc:
        raise PatchError(
            f"patch {exc}",
            hint=exc.hint or f"a patch given to {flag} must be YAML config documents or a JSON patch list",
        ) from None
    if not docs:
        # Talos decodes an empty patch as an empty JSON patch: it changes nothing.
        return JSONPatch(source=source, operations=[])
    if len(docs) == 1 and isinstance(docs[0], list):
        return JSONPatch(source=source, operations=_parse_operations(docs[0], source=source))
    for index, doc in enumerate(docs, start=1):
        where = f"patch {source}" + (f", document {index}," if len(docs) > 1 else "")
        if isinstance(doc, list):
            raise PatchError(
                f"{where} is a list among several documents",
                hint="a JSON patch (list of operations) must be the only document in its patch",
            )
        if not isinstance(doc, Mapping):
            raise PatchError(
                f"{where} is a {kind_of(doc)}, not a config document or a list of JSON patch operations",
                hint="a strategic patch is a mapping such as 'machine: {network: {hostname: n1}}'",
            )
        if document_identity(doc) is None:
            raise PatchError(
                f"{where} is not a config document: missing kind",
                hint="start the patch with 'machine:'/'cluster:' (v1alpha1 Config), "
                "or give 'apiVersion' and 'kind' (and 'name') of the document to patch",
            )
        directive = doc.get("$patch")
        if directive is not None and directive not in ("delete", "replace"):
            raise PatchError(
                f"{where} has unknown directive '$patch: {directive}'",
                hint="'$patch' is 'delete' or 'replace'",
            )
    return StrategicMergePatch(source=source, documents=docs)


def _parse_operations(items: list[Any], *, source: str) -> list[JSONPatchOp]:
    from ichor.machinery.yamlio import to_plain

    ops: list[JSONPatchOp] = []
    for index, raw in enumerate(items, start=1):
        where = f"patch {source}, operation {index}"
        if not isinstance(raw, Mapping):
            raise PatchError(
                f"{where} is a {kind_of(raw)}, not a JSON patch operation",
                hint='each operation is a mapping like {"op": "add", "path": "/machine/...", "value": ...}',
            )
        item = to_plain(raw)
        op = item.get("op")
        if not isinstance(op, str) or op not in _JSON_OPS:
            shown = "missing" if op is None else repr(op) if isinstance(op, str) else json.dumps(op)
            raise PatchError(
                f"{where}: unknown op {shown}" if op is not None else f"{where}: 'op' is missing",
                hint="'op' is one of add, remove, replace, move, copy, test",
            )
        path = item.get("path")
        if not isinstance(path, str) or (path and not path.startswith("/")):
            raise PatchError(
                f"{where} ({op}): 'path' must be a JSON pointer like /machine/network/hostname",
                hint="write the path as /key/key/index, starting with '/'",
            )
        if op in ("add", "replace", "test") and "value" not in item:
            raise PatchError(f"{where} ({op} {path}): 'value' is missing", hint=f"'{op}' needs a 'value'")
        from_ = item.get("from")
        if op in ("move", "copy") and (not isinstance(from_, str) or (from_ and not from_.startswith("/"))):
            raise PatchError(
                f"{where} ({op} {path}): 'from' must be a JSON pointer", hint=f"'{op}' needs 'from: /path'"
            )
        document = item.get("document")
        if document is not None and (not isinstance(document, str) or not _SELECTOR_RE.match(document)):
            raise PatchError(
                f"{where} ({op} {path}): unknown document selector {document!r}",
                hint="write 'document' as <kind>, <kind>/<name>, <apiVersion>/<kind>/<name> or v1alpha1",
            )
        ops.append(
            JSONPatchOp(
                op=op,
                path=path,
                value=item.get("value"),
                from_=from_ if op in ("move", "copy") else None,
                document=document,
                has_value="value" in item,
            )
        )
    return ops
