"""``talosctl machineconfig patch`` (alias ``mc``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

CONFIG = """\
version: v1alpha1 # keep me
machine:
    type: worker
    network:
        hostname: n1
cluster:
    clusterName: c1
---
apiVersion: v1alpha1
kind: NetworkRuleConfig
name: ingress-http
portSelector:
    ports:
        - 80
    protocol: tcp
ingress:
    - subnet: 10.0.0.0/8
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "worker.yaml").write_text(CONFIG)
    (tmp_path / "hostname.yaml").write_text("machine:\n  network:\n    hostname: n2\n")
    return tmp_path


def test_patch_prints_to_stdout_like_talos(talosctl, workdir: Path) -> None:
    r = talosctl("machineconfig", "patch", "worker.yaml", "--patch", "@hostname.yaml", cwd=workdir)
    assert r.exit_code == 0, r.stderr
    expected = CONFIG.replace("hostname: n1", "hostname: n2")
    assert r.stdout == expected + "\n"  # Talos prints the config and one more newline
    assert r.stderr == ""
    assert (workdir / "worker.yaml").read_text() == CONFIG


def test_alias_mc_and_several_patches_in_order(talosctl, workdir: Path) -> None:
    r = talosctl(
        "mc",
        "patch",
        "worker.yaml",
        "-p",
        "@hostname.yaml",
        "-p",
        '[{"op": "replace", "path": "/machine/network/hostname", "value": "n3", "document": "v1alpha1"}]',
        "-p",
        "apiVersion: v1alpha1\nkind: NetworkRuleConfig\nname: ingress-http\n$patch: delete\n",
        cwd=workdir,
    )
    assert r.exit_code == 0, r.stderr
    assert "hostname: n3" in r.stdout
    assert "NetworkRuleConfig" not in r.stdout
    assert "version: v1alpha1 # keep me" in r.stdout


def test_output_file_is_written_0600(talosctl, workdir: Path) -> None:
    out = workdir / "out" / "worker1.yaml"
    r = talosctl("mc", "patch", "worker.yaml", "-p", "@hostname.yaml", "-o", str(out), cwd=workdir)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert out.read_text() == CONFIG.replace("hostname: n1", "hostname: n2")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # like Talos, -o replaces an existing file
    r = talosctl("mc", "patch", "worker.yaml", "-o", str(out), cwd=workdir)
    assert r.exit_code == 0, r.stderr
    assert out.read_text() == CONFIG


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["missing.yaml", "-p", "@hostname.yaml"],
            "machine config file 'missing.yaml' does not exist",
            "path",
        ),
        (
            ["broken.yaml", "-p", "@hostname.yaml"],
            "broken.yaml: invalid YAML at line",
            "fix the machine config file",
        ),
        (["empty.yaml", "-p", "@hostname.yaml"], "has no documents", "machine config file"),
        (
            ["scalar.yaml", "-p", "@hostname.yaml"],
            "document 1 is not a config document",
            "talosctl gen config",
        ),
        (
            ["worker.yaml", "-p", "@nope.yaml"],
            "patch file 'nope.yaml' given to --patch does not exist",
            "--patch",
        ),
        (["worker.yaml", "-p", "machine: [oops\n"], "invalid YAML", "--patch"),
        (
            ["worker.yaml", "-p", '[{"op": "add", "path": "/machine/x", "value": 1}]'],
            "JSON6902 patches are not supported for multi-document machine configuration",
            "document: v1alpha1",
        ),
        (
            ["worker.yaml", "-p", '[{"op": "add", "path": "/x", "value": 1, "document": "KmsgLogConfig/a"}]'],
            "a patch for a document that is not there",
            "NetworkRuleConfig/ingress-http",
        ),
        (
            ["worker.yaml", "-p", "machine:\n  network: [1]\n"],
            "machine.network",
            "make 'machine.network' a mapping",
        ),
    ],
)
def test_errors_write_nothing(
    talosctl, workdir: Path, args: list[str], message: str, hint: str | None
) -> None:
    (workdir / "broken.yaml").write_text("machine: {\n")
    (workdir / "empty.yaml").write_text("# nothing\n")
    (workdir / "scalar.yaml").write_text("just text\n")
    out = workdir / "result.yaml"
    r = talosctl("machineconfig", "patch", *args, "-o", str(out), cwd=workdir)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.startswith("error: ")
    assert message in r.stderr
    if hint is not None:
        assert "hint: " in r.stderr and hint in r.stderr.split("hint: ", 1)[1]
    assert not out.exists()
    assert (workdir / "worker.yaml").read_text() == CONFIG


def test_missing_argument_is_a_usage_error(talosctl, workdir: Path) -> None:
    r = talosctl("mc", "patch", cwd=workdir)
    assert r.exit_code == 2
    assert "<machineconfig-file>" in r.stderr
