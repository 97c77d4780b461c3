"""Fuzz: strategic-merge and JSON patches, parsed from hostile text and applied to a real config.

Properties: parsing and applying raise only :class:`~ichor.machinery.errors.MachineryError`
(``PatchError`` or an input limit), JSON patch copies cannot amplify past the node limit, and a
patch never changes the documents it was given (a refused patch leaves nothing behind).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fuzz_budget import budget, generated_controlplane
from hypothesis import given
from hypothesis import strategies as st

from ichor.machinery.errors import InputLimitError, MachineryError
from ichor.machinery.patch import apply_patches, parse_patch
from ichor.machinery.yamlio import dump_documents, load_documents, to_plain

pytestmark = pytest.mark.fuzz

CONFIG = generated_controlplane()
DOCS = load_documents(CONFIG)
PLAIN = [to_plain(d) for d in DOCS]


def _apply(text: str) -> None:
    try:
        patch = parse_patch(text, source="fuzz")
        apply_patches(DOCS, [patch])
    except MachineryError:
        pass
    assert [to_plain(d) for d in DOCS] == PLAIN, "a patch changed the documents it was given"


_keys = st.sampled_from(
    ["machine", "cluster", "network", "interfaces", "interface", "vlans", "vlanId", "hostname", "$patch",
     "$value", "delete", "replace", "apiVersion", "kind", "name", "version", "podSubnets", "files",
     "admissionControl", "deviceSelector", "0", "-", ""]
)  # fmt: skip
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=6), _keys),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=10,
)


@budget(150)
@given(st.lists(st.dictionaries(_keys, _values, max_size=4), min_size=1, max_size=3))
def test_strategic_merge_patches(docs: list[dict[str, Any]]) -> None:
    _apply("\n---\n".join(json.dumps(d) for d in docs))


_pointer = st.lists(st.one_of(_keys, st.integers(-1, 5).map(str)), max_size=5).map(
    lambda parts: "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
)
_operation = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "nope"]), "path": _pointer},
    optional={
        "from": _pointer,
        "value": _values,
        "document": st.sampled_from(["v1alpha1", "Nope", "a/b/c/d"]),
    },
)


@budget(150)
@given(st.lists(_operation, max_size=6))
def test_json_patches(operations: list[dict[str, Any]]) -> None:
    _apply(json.dumps(operations))


@budget(100)
@given(st.text(max_size=80))
def test_any_text_as_a_patch(text: str) -> None:
    _apply(text)


@budget(6)
@given(st.integers(8, 24))
def test_json_patch_copies_cannot_amplify(doublings: int) -> None:
    # Each copy doubles a list: 2**24 entries unless the node limit stops it.
    operations = [{"op": "add", "path": "/machine/x", "value": [1]}]
    operations += [{"op": "copy", "from": "/machine/x", "path": "/machine/x/-"} for _ in range(doublings)]
    operations += [{"op": "copy", "from": "/machine", "path": f"/cluster/c{i}"} for i in range(3)]
    try:
        patched = apply_patches(copy.deepcopy(DOCS), [parse_patch(json.dumps(operations), source="fuzz")])
    except InputLimitError:
        return
    except MachineryError:
        return
    assert len(dump_documents(patched)) < 64 * 1024 * 1024
