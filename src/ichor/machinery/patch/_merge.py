"""Strategic merge of raw config documents (the rules are described in :mod:`ichor.machinery.patch`).

Works in place on documents the caller already copied; reads patch documents without changing them.
It must not decode configs: every rule here is keyed by document kind and key path.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from ruamel.yaml.comments import CommentedMap

from ichor.machinery.docident import DocIdentity, document_identity
from ichor.machinery.errors import PatchError

DIRECTIVE = "$patch"
SCALAR_VALUE = "$value"

_V1ALPHA1 = "Config"

# (document kind, dotted key path) of lists/objects a patch replaces instead of merging
# (Go struct tag merge:"replace").
REPLACE_FIELDS: frozenset[tuple[str, str]] = frozenset(
    {
        (_V1ALPHA1, "cluster.network.podSubnets"),
        (_V1ALPHA1, "cluster.network.serviceSubnets"),
        (_V1ALPHA1, "cluster.apiServer.auditPolicy"),
        ("NetworkRuleConfig", "ingress"),
        ("NetworkRuleConfig", "portSelector.ports"),
    }
)


def _interface_match(existing: Any, item: Mapping[str, Any]) -> bool:
    # Talos: by non-empty `interface`, otherwise by an equal (non-nil) `deviceSelector`.
    if not isinstance(existing, Mapping):
        return False
    name = item.get("interface")
    if name:
        return bool(existing.get("interface") == name)
    selector = item.get("deviceSelector")
    if selector is not None:
        return existing.get("deviceSelector") is not None and same(existing.get("deviceSelector"), selector)
    return False


def _field_match(key: str) -> Callable[[Any, Mapping[str, Any]], bool]:
    def match(existing: Any, item: Mapping[str, Any]) -> bool:
        return isinstance(existing, Mapping) and same(existing.get(key), item.get(key))

    return match


# Lists whose items merge with an existing item of the same identity (Go `Merge` methods).
MERGE_KEY_LISTS: dict[tuple[str, str], tuple[str, Callable[[Any, Mapping[str, Any]], bool]]] = {
    (_V1ALPHA1, "machine.network.interfaces"): ("interface or deviceSelector", _interface_match),
    (_V1ALPHA1, "machine.network.interfaces.vlans"): ("vlanId", _field_match("vlanId")),
    (_V1ALPHA1, "cluster.apiServer.admissionControl"): ("name", _field_match("name")),
}


def kind_of(value: Any) -> str:
    """The YAML word for a value's type, for messages."""
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def same(a: Any, b: Any) -> bool:
    """Equality that tells ``true`` from ``1`` and ignores ruamel's wrapper types."""
    from ichor.machinery.yamlio import to_plain

    return bool(_typed(to_plain(a)) == _typed(to_plain(b)))


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _is_zero_scalar(value: Any) -> bool:
    # Go zero values are skipped by Talos's merge; `false` is the exception and does overwrite.
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return value == ""
    if isinstance(value, int | float):
        return value == 0
    return False


class _Merger:
    def __init__(self, source: str, kind: str, doc_name: str) -> None:
        self.source = source
        self.kind = kind
        self.doc_name = doc_name

    def error(self, where: str, message: str, hint: str) -> PatchError:
        return PatchError(f"patch {self.source}: {self.doc_name} {where}: {message}", hint=hint)

    # -- mappings --------------------------------------------------------------------------------
    def merge_map(
        self, left: MutableMapping[Any, Any], right: Mapping[Any, Any], keys: str, where: str
    ) -> None:
        for key, value in right.items():
            if key == DIRECTIVE:
                continue
            path = f"{keys}.{key}" if keys else str(key)
            shown = f"{where}.{key}" if where else str(key)
            directive = _directive(value)
            if directive == "delete":
                if key in left:
                    del left[key]
                continue
            if directive == "replace":
                left[key] = materialize(value, self.error, shown)
                continue
            if value is None:
                continue
            if (self.kind, path) in REPLACE_FIELDS:
                left[key] = materialize(value, self.error, shown)
                continue
            if key not in left or left[key] is None:
                if isinstance(value, Mapping | list) or not _is_zero_scalar(value):
                    left[key] = materialize(value, self.error, shown)
                continue
            left[key] = self.merge_value(left[key], value, path, shown)

    def merge_value(self, left: Any, right: Any, keys: str, where: str) -> Any:
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            assert isinstance(left, MutableMapping)
            self.merge_map(left, right, keys, where)
            return left
        if isinstance(left, list) and isinstance(right, list):
            self.merge_list(left, right, keys, where)
            return left
        if isinstance(left, Mapping | list) or isinstance(right, Mapping | list):
            raise self.error(
                where,
                f"the config has a {kind_of(left)} here but the patch has a {kind_of(right)}",
                hint=f"make '{where}' a {kind_of(left)} in the patch, "
                "or add '$patch: replace' to replace the value as a whole",
            )
        if _is_zero_scalar(right):
            return left
        return copy.deepcopy(right)

    # -- lists -----------------------------------------------------------------------------------
    def merge_list(self, left: list[Any], right: list[Any], keys: str, where: str) -> None:
        if any(_directive(item) == "replace" and len(item) == 1 for item in right):
            items = [item for item in right if not (_directive(item) == "replace" and len(item) == 1)]
            left[:] = materialize(items, self.error, where)
            return
        rule = MERGE_KEY_LISTS.get((self.kind, keys))
        for index, item in enumerate(right):
            shown = f"{where}[{index}]"
            if _directive(item) == "delete":
                self.delete_from_list(left, item, rule, shown)
                continue
            if rule is not None and isinstance(item, Mapping):
                match = rule[1]
                for pos, existing in enumerate(left):
                    if match(existing, item):
                        left[pos] = self.merge_value(existing, item, keys, f"{where}[{pos}]")
                        break
                else:
                    left.append(materialize(item, self.error, shown))
                continue
            left.append(materialize(item, self.error, shown))

    def delete_from_list(
        self,
        left: list[Any],
        item: Mapping[str, Any],
        rule: tuple[str, Callable[[Any, Mapping[str, Any]], bool]] | None,
        where: str,
    ) -> None:
        fields = {k: v for k, v in item.items() if k != DIRECTIVE}
        if SCALAR_VALUE in fields:
            wanted = fields[SCALAR_VALUE]
            keep = [x for x in left if not same(x, wanted)]
        elif rule is not None:
            key_name, match = rule
            if not any(k in fields for k in ("interface", "deviceSelector", "vlanId", "name")):
                raise self.error(
                    where,
                    "'$patch: delete' does not say which item to delete",
                    hint=f"give the item's {key_name} next to '$patch: delete'",
                )
            keep = [x for x in left if not match(x, fields)]
        elif fields:
            keep = [
                x
                for x in left
                if not (isinstance(x, Mapping) and all(k in x and same(x[k], v) for k, v in fields.items()))
            ]
        else:
            raise self.error(
                where,
                "'$patch: delete' does not say which item to delete",
                hint="add the fields of the item to delete, or '$value: <scalar>' for a list of scalars",
            )
        if len(keep) != len(left):
            # Delete item by item so ruamel keeps the comments of the items that stay.
            for pos in range(len(left) - 1, -1, -1):
                if not any(left[pos] is k for k in keep):
                    del left[pos]


