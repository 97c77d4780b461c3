"""``talosctl validate``: Talos's success line, warnings, all errors at once, one clear error per bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

STABILITY = Path(__file__).parent / "data" / "config" / "stability-v1.7"


def released(name: str, tmp_path: Path, *, replace: tuple[str, str] | None = None) -> Path:
    text = (STABILITY / f"{name}.yaml").read_text()
    text = text.replace("        localDNS: true\n", "        hostDNS:\n            enabled: true\n")
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_valid_config(talosctl, tmp_path: Path) -> None:
    released("overrides-controlplane", tmp_path)
    r = talosctl("validate", "--config", "overrides-controlplane.yaml", "--mode", "metal", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "overrides-controlplane.yaml is valid for metal mode\n"
    assert r.stderr == ""


def test_short_flags(talosctl, tmp_path: Path) -> None:
    path = released("base-worker", tmp_path)
    r = talosctl("validate", "-c", str(path), "-m", "cloud")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{path} is valid for cloud mode\n"


def test_invalid_config_lists_every_error(talosctl, tmp_path: Path) -> None:
    path = released("base-controlplane", tmp_path, replace=("persist: true", "persist: false"))
    r = talosctl("validate", "--config", str(path), "--mode", "metal")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert f"error: {path}: 2 errors occurred:" in r.stderr
    assert "\t* machine.install: either install disk or diskSelector should be defined" in r.stderr
    assert "\t* persist: .persist should be enabled" in r.stderr
    assert "hint:" in r.stderr


def test_warnings_are_printed_and_strict_makes_them_errors(talosctl, tmp_path: Path) -> None:
    path = released("base-worker", tmp_path, replace=("type: worker", "type: join"))
    r = talosctl("validate", "--config", str(path), "--mode", "cloud")
    assert r.exit_code == 0
    assert 'WARNING: machine.type: use "worker" instead of "join" for machine type' in r.stderr
    assert r.stdout == f"{path} is valid for cloud mode\n"
    r = talosctl("validate", "--config", str(path), "--mode", "cloud", "--strict")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert '\t* warning: machine.type: use "worker" instead of "join" for machine type' in r.stderr


def test_container_mode_rules(talosctl, tmp_path: Path) -> None:
    path = released("base-worker", tmp_path)
    r = talosctl("validate", "--config", str(path), "--mode", "container")
    assert r.exit_code == 1
    assert "forwardKubeDNSToHost" in r.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ("machine: [\n", "invalid YAML"),
        ("version: v1alpha1\nmachine:\n    kubelet:\n        imagee: x\n", "machine.kubelet.imagee (line 4)"),
        (
            "version: v1alpha1\nmachine:\n    install:\n        wipe: maybe\n",
            "machine.install.wipe (line 4): expected a boolean",
        ),
        ("", "config not found"),
        ("apiVersion: v1alpha1\nkind: Nope\n", '"Nope" "v1alpha1": not registered'),
    ],
    ids=["missing", "bad-yaml", "unknown-key", "wrong-type", "empty", "unknown-kind"],
)
def test_unusable_file_is_one_clear_error(
    talosctl, tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "cfg.yaml"
    if content is not None:
        path.write_text(content)
    r = talosctl("validate", "--config", str(path), "--mode", "metal")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.startswith("error: ")
    assert "cfg.yaml" in r.stderr
    assert expected in r.stderr
    assert "hint: " in r.stderr
    assert "Traceback" not in r.stderr


def test_mode_is_required_and_closed(talosctl, tmp_path: Path) -> None:
    path = released("base-worker", tmp_path)
    r = talosctl("validate", "--config", str(path))
    assert r.exit_code == 2
    assert "--mode" in r.stderr
    r = talosctl("validate", "--config", str(path), "--mode", "vm")
    assert r.exit_code == 2
    assert "'vm' is not one of 'metal', 'cloud', 'container'" in r.stderr


def test_config_is_required(talosctl) -> None:
    r = talosctl("validate", "--mode", "metal")
    assert r.exit_code == 2
    assert "--config" in r.stderr


def test_validate_does_not_touch_the_file(talosctl, tmp_path: Path) -> None:
    path = released("overrides-worker", tmp_path)
    before = path.read_bytes()
    talosctl("validate", "--config", str(path), "--mode", "metal")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["overrides-worker.yaml"]
