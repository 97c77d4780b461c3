"""RFC 6902 JSON patches on raw config documents, with Ichor's per-document selector.

Operations run on plain copies (``yamlio.to_plain``) through the ``jsonpatch`` package; the result
is then folded back into the ruamel document so that untouched keys keep their comments and order.
It must not decide which patch kind a text is (that is :func:`ichor.machinery.patch.parse_patch`).

``copy`` is the one operation that can grow a document past the text that describes it (each copy
of a list into itself doubles it), so the nodes copies add are counted against
:data:`~ichor.machinery.limits.INPUT_LIMITS` ``max_nodes``, as YAML aliases are.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import jsonpatch
import jsonpointer

from ichor.machinery.docident import DocIdentity, document_identity
from ichor.machinery.errors import InputLimitError, PatchError
from ichor.machinery.limits import INPUT_LIMITS
from ichor.machinery.patch._merge import kind_of, same

if TYPE_CHECKING:
    from ichor.machinery.patch import JSONPatchOp

MULTI_DOC_ERROR = "JSON6902 patches are not supported for multi-document machine configuration"
APPLY_ERROR = "failure applying rfc6902 patches to talos machine config"


def selector_aliases(identity: DocIdentity) -> set[str]:
    """Every spelling of a document selector that names ``identity``."""
    names = {identity.kind, f"{identity.api_version}/{identity.kind}"}
    if identity.name:
        names |= {
            f"{identity.kind}/{identity.name}",
            f"{identity.api_version}/{identity.kind}/{identity.name}",
        }
    if identity.is_v1alpha1:
        names.add("v1alpha1")
    return names


def _describe(identity: DocIdentity | None) -> str:
    if identity is None:
        return "(unknown document)"
    if identity.is_v1alpha1:
        return "v1alpha1"
    return f"{identity.kind}/{identity.name}" if identity.name else identity.kind


def _target(plain_docs: Sequence[Any], op: JSONPatchOp, index: int, source: str) -> int:
    if op.document is None:
        if len(plain_docs) != 1:
            raise PatchError(
                f"patch {source}, operation {index} ({op.describe()}): {MULTI_DOC_ERROR}",
                hint="name the document the operation is for, e.g. 'document: v1alpha1' or "
                "'document: NetworkRuleConfig/<name>', or use a strategic merge patch",
            )
        return 0
    identities = [document_identity(d) if isinstance(d, Mapping) else None for d in plain_docs]
    matches = [i for i, ident in enumerate(identities) if ident and op.document in selector_aliases(ident)]
    present = ", ".join(_describe(i) for i in identities) or "none"
    if not matches:
        raise PatchError(
            f"patch {source}, operation {index} ({op.describe()}): a patch for a document that is not "
            f"there: no document matches {op.document!r}",
            hint=f"documents in this config: {present}; fix 'document' or add the document first",
        )
    if len(matches) > 1:
        raise PatchError(
            f"patch {source}, operation {index} ({op.describe()}): document selector {op.document!r} "
            f"matches {len(matches)} documents",
            hint=f"add the name, e.g. {_describe(identities[matches[0]])}; documents: {present}",
        )
    return matches[0]


def _reason(exc: Exception) -> str:
    text = str(exc)
    # jsonpointer quotes the whole parent object; a config holds secrets and is long.
    cut = text.find(" not found in ")
    if cut >= 0:
        text = text[:cut] + " not found"
    if "does not support indexing" in text or "to non-container type" in text:
        text = "a path element goes through a scalar value"
    if text.startswith("'") and text.endswith("'"):
        text = f"member {text} not found"
    return text


def _count_nodes(value: Any, budget: int) -> int:
    """Nodes in plain data (as :mod:`ichor.machinery.yamlio` counts them), stopping past ``budget``."""
    count, todo = 0, [value]
    while todo and count <= budget:
        item = todo.pop()
        count += 1
        if isinstance(item, Mapping):
            count += len(item)  # the keys
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return count


def _copied_nodes(doc: Any, op: JSONPatchOp, budget: int) -> int:
    if op.op != "copy" or op.from_ is None:
        return 0
    try:
        value = jsonpointer.resolve_pointer(doc, op.from_)
    except jsonpointer.JsonPointerException:
        return 0  # jsonpatch reports the missing path
    return _count_nodes(value, budget)


def apply_json_patch(docs: list[Any], ops: Sequence[JSONPatchOp], *, source: str) -> list[Any]:
    """Apply ``ops`` to ``docs`` (copies owned by the caller); returns the patched documents."""
    from ichor.machinery.yamlio import to_plain

    if not ops:
        return docs
    plain = [to_plain(doc) for doc in docs]
    touched: set[int] = set()
    copied, limit = 0, INPUT_LIMITS.max_nodes
    for index, op in enumerate(ops, start=1):
        target = _target(plain, op, index, source)
        copied += _copied_nodes(plain[target], op, limit - copied)
        if copied > limit:
            raise InputLimitError(
                f"{APPLY_ERROR}: {source}, operation {index} ({op.describe()}): 'copy' operations add "
                f"more than {limit:,} nodes (limit max_nodes)",
                limit="max_nodes",
                hint="copies of copies grow a config exponentially; write the values out instead",
            )
        try:
            plain[target] = jsonpatch.JsonPatch([op.as_rfc6902()]).apply(plain[target], in_place=True)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise PatchError(
                f"{APPLY_ERROR}: {source}, operation {index} ({op.describe()}): test failed: {_reason(exc)}",
                hint="the config does not hold the value the 'test' operation expects; nothing was changed",
            ) from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise PatchError(
                f"{APPLY_ERROR}: {source}, operation {index} ({op.describe()}): {_reason(exc)}",
                hint="check that the path exists in the config ('add' creates only the last element; "
                "use /- to append to a list)",
            ) from None
        if not isinstance(plain[target], Mapping):
            raise PatchError(
                f"{APPLY_ERROR}: {source}, operation {index} ({op.describe()}): the document became a "
                f"{kind_of(plain[target])}",
                hint="a config document must stay a mapping",
            )
        touched.add(target)
    result = list(docs)
    for target in touched:
        result[target] = fold_back(docs[target], plain[target])
    return result


def fold_back(original: Any, new: Any) -> Any:
    """``new`` (plain data) expressed by reusing ``original``'s ruamel nodes where nothing changed."""
    from ichor.machinery.yamlio import from_plain

    if isinstance(original, MutableMapping) and isinstance(new, Mapping):
        for key in [k for k in original if k not in new]:
            del original[key]
        for key, value in new.items():
            if key in original:
                original[key] = fold_back(original[key], value)
            else:
                original[key] = from_plain(value)
        # Keys jsonpatch re-added (move) land at the end in `new`; follow its order.
        if list(original.keys()) != list(new.keys()):
            for key in new:
                original[key] = original.pop(key)
        return original
    if isinstance(original, list) and isinstance(new, list):
        return _fold_back_list(original, new)
    if same(original, new):
        return original
    return from_plain(new)


def _fold_back_list(original: list[Any], new: list[Any]) -> list[Any]:
    """Reuse each original item once: first an equal one (items that moved), else the one at the same
    position (items changed inside); carry ruamel's per-item comments along with the items."""
    from ichor.machinery.yamlio import from_plain

    hits: list[int | None] = []
    unused = list(range(len(original)))
    for value in new:
        hit = next((i for i in unused if same(original[i], value)), None)
        if hit is not None:
            unused.remove(hit)
        hits.append(hit)
    for pos, value in enumerate(new):
        if hits[pos] is None and pos in unused and isinstance(value, Mapping | list):
            unused.remove(pos)
            hits[pos] = pos
    items = [
        fold_back(original[hit], value) if hit is not None else from_plain(value)
        for hit, value in zip(hits, new, strict=True)
    ]
    comments = getattr(getattr(original, "ca", None), "items", None)
    old_comments = dict(comments) if isinstance(comments, dict) else None
    original.clear()
    original.extend(items)
    if old_comments is not None and isinstance(comments, dict):
        comments.clear()
        for pos, hit in enumerate(hits):
            if hit is not None and hit in old_comments:
                comments[pos] = old_comments[hit]
    return original
