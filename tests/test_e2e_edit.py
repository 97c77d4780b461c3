"""End to end: ``talosctl edit mc`` against a running node, with ``EDITOR`` a small shell script.

The script plays the user: each time the editor opens it saves a copy of what it was shown, then
does this run's next step (``sed`` an edit, write back a rejected config, empty the file ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from booted_node import Node

from ichor.cli._edit import editable, editor_command, strip_editing_comment
from ichor.machinery import proc

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(booted_node: Node) -> Node:
    """The session's booted node (conftest.py)."""
    return booted_node


EDITOR_SCRIPT = """#!/bin/sh
# argv[1] is the file. Step N of this run is the N-th line of $STEPS (a shell command on "$1").
dir=$(dirname "$0")
n=$(( $(cat "$dir/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$dir/count"
cp "$1" "$dir/seen-$n.yaml"
step=$(sed -n "${n}p" "$dir/steps")
[ -n "$step" ] || { echo "editor opened more often than the test planned ($n)" >&2; exit 3; }
eval "$step"
"""


class Editor:
    """An EDITOR that runs the given shell steps, one per opening, and keeps what it was shown."""

    def __init__(self, directory: Path, *steps: str) -> None:
        directory.mkdir()
        self.dir = directory
        (directory / "steps").write_text("".join(f"{s}\n" for s in steps))
        script = directory / "editor"
        script.write_text(EDITOR_SCRIPT)
        script.chmod(0o755)
        self.env = {"EDITOR": str(script), "TALOS_EDITOR": ""}

    def seen(self, n: int) -> str:
        return (self.dir / f"seen-{n}.yaml").read_text()

    @property
    def openings(self) -> int:
        count = self.dir / "count"
        return int(count.read_text()) if count.exists() else 0


def _edit(node: Node, editor: Editor, *args: str) -> proc.Completed:
    """talosctl edit as a user runs it, with its own temp dir (to see what it leaves there)."""
    tmp = editor.dir / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {"HOME": str(node.home), "TMPDIR": str(tmp), **editor.env}
    argv = [sys.executable, "-m", "ichor", *node.base, "edit", *args]
    return proc.run(argv, env=env, cwd=node.home, check=False, timeout=60)


def _config(node: Node) -> str:
    done = node.talosctl("read", "/system/state/config.yaml")
    assert done.exit_code == 0, done.stderr
    return done.stdout


def test_edit_applies_the_saved_change_without_a_reboot(node: Node, tmp_path: Path) -> None:
    assert "debug: false" in _config(node)
    editor = Editor(tmp_path / "ed", "sed -i 's/^debug: false/debug: true/' \"$1\"")
    done = _edit(node, editor, "mc", "--immediate")
    assert done.exit_code == 0, done.stderr
    assert "Applied configuration without a reboot" in done.stdout
    shown = editor.seen(1)
    assert shown.startswith(
        f"# Editing MachineConfigs.config.talos.dev/v1alpha1 at node {node.process.address}\n"
    )
    assert "machine:" in shown and "token:" in shown
    assert "debug: true" in _config(node)
    # The file with the cluster's keys does not outlive the command.
    assert list((editor.dir / "tmp").iterdir()) == []

    # Back again, with --mode spelled as Talos 1.7 spells it.
    editor = Editor(tmp_path / "ed2", "sed -i 's/^debug: true/debug: false/' \"$1\"")
    done = _edit(node, editor, "machineconfig", "v1alpha1", "--mode=no-reboot")
    assert done.exit_code == 0, done.stderr
    assert "debug: false" in _config(node)


def test_edit_skips_an_empty_or_unchanged_file(node: Node, tmp_path: Path) -> None:
    before = _config(node)
    empty = _edit(node, Editor(tmp_path / "empty", ': > "$1"'), "mc")
    assert empty.exit_code == 0 and empty.stdout.strip() == "Apply was skipped: empty file."
    # Only comments left counts as empty too.
    comments = _edit(node, Editor(tmp_path / "comments", 'echo "# nothing" > "$1"'), "mc")
    assert comments.stdout.strip() == "Apply was skipped: empty file."
    same = _edit(node, Editor(tmp_path / "same", "true"), "mc")
    assert same.exit_code == 0 and same.stdout.strip() == "Apply was skipped: no changes detected."
    assert _config(node) == before


