"""End to end: ``talosctl patch mc`` against a running node (the booted process node of the introspection tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from booted_node import Node

from ichor.machinery import proc

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(booted_node: Node) -> Node:
    """The session's booted node (conftest.py)."""
    return booted_node


HOSTNAME_PATH = "/machine/network/hostname"


def _patch(node: Node, *args: str) -> proc.Completed:
    return node.talosctl("patch", *args)


def _config(node: Node) -> str:
    done = node.talosctl("read", "/system/state/config.yaml")
    assert done.exit_code == 0, done.stderr
    return done.stdout


def _running_config(node: Node) -> str:
    """The config the node runs by (a staged config is on disk but not running yet)."""
    done = node.talosctl("get", "mc", "v1alpha1", "-o", "yaml")
    assert done.exit_code == 0, done.stderr
    return done.stdout


def _set_debug(node: Node, value: str) -> None:
    done = _patch(node, "mc", "-m", "no-reboot", "-p", f"debug: {value}")
    assert done.exit_code == 0, done.stderr


def test_strategic_merge_patch_from_a_file_applies_without_a_reboot(node: Node, tmp_path: Path) -> None:
    assert "debug: false" in _config(node)
    patch_file = tmp_path / "debug.yaml"
    patch_file.write_text("debug: true\n")
    done = _patch(node, "mc", "--patch", f"@{patch_file}", "--mode", "no-reboot")
    assert done.exit_code == 0, done.stderr
    address = node.process.address
    lines = done.stdout.splitlines()
    assert lines[0] == f"patched MachineConfigs.config.talos.dev/v1alpha1 at the node {address}"
    assert "Applied configuration without a reboot" in done.stdout
    assert "debug: true" in _config(node)
    # The same patch again changes nothing, and nothing is sent.
    again = _patch(node, "machineconfig", "v1alpha1", "--patch-file", str(patch_file))
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == "Apply was skipped: no changes detected."
    _set_debug(node, "false")


def test_json6902_patch_inline(node: Node) -> None:
    ops = [{"op": "add", "path": HOSTNAME_PATH, "value": "patched-by-json"}]
    done = _patch(node, "mc", "-p", json.dumps(ops), "-m", "no-reboot")
    assert done.exit_code == 0, done.stderr
    assert "hostname: patched-by-json" in _config(node)
    undo = _patch(node, "mc", "-p", json.dumps([{"op": "remove", "path": HOSTNAME_PATH}]), "-m", "no-reboot")
    assert undo.exit_code == 0, undo.stderr
    assert "patched-by-json" not in _config(node)


def test_dry_run_shows_the_diff_and_changes_nothing(node: Node) -> None:
    before = _config(node)
    done = _patch(node, "mc", "-p", "debug: true", "--dry-run")
    assert done.exit_code == 0, done.stderr
    assert "Dry run summary:" in done.stdout
    assert "-debug: false" in done.stdout and "+debug: true" in done.stdout
    assert _config(node) == before


def test_staged_and_try_modes(node: Node) -> None:
    assert "debug: false" in _running_config(node)
    staged = _patch(node, "mc", "-p", "debug: true", "--mode", "staged")
    assert staged.exit_code == 0, staged.stderr
    assert "Staged configuration to be applied after the next reboot" in staged.stdout
    assert "debug: true" in _config(node)  # written for the next boot
    assert "debug: false" in _running_config(node)  # ... but not running yet
    tried = _patch(node, "mc", "-p", "debug: true", "--mode", "try", "--timeout", "10m")
    assert tried.exit_code == 0, tried.stderr
    assert "Applied configuration without a reboot" in tried.stdout
    assert "10m0s" in tried.stdout
    assert "debug: true" in _config(node)
    _set_debug(node, "false")


def test_every_node_is_patched_in_turn(node: Node) -> None:
    address = node.process.address
    done = node.talosctl("-n", f"{address},{address}", "patch", "mc", "-p", "debug: true", "-m", "no-reboot")
    assert done.exit_code == 0, done.stderr
    # The first pass patches the node; the second sees the change already there.
    assert done.stdout.count("patched MachineConfigs.config.talos.dev/v1alpha1") == 1
    assert done.stdout.rstrip().endswith("Apply was skipped: no changes detected.")
    _set_debug(node, "false")


def test_wrong_input_names_the_flag(node: Node, tmp_path: Path) -> None:
    before = _config(node)
    none = _patch(node, "mc")
    assert none.exit_code == 2 and "either --patch or --patch-file should be defined" in none.stderr
    not_a_patch = _patch(node, "mc", "-p", "just words here")
    assert not_a_patch.exit_code == 1 and "--patch" in not_a_patch.stderr
    missing = _patch(node, "mc", "-p", f"@{tmp_path / 'missing.yaml'}")
    assert missing.exit_code == 1
    assert "missing.yaml" in missing.stderr and "given to --patch does not exist" in missing.stderr
    missing_file = _patch(node, "mc", "--patch-file", str(tmp_path / "gone.yaml"))
    assert missing_file.exit_code == 1 and "given to --patch-file does not exist" in missing_file.stderr
    other = _patch(node, "machinetype", "-p", "debug: true")
    assert other.exit_code == 1
    assert "only the machineconfig resource can be edited (not MachineTypes" in other.stderr
    assert "talosctl patch mc" in other.stderr
    wrong_id = _patch(node, "mc", "maintenance", "-p", "debug: true")
    assert wrong_id.exit_code == 1 and "not 'maintenance'; run `talosctl patch mc`" in wrong_id.stderr
    mode = _patch(node, "mc", "-p", "debug: true", "--mode", "sometimes")
    assert mode.exit_code == 2 and "'sometimes' is not one of" in mode.stderr
    timeout = _patch(node, "mc", "-p", "debug: true", "--mode", "try", "--timeout", "soon")
    assert timeout.exit_code == 2 and "--timeout" in timeout.stderr
    # A JSON patch for a path the config lacks fails on that node, naming it and the flag.
    absent = _patch(node, "mc", "-p", json.dumps([{"op": "remove", "path": "/machine/nothing"}]))
    assert absent.exit_code == 1
    assert f"error: {node.process.address}: " in absent.stderr and "--patch" in absent.stderr
    assert _config(node) == before


def test_a_patch_making_an_invalid_config_is_refused_by_the_node(node: Node) -> None:
    before = _config(node)
    done = _patch(node, "mc", "-p", "version: v1alpha2", "-m", "no-reboot")
    assert done.exit_code == 1
    assert f"error: {node.process.address}: rpc error: code = InvalidArgument" in done.stderr
    assert "--patch" in done.stderr and "kept its own" in done.stderr
    assert "patched MachineConfigs" not in done.stdout
    assert _config(node) == before


def test_a_failing_node_does_not_stop_the_others(node: Node) -> None:
    address = node.process.address
    gone = "127.0.0.9"  # nothing listens there: apid cannot reach it
    done = node.talosctl("-n", f"{gone},{address}", "patch", "mc", "-p", "debug: true", "-m", "no-reboot")
    assert done.exit_code == 1
    assert "error: 127.0.0.9: rpc error: code = Unavailable" in done.stderr
    assert "hint: cannot read the machine config of 127.0.0.9" in done.stderr
    assert f"patched MachineConfigs.config.talos.dev/v1alpha1 at the node {address}" in done.stdout
    assert "debug: true" in _config(node)
    _set_debug(node, "false")
