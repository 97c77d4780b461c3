"""Property tests for strategic merge and JSON patches."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery.errors import PatchError
from ichor.machinery.patch import JSONPatch, JSONPatchOp, StrategicMergePatch, apply_patches
from ichor.machinery.yamlio import dump_documents, from_plain, load_documents, to_plain

keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=1, max_value=1000),
    st.text(alphabet="xyz019", min_size=1, max_size=5),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)),
    max_leaves=8,
)
trees = st.dictionaries(keys, values, max_size=4)
subnets = st.lists(st.from_regex(r"10\.[0-9]{1,2}\.0\.0/16", fullmatch=True), max_size=3)
iface_names = st.sampled_from(["eth0", "eth1", "eth2", "bond0"])


def v1alpha1(machine: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> Any:
    doc: dict[str, Any] = {"version": "v1alpha1"}
    if machine is not None:
        doc["machine"] = machine
    if cluster is not None:
        doc["cluster"] = cluster
    return from_plain(doc)


def strategic(*docs: Any) -> StrategicMergePatch:
    return StrategicMergePatch(source="test", documents=[from_plain(d) for d in docs])


def merged(config: list[Any], *patches: Any) -> list[Any]:
    return [to_plain(d) for d in apply_patches(config, list(patches))]


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(tree=trees)
def test_merging_an_empty_patch_is_identity(tree: dict[str, Any]) -> None:
    config = [v1alpha1(machine=tree)]
    assert merged(config, strategic({"version": "v1alpha1"})) == [to_plain(config[0])]
    assert merged(config, strategic({"machine": {}})) == [to_plain(config[0])]


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(left=st.dictionaries(keys, scalars, max_size=4), right=st.dictionaries(keys, scalars, max_size=4))
def test_merge_of_disjoint_maps_contains_both(left: dict[str, Any], right: dict[str, Any]) -> None:
    right = {f"p{k}": v for k, v in right.items()}  # disjoint by construction
    result = merged([v1alpha1(machine={"sysctls": left})], strategic({"machine": {"sysctls": right}}))
    assert result[0]["machine"]["sysctls"] == {**left, **right}
    assert list(result[0]["machine"]["sysctls"]) == [*left, *right]


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(left=st.lists(scalars, max_size=5), right=st.lists(scalars, max_size=5))
def test_lists_append_in_order(left: list[Any], right: list[Any]) -> None:
    result = merged([v1alpha1(machine={"certSANs": left})], strategic({"machine": {"certSANs": right}}))
    assert result[0]["machine"]["certSANs"] == left + right


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(base=subnets, patch=subnets.filter(bool))
def test_replace_fields_are_idempotent(base: list[str], patch: list[str]) -> None:
    config = [v1alpha1(cluster={"network": {"podSubnets": base, "serviceSubnets": base}})]
    p = strategic({"cluster": {"network": {"podSubnets": patch, "serviceSubnets": patch}}})
    once = merged(config, p)
    assert merged(config, p, p) == once
    assert once[0]["cluster"]["network"] == {"podSubnets": patch, "serviceSubnets": patch}


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(
    base=st.lists(iface_names, max_size=4, unique=True),
    patch=st.lists(st.tuples(iface_names, st.integers(min_value=576, max_value=9000)), max_size=6),
)
def test_merge_by_key_never_duplicates_a_key(base: list[str], patch: list[tuple[str, int]]) -> None:
    config = [v1alpha1(machine={"network": {"interfaces": [{"interface": n, "dhcp": True} for n in base]}})]
    p = strategic({"machine": {"network": {"interfaces": [{"interface": n, "mtu": m} for n, m in patch]}}})
    for result in (merged(config, p), merged(config, p, p)):
        names = [i["interface"] for i in result[0]["machine"]["network"]["interfaces"]]
        assert len(names) == len(set(names))
        assert names[: len(base)] == base  # existing items keep their place
        for name, _ in patch:
            item = next(i for i in result[0]["machine"]["network"]["interfaces"] if i["interface"] == name)
            assert item["mtu"] == [m for n, m in patch if n == name][-1]  # the last patch item wins


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(tree=trees, patch=trees)
def test_merge_never_mutates_its_inputs(tree: dict[str, Any], patch: dict[str, Any]) -> None:
    config = [v1alpha1(machine=tree)]
    before = copy.deepcopy(to_plain(config))
    p = strategic({"machine": patch})
    # mapping/list mismatches between random trees are expected to be refused
    with contextlib.suppress(PatchError):
        apply_patches(config, [p])
    assert to_plain(config) == before
    assert to_plain(p.documents) == [{"machine": patch}]


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(tree=trees)
def test_merging_a_config_into_itself_keeps_every_key(tree: dict[str, Any]) -> None:
    config = [v1alpha1(machine=tree)]
    result = merged(config, strategic({"machine": tree}))[0]["machine"]
    assert set(result) == set(tree)


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@settings(max_examples=60, deadline=None)
@given(tree=trees, key=keys, value=values)
def test_json_add_then_remove_returns_the_original(tree: dict[str, Any], key: str, value: Any) -> None:
    new_key = f"new-{key}"
    config = [v1alpha1(machine=tree)]
    text_before = dump_documents(config)
    patch = JSONPatch(
        source="test",
        operations=[
            JSONPatchOp(op="add", path=_pointer("machine", new_key), value=value, has_value=True),
            JSONPatchOp(op="remove", path=_pointer("machine", new_key)),
        ],
    )
    result = apply_patches(config, [patch])
    assert to_plain(result) == to_plain(config)
    assert dump_documents(result) == text_before


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(tree=trees, value=scalars)
def test_failed_json_test_op_raises_and_changes_nothing(tree: dict[str, Any], value: Any) -> None:
    text = dump_documents([v1alpha1(machine=tree)])
    config = load_documents(text)
    patch = JSONPatch(
        source="test",
        operations=[
            JSONPatchOp(op="add", path="/machine/touched", value=1, has_value=True),
            JSONPatchOp(op="test", path="/version", value=["not", value], has_value=True),
        ],
    )
    try:
        apply_patches(config, [patch])
    except PatchError as exc:
        assert "test failed" in str(exc)
    else:
        raise AssertionError("a failing test op must raise PatchError")
    assert dump_documents(config) == text