def test_a_rejected_edit_reopens_with_the_error_and_is_kept(node: Node, tmp_path: Path) -> None:
    before = _config(node)
    editor = Editor(
        tmp_path / "ed",
        "sed -i 's/^version: v1alpha1/version: v1alpha2/' \"$1\"",  # the node refuses this
        "true",  # saved as it was: the user gives up
    )
    done = _edit(node, editor, "mc", "--mode", "no-reboot")
    assert done.exit_code == 1
    second = editor.seen(2)
    lines = second.splitlines()
    assert lines[0].startswith("# Editing MachineConfigs.config.talos.dev/v1alpha1 at node ")
    assert lines[1] == "# "
    assert lines[2].startswith(f"# {node.process.address}: rpc error: code = InvalidArgument desc = ")
    # The user's edit is what the editor shows again, not the node's config.
    assert "version: v1alpha2" in strip_editing_comment(second)
    assert "rpc error: code = InvalidArgument" in done.stderr
    kept = done.stderr.split("your edit is kept in ")[1].split(";")[0]
    assert "version: v1alpha2" in Path(kept).read_text()
    assert oct(Path(kept).stat().st_mode & 0o777) == "0o600"
    Path(kept).unlink()
    assert _config(node) == before

    # Fixing it in the reopened editor applies it.
    editor = Editor(
        tmp_path / "fix",
        "sed -i 's/^version: v1alpha1/version: v1alpha2/' \"$1\"",
        "sed -i 's/^version: v1alpha2/version: v1alpha1/; s/^debug: false/debug: true/' \"$1\"",
    )
    fixed = _edit(node, editor, "mc", "--mode", "no-reboot")
    assert fixed.exit_code == 0, fixed.stderr
    assert editor.openings == 2
    assert "debug: true" in _config(node)
    restore = _edit(node, Editor(tmp_path / "restore", "sed -i 's/^debug: true/debug: false/' \"$1\""), "mc")
    assert restore.exit_code == 0, restore.stderr


def test_dry_run_changes_nothing(node: Node, tmp_path: Path) -> None:
    before = _config(node)
    done = _edit(
        node, Editor(tmp_path / "ed", "sed -i 's/^debug: false/debug: true/' \"$1\""), "mc", "--dry-run"
    )
    assert done.exit_code == 0, done.stderr
    assert done.stdout.startswith("Dry run summary:")
    assert "+debug: true" in done.stdout
    assert _config(node) == before


def test_wrong_input_is_refused_before_the_editor_opens(node: Node, tmp_path: Path) -> None:
    editor = Editor(tmp_path / "ed", "true")
    other = _edit(node, editor, "machinetype")
    assert other.exit_code == 1
    assert "only the machineconfig resource can be edited" in other.stderr
    unknown = _edit(node, editor, "nonsense")
    assert unknown.exit_code == 1 and 'resource type "nonsense" is not registered' in unknown.stderr
    missing = _edit(node, editor, "mc", "nope")
    assert missing.exit_code == 1
    assert (
        "only the machine config MachineConfigs.config.talos.dev(config/v1alpha1) can be edited"
        in missing.stderr
    )
    both = _edit(node, editor, "mc", "--immediate", "--mode", "staged")
    assert both.exit_code == 2 and "--immediate is the old spelling of --mode" in both.stderr
    mode = _edit(node, editor, "mc", "--mode", "sometimes")
    assert mode.exit_code == 2 and "'sometimes' is not one of" in mode.stderr
    timeout = _edit(node, editor, "mc", "--mode", "try", "--timeout", "soon")
    assert timeout.exit_code == 2 and "--timeout" in timeout.stderr
    assert editor.openings == 0


def test_an_editor_that_fails_applies_nothing(node: Node, tmp_path: Path) -> None:
    failing = Editor(tmp_path / "ed", "exit 4")
    done = _edit(node, failing, "mc")
    assert done.exit_code == 1
    assert "exited with status 4; nothing was applied" in done.stderr
    assert Path(done.stderr.split("the file is kept: ")[1].split()[0]).parent == failing.dir / "tmp"
    absent_editor = Editor(tmp_path / "absent")
    absent_editor.env["EDITOR"] = "/nonexistent/editor"
    absent = _edit(node, absent_editor, "mc")
    assert absent.exit_code == 1
    assert "cannot start" in absent.stderr and "TALOS_EDITOR or EDITOR" in absent.stderr


def test_only_the_active_config_is_offered() -> None:
    from types import SimpleNamespace

    import click

    def resource(rid: str) -> SimpleNamespace:
        return SimpleNamespace(metadata=SimpleNamespace(id=rid))

    both = [resource("maintenance"), resource("v1alpha1")]
    assert [r.metadata.id for r in editable(both, None, "n", "config")] == ["v1alpha1"]
    assert [r.metadata.id for r in editable(both, "v1alpha1", "n", "config")] == ["v1alpha1"]
    with pytest.raises(click.ClickException, match="not 'maintenance'"):
        editable(both, "maintenance", "n", "config")
    with pytest.raises(click.ClickException, match="has no machine config yet"):
        editable([resource("maintenance")], None, "n", "config")


def test_editor_variable_rules() -> None:
    assert editor_command("/f", {}) == ["vi", "/f"]
    assert editor_command("/f", {"EDITOR": "nano"}) == ["nano", "/f"]
    assert editor_command("/f", {"TALOS_EDITOR": "code --wait", "EDITOR": "nano"}) == ["code", "--wait", "/f"]
    assert editor_command("/f", {"TALOS_EDITOR": " ", "EDITOR": "nano"}) == ["nano", "/f"]
    quoted = editor_command("/f", {"EDITOR": "sed -i 's/a/b/'"})
    assert quoted[:2] == ["sh", "-c"] and quoted[-1] == "/f"
    assert strip_editing_comment("# Editing x\n# \n# err\nversion: v1alpha1\n# kept\n") == (
        "version: v1alpha1\n# kept\n"
    )