def _directive(value: Any) -> str | None:
    if isinstance(value, Mapping) and DIRECTIVE in value:
        directive = value[DIRECTIVE]
        return str(directive)
    return None


def materialize(value: Any, error: Callable[[str, str, str], PatchError], where: str) -> Any:
    """A copy of patch content to insert into a config, with ``$patch`` directives resolved."""
    if isinstance(value, Mapping):
        directive = _directive(value)
        if directive not in (None, "delete", "replace"):
            raise error(
                where, f"unknown directive '$patch: {directive}'", "'$patch' is 'delete' or 'replace'"
            )
        out: MutableMapping[Any, Any] = copy.deepcopy(value)  # type: ignore[arg-type]
        if DIRECTIVE in out:
            del out[DIRECTIVE]
        for key in list(out.keys()):
            child = out[key]
            if _directive(child) == "delete":
                del out[key]
            else:
                out[key] = materialize(child, error, f"{where}.{key}")
        return out
    if isinstance(value, list):
        out_list = copy.deepcopy(value)
        for pos in range(len(out_list) - 1, -1, -1):
            child = out_list[pos]
            directive = _directive(child)
            if directive == "delete" or (directive == "replace" and len(child) == 1):
                del out_list[pos]
            else:
                out_list[pos] = materialize(child, error, f"{where}[{pos}]")
        return out_list
    return copy.deepcopy(value)


def _doc_name(identity: DocIdentity) -> str:
    if identity.is_v1alpha1:
        return "v1alpha1 Config"
    return f"{identity.kind}/{identity.name}" if identity.name else identity.kind


def apply_strategic_patch(docs: list[Any], patch_docs: list[Any], *, source: str) -> list[Any]:
    """Merge every patch document into ``docs`` (changed in place and returned)."""
    for patch_doc in patch_docs:
        identity = document_identity(patch_doc)
        if identity is None:  # load_patch refuses these; a hand-built patch may not
            raise PatchError(
                f"patch {source}: a patch document is not a config document: missing kind",
                hint="give 'apiVersion' and 'kind', or use 'machine:'/'cluster:' for the v1alpha1 Config",
            )
        name = _doc_name(identity)
        merger = _Merger(source, identity.kind, name)
        position = next(
            (
                i
                for i, doc in enumerate(docs)
                if isinstance(doc, Mapping) and document_identity(doc) == identity
            ),
            None,
        )
        directive = _directive(patch_doc)
        if directive == "delete":
            if position is not None:
                del docs[position]
            continue
        if directive not in (None, "replace"):
            raise merger.error(
                "document", f"unknown directive '$patch: {directive}'", "'$patch' is 'delete' or 'replace'"
            )
        if position is None or directive == "replace":
            fresh = materialize(patch_doc, merger.error, "document")
            if not isinstance(fresh, CommentedMap):
                fresh = _commented(fresh)
            if position is None:
                docs.append(fresh)
            else:
                docs[position] = fresh
            continue
        merger.merge_map(docs[position], patch_doc, "", "")
    return docs


def _commented(value: Any) -> Any:
    from ichor.machinery.yamlio import from_plain

    return from_plain(value)
