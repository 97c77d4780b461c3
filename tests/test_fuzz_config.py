"""Fuzz: the config loader and validator, and a node's apply-config, with hostile text.

Properties: only :class:`~ichor.machinery.errors.MachineryError` (never a bare ``KeyError``,
``RecursionError``...); alias graphs of any shape stay within a memory bound; a node refuses what
does not load with ``InvalidArgument`` and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fuzz_budget import budget, generated_controlplane
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from hypothesis import given
from hypothesis import strategies as st

from ichor.api.gen.machine import machine_pb2
from ichor.machined.configstore import ConfigStore
from ichor.machined.configstore import load as node_load
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.errors import InputLimitError, MachineryError
from ichor.machinery.yamlio import dump_documents, from_plain, load_documents, to_plain

pytestmark = pytest.mark.fuzz

CONTROLPLANE = generated_controlplane()
PLAIN = to_plain(load_documents(CONTROLPLANE)[0])


def _load_and_validate(data: str | bytes) -> None:
    try:
        container = load_config(data, source="fuzz")
    except MachineryError:
        return
    for mode in Mode:
        with contextlib.suppress(MachineryError):
            validate(container, mode, strict=True)


# YAML's punctuation, anchors, aliases, tags and merge keys, so examples reach the parser's corners.
_YAML_TOKENS = st.sampled_from(
    ["a", "b", ":", " ", "\n", "  ", "- ", "[", "]", "{", "}", ",", "&x ", "*x", "&y ", "*y", "<<: ",
     "!!str ", "!!map ", "!!binary ", "!custom ", "|", ">", "'", '"', "#", "---\n", "...\n", "%YAML 1.1\n",
     "version: v1alpha1\n", "machine:\n", "  type: ", "0x1F", "1e400", "~", "null", "\t", "\\u0000", "?"]
)  # fmt: skip


@budget(200)
@given(st.lists(_YAML_TOKENS, max_size=40).map("".join))
def test_yaml_shaped_text(text: str) -> None:
    _load_and_validate(text)


@budget(100)
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _load_and_validate(data)


def _mutate(tree: Any, path: list[Any], value: Any) -> Any:
    """``tree`` with the node at ``path`` (followed as far as it goes) replaced by ``value``."""
    if not path or not isinstance(tree, dict | list) or not tree:
        return value
    if isinstance(tree, dict):
        key = sorted(tree)[path[0] % len(tree)]
        return {**tree, key: _mutate(tree[key], path[1:], value)}
    index = path[0] % len(tree)
    return [*tree[:index], _mutate(tree[index], path[1:], value), *tree[index + 1 :]]


_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@budget(80)
@given(st.lists(st.tuples(st.lists(st.integers(0, 50), max_size=6), _values), min_size=1, max_size=4))
def test_a_generated_config_with_random_values_in_random_places(edits: list[tuple[list[int], Any]]) -> None:
    tree = PLAIN
    for path, value in edits:
        tree = _mutate(tree, path, value)
    _load_and_validate(dump_documents([from_plain(tree)]))


def _alias_graph(fanouts: list[int]) -> str:
    """Anchors a0..an, each a list of ``fanout`` aliases of the one before (a generalised bomb)."""
    lines = ["version: v1alpha1", 'a0: &a0 ["lol", "lol"]']
    for i, fanout in enumerate(fanouts, start=1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


@budget(40)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12))
def test_alias_graphs_of_any_shape_stay_within_a_memory_bound(fanouts: list[int]) -> None:
    text = _alias_graph(fanouts)
    tracemalloc.start()
    try:
        try:
            load_config(text, source="fuzz")
        except InputLimitError:
            pass
        except MachineryError:
            pass  # loads, but it is no machine config
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 250,000 expanded nodes at most (machinery.limits): tens of MB, never the gigabytes of a bomb.
    assert peak < 150 * 1024 * 1024, f"{peak / 2**20:.0f} MiB for {len(text)} bytes"


@budget(40)
@given(
    st.one_of(st.binary(max_size=300), st.lists(_YAML_TOKENS, max_size=30).map(lambda t: "".join(t).encode()))
)
def test_a_node_refuses_what_does_not_load_and_writes_nothing(tmp_path_factory: Any, data: bytes) -> None:
    layout = Layout(root=tmp_path_factory.mktemp("node"), address="127.5.0.3")
    layout.ensure()
    store = ConfigStore(layout, State(), EventBus(), say=lambda _: None, clock=lambda: datetime.now(UTC))
    active = node_load(CONTROLPLANE, "test")
    store.activate(active)
    before = Path(layout.config_file).read_bytes()
    modes = machine_pb2.ApplyConfigurationRequest
    for mode in (modes.NO_REBOOT, modes.REBOOT, modes.STAGED, modes.TRY, modes.AUTO):
        try:
            asyncio.run(store.apply(modes(data=data, mode=mode)))
        except GRPCError as exc:
            assert exc.status is Status.INVALID_ARGUMENT, exc
        else:
            raise AssertionError(f"applied {data!r}")
        assert Path(layout.config_file).read_bytes() == before
        assert store.active is active
