"""``talosctl patch``: what is checked before any node is contacted, and the patching of a node's config text.

The command against a running node is in ``test_e2e_patch.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ichor.cli._patch import patched_config
from ichor.machinery.errors import PatchError
from ichor.machinery.patch import load_patches

NODE_CONFIG = """\
version: v1alpha1 # Indicates the schema used to decode the contents.
debug: false # Enable verbose logging to the console.
machine:
    type: controlplane
    network:
        hostname: cp1
cluster:
    clusterName: c1
"""


def test_strategic_patch_changes_only_what_it_names() -> None:
    text = patched_config(
        NODE_CONFIG, load_patches(["machine:\n  network:\n    hostname: cp2\n"], flag="--patch")
    )
    assert text == NODE_CONFIG.replace("hostname: cp1", "hostname: cp2")


def test_json_patch_and_patches_in_order() -> None:
    ops = json.dumps([{"op": "replace", "path": "/debug", "value": True}])
    text = patched_config(NODE_CONFIG, load_patches([ops, "debug: false"], flag="--patch"))
    # The later strategic patch wins; comments of untouched lines stay.
    assert text == NODE_CONFIG


def test_a_patch_that_does_not_fit_the_config_names_the_flag() -> None:
    ops = json.dumps([{"op": "remove", "path": "/machine/nothing"}])
    with pytest.raises(PatchError, match="--patch"):
        patched_config(NODE_CONFIG, load_patches([ops], flag="--patch"))


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "either --patch or --patch-file should be defined"),
        (("-p", "just words here"), 1, "given to --patch is a string, not a config document"),
        (("-p", "@missing.yaml"), 1, "patch file 'missing.yaml' given to --patch does not exist"),
        (("--patch-file", "gone.yaml"), 1, "patch file 'gone.yaml' given to --patch-file does not exist"),
        (("-p", '[{"op": "bogus"}]'), 1, "unknown op 'bogus'"),
        (("-p", "debug: true", "--mode", "sometimes"), 2, "'sometimes' is not one of"),
        (("-p", "debug: true", "--timeout", "soon"), 2, "--timeout"),
    ],
)
def test_wrong_input_is_refused_before_any_node_is_contacted(
    talosctl, tmp_path: Path, args: tuple[str, ...], code: int, message: str
) -> None:
    # No talosconfig here: reaching a node would fail with a different error.
    r = talosctl(
        "--talosconfig", str(tmp_path / "absent"), "-n", "127.0.0.1", "patch", "mc", *args, cwd=tmp_path
    )
    assert r.exit_code == code, r.stderr
    assert message in r.stderr
    assert "talosconfig" not in r.stderr
