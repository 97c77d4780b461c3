"""``talosctl get -o json|jsonpath``: the same ``{node, metadata, spec}`` document as ``-o yaml``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_etcd_harness import CLIENT_TLS_CLOSE_RACE, FakeNode
from test_cli_node_errors import GOOD, member, members_node

from ichor.machinery.jsonpath import JSONPathNotFoundError, find_results

pytestmark = pytest.mark.filterwarnings(CLIENT_TLS_CLOSE_RACE)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeNode]:
    fake = FakeNode(tmp_path, "127.77.9.2")
    with fake.serving():
        members_node(fake, [member("cp-1", "cp-1"), member("w-1", "w-1")])
        yield fake


@pytest.mark.parametrize(
    ("expression", "lines"),
    [
        ("{.spec.hostname}", ["cp-1", "w-1"]),
        ("{.metadata.id}", ["cp-1", "w-1"]),
        ("{.node}", [GOOD, GOOD]),
        ("{.metadata.version}", ["2", "2"]),
        # Text outside braces is a result of its own, each on a line (Kubernetes' FindResults).
        ("id={.metadata.id}", ["id=", "cp-1", "id=", "w-1"]),
    ],
)
def test_jsonpath_is_evaluated_against_node_metadata_spec(
    node: FakeNode, talosctl: Any, expression: str, lines: list[str]
) -> None:
    r = talosctl(*node.args(GOOD), "get", "members", "-o", f"jsonpath={expression}")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == lines


def test_jsonpath_map_prints_as_indented_json(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(GOOD), "get", "members", "cp-1", "-o", "jsonpath={.spec}")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == '{\n    "hostname": "cp-1",\n    "nodeId": "cp-1"\n}\n'


@pytest.mark.parametrize("expression", ["{.hostname}", "{.spec.hostnam}", "{.spec.hostname[3]}"])
def test_jsonpath_matching_nothing_is_an_error_naming_the_path(
    node: FakeNode, talosctl: Any, expression: str
) -> None:
    r = talosctl(*node.args(GOOD), "get", "members", "-o", f"jsonpath={expression}")
    assert r.exit_code == 1
    assert f"error finding result for jsonpath '{expression}'" in r.stderr
    assert "hint: the path starts at node, metadata or spec" in r.stderr


def test_invalid_jsonpath_is_a_usage_error_before_any_call(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(GOOD), "get", "members", "-o", "jsonpath={.spec..x}")
    assert r.exit_code == 2 and "-o/--output" in r.stderr
    assert "State.List" not in node.calls


def test_json_has_the_yaml_metadata(node: FakeNode, talosctl: Any) -> None:
    r = talosctl(*node.args(GOOD), "get", "members", "cp-1", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {
        "node": GOOD,
        "metadata": {
            "namespace": "cluster",
            "type": "Members.cluster.talos.dev",
            "id": "cp-1",
            "version": 2,
            "owner": "cluster.MemberController",
            "phase": "running",
            "created": "2024-05-01T10:00:00Z",
            "updated": "2024-05-01T10:05:00Z",
        },
        "spec": {"nodeId": "cp-1", "hostname": "cp-1"},
    }
    # Go's encoder: keys sorted, four spaces.
    assert r.stdout.startswith('{\n    "metadata": {\n        "created": ')
    yaml_out = talosctl(*node.args(GOOD), "get", "members", "cp-1", "-o", "yaml").stdout
    for key in (
        "owner: cluster.MemberController",
        "created: 2024-05-01T10:00:00Z",
        "updated: 2024-05-01T10:05:00Z",
    ):
        assert key in yaml_out


def test_find_results_strict_and_lenient() -> None:
    data = {"spec": {"list": [1, 2], "empty": []}, "node": "n"}
    assert find_results("{.spec.list[*]}", data) == [[1, 2]]
    assert find_results("{.spec.empty[*]}", data) == [[]]
    assert find_results("{.spec.list[-1]}", data) == [[2]]
    with pytest.raises(JSONPathNotFoundError, match="missing is not found"):
        find_results("{.spec.missing}", data)
    with pytest.raises(JSONPathNotFoundError, match="index 5, length 2"):
        find_results("{.spec.list[5]}", data)
    with pytest.raises(JSONPathNotFoundError, match="not array"):
        find_results("{.node[0]}", data)
