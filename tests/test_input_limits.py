"""Hostile YAML: alias bombs, runaway nesting and oversized input are refused fast, in bounded memory.

Every YAML text goes through ``yamlio.load_documents``, which enforces ``limits.INPUT_LIMITS``;
these tests drive it through the ways a user reaches it: ``load_config``, ``talosctl validate``,
``talosctl machineconfig patch`` (the config and the patch) and JSON patch ``copy`` operations.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_inputs import ALIAS_BOMB

from ichor.machinery.config import load_config
from ichor.machinery.errors import InputLimitError, MachineryError, YAMLError
from ichor.machinery.limits import INPUT_LIMITS, InputLimits
from ichor.machinery.patch import apply_patches, load_patches
from ichor.machinery.yamlio import load_documents, to_plain

BOMB = ALIAS_BOMB

FAST_SECONDS = 1.0
PEAK_BYTES = 50 * 1024 * 1024


@pytest.fixture
def bounded() -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """Run a call and assert it took under a second (unless told) and peaked under 50 MB of Python allocations."""

    def run(call: Callable[[], Any], seconds: float = FAST_SECONDS) -> Any:
        tracemalloc.start()
        started = time.monotonic()
        try:
            return call()
        finally:
            elapsed = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert elapsed < seconds, f"took {elapsed:.2f}s"
            assert peak < PEAK_BYTES, f"peaked at {peak / 1e6:.0f} MB"

    yield run


def test_the_bomb_is_the_classic_one() -> None:
    assert len(BOMB.encode()) == 360
    assert BOMB.count("*") == 72


def test_load_config_refuses_an_alias_bomb_fast_and_in_bounded_memory(bounded: Any) -> None:
    with pytest.raises(InputLimitError) as caught:
        bounded(lambda: load_config(BOMB.encode(), source="bomb.yaml"))
    assert caught.value.limit == "max_nodes"
    assert f"expand to more than {INPUT_LIMITS.max_nodes:,} nodes (limit max_nodes)" in str(caught.value)
    assert str(caught.value).startswith("bomb.yaml: ")
    assert caught.value.hint is not None and "alias bomb" in caught.value.hint


def test_talosctl_validate_refuses_the_bomb(talosctl: Any, tmp_path: Path, bounded: Any) -> None:
    (tmp_path / "bomb.yaml").write_text(BOMB)
    result = bounded(lambda: talosctl("validate", "--config", "bomb.yaml", "--mode", "metal", cwd=tmp_path))
    assert result.exit_code == 1
    assert "error: bomb.yaml: YAML aliases expand to more than" in result.stderr
    assert "(limit max_nodes)" in result.stderr and "hint: " in result.stderr
    assert "Traceback" not in result.stderr


def test_talosctl_machineconfig_patch_refuses_a_bomb_as_config_or_patch(
    talosctl: Any, tmp_path: Path, bounded: Any
) -> None:
    (tmp_path / "bomb.yaml").write_text(BOMB)
    (tmp_path / "ok.yaml").write_text("version: v1alpha1\nmachine:\n    type: worker\n")
    as_config = bounded(
        lambda: talosctl("machineconfig", "patch", "bomb.yaml", "-p", '{"machine": {}}', cwd=tmp_path)
    )
    as_patch = bounded(
        lambda: talosctl("machineconfig", "patch", "ok.yaml", "-p", "@bomb.yaml", cwd=tmp_path)
    )
    for result in (as_config, as_patch):
        assert result.exit_code == 1
        assert "(limit max_nodes)" in result.stderr and "alias bomb" in result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_ordinary_aliases_still_load() -> None:
    docs = load_documents("a: &x [1, 2]\nb: *x\nc: {<<: &m {p: 1}, q: 2}\nd: *m\n")
    assert to_plain(docs[0]) == {"a": [1, 2], "b": [1, 2], "c": {"q": 2, "p": 1}, "d": {"p": 1}}


def test_an_anchor_may_be_redefined_the_later_one_wins() -> None:
    assert to_plain(load_documents("a: &x 1\nb: &x 2\nc: *x\n")[0]) == {"a": 1, "b": 2, "c": 2}


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: {c: *a}}\n"])
def test_an_alias_inside_its_own_anchor_is_refused(text: str) -> None:
    with pytest.raises(InputLimitError, match=r"alias \*a is used inside its own anchor &a \(line 1\)"):
        load_documents(text, source="loop.yaml")


def test_too_many_alias_references_are_refused() -> None:
    limits = InputLimits(max_aliases=3)
    assert load_documents("a: &x 1\nl: [*x, *x, *x]\n", limits=limits)
    with pytest.raises(
        InputLimitError, match=r"more than 3 YAML alias references \(limit max_aliases\)"
    ) as caught:
        load_documents("a: &x 1\nl: [*x, *x, *x, *x]\n", limits=limits)
    assert caught.value.limit == "max_aliases"


def test_the_default_alias_limit_refuses_ten_thousand_and_one() -> None:
    text = "a: &x 1\nl: [" + ", ".join(["*x"] * (INPUT_LIMITS.max_aliases + 1)) + "]\n"
    with pytest.raises(InputLimitError, match="limit max_aliases"):
        load_documents(text)


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_runaway_nesting_is_refused_before_python_recursion_runs_out(opening: str, bounded: Any) -> None:
    if opening == "- ":
        text = "".join("  " * i + "-\n" for i in range(100)) + "  " * 100 + "x\n"
    else:
        text = opening * 100_000
    with pytest.raises(InputLimitError, match=r"nested deeper than 64 levels \(limit max_depth\)") as caught:
        bounded(lambda: load_documents(text, source="deep.yaml"))
    assert caught.value.limit == "max_depth"


def test_nesting_at_the_limit_loads() -> None:
    depth = INPUT_LIMITS.max_depth
    docs = load_documents("[" * depth + "]" * depth)
    assert docs


def test_input_over_max_bytes_is_refused_before_parsing(bounded: Any) -> None:
    big = "a: " + "x" * INPUT_LIMITS.max_bytes + "\n"
    with pytest.raises(InputLimitError, match=r"is over the 4,194,304-byte limit") as caught:
        bounded(lambda: load_config(big.encode(), source="big.yaml"))
    assert caught.value.limit == "max_bytes" and caught.value.hint


def test_a_flat_document_with_too_many_nodes_is_refused_without_blaming_aliases() -> None:
    with pytest.raises(InputLimitError, match=r"the YAML holds more than 10 nodes") as caught:
        load_documents("[" + ", ".join(["1"] * 20) + "]", limits=InputLimits(max_nodes=10))
    assert "alias" not in str(caught.value)


def test_limits_count_across_documents() -> None:
    limits = InputLimits(max_nodes=10)
    one = "a: [1, 2, 3]\n"  # mapping, key, sequence, 3 items: 6 nodes
    assert load_documents(one, limits=limits)
    with pytest.raises(InputLimitError):
        load_documents(one + "---\n" + one, limits=limits)


def test_limit_errors_are_yaml_errors_so_every_caller_already_handles_them() -> None:
    assert issubclass(InputLimitError, YAMLError) and issubclass(InputLimitError, MachineryError)


def test_json_patch_copies_that_double_a_list_are_refused(bounded: Any) -> None:
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/machine/x", "value": [[1, 2, 3, 4, 5, 6, 7, 8]]}]
    ops += [{"op": "copy", "from": "/machine/x", "path": "/machine/x/-"}] * 40
    docs = load_documents("version: v1alpha1\nmachine:\n    type: worker\n")
    patches = load_patches([json.dumps(ops)])
    with pytest.raises(InputLimitError, match=r"'copy' operations add more than 250,000 nodes") as caught:
        # jsonpatch does copy up to the limit (250,000 nodes, slowed down by tracemalloc) first
        bounded(lambda: apply_patches(docs, patches), seconds=5)
    assert "(copy /machine/x/-)" in str(caught.value)  # the copy over the limit is named
    assert caught.value.limit == "max_nodes"


def test_a_few_json_patch_copies_still_apply() -> None:
    ops = [
        {"op": "add", "path": "/machine/x", "value": [1]},
        {"op": "copy", "from": "/machine/x", "path": "/machine/y"},
    ]
    docs = load_documents("version: v1alpha1\nmachine:\n    type: worker\n")
    patched = apply_patches(docs, load_patches([json.dumps(ops)]))
    assert to_plain(patched[0])["machine"] == {"type": "worker", "x": [1], "y": [1]}
