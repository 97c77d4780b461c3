from __future__ import annotations

import copy
from typing import Any

import pytest

from ichor.machinery.configdiff import can_apply_immediately, changed_paths, unified_diff

BASE: dict[str, Any] = {
    "version": "v1alpha1",
    "debug": False,
    "machine": {
        "type": "worker",
        "token": "abc",
        "network": {"hostname": "a"},
        "features": {"rbac": True, "kubePrism": {"enabled": True, "port": 7445}},
        "files": [],
    },
    "cluster": {"clusterName": "c"},
}


def _changed(**updates: Any) -> dict[str, Any]:
    new = copy.deepcopy(BASE)
    for dotted, value in updates.items():
        node = new
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return new


@pytest.mark.parametrize(
    "update",
    [
        {"debug": True},
        {"cluster__clusterName": "other"},
        {"machine__network__hostname": "b"},
        {"machine__kubelet": {"extraArgs": {"v": "2"}}},
        {"machine__features__kubePrism": {"enabled": False}},
        {"machine__certSANs": ["x"]},
    ],
)
def test_live_changes(update: dict[str, Any]) -> None:
    check = can_apply_immediately(BASE, _changed(**update))
    assert check.changed and check.immediate, check.explain()


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"machine__type": "controlplane"}, "machine.type"),
        ({"machine__token": "new"}, "machine.token"),
        ({"machine__files": [{"path": "/var/f"}]}, "machine.files"),
        ({"machine__features__rbac": False}, "machine.features.rbac"),
        ({"machine__env": {"A": "b"}}, "machine.env"),
        ({"persist": False}, "persist"),
    ],
)
def test_changes_that_need_a_reboot_are_named(update: dict[str, Any], field: str) -> None:
    check = can_apply_immediately(BASE, _changed(**update))
    assert not check.immediate
    assert field in check.needs_reboot
    assert field in check.explain()


def test_no_change() -> None:
    check = can_apply_immediately(BASE, copy.deepcopy(BASE))
    assert check.immediate and check.changed == [] and check.explain() == "no changes"


def test_changed_paths_handles_lists_of_different_length() -> None:
    assert changed_paths({"a": [1]}, {"a": [1, 2]}) == [("a",)]
    assert changed_paths({"a": [1, 2]}, {"a": [1, 3]}) == [("a", "1")]


def test_unified_diff() -> None:
    assert unified_diff("a: 1\n", "a: 1\n") == ""
    diff = unified_diff("a: 1\n", "a: 2\n")
    assert diff.startswith("--- a\n+++ b\n") and "-a: 1\n+a: 2\n" in diff
