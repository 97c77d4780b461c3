"""``talosctl gen config`` as a user runs it: files, flags, patches and every wrong input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ichor.machinery.yamlio import load_documents, to_plain

DATA = Path(__file__).parent / "data" / "talos"
ENDPOINT = "https://192.168.64.15:6443"


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = to_plain(load_documents(path.read_text())[0])
    return doc


def test_generates_three_files_private_and_says_how_to_set_endpoints(talosctl, tmp_path: Path) -> None:
    result = talosctl("gen", "config", "my-cluster", ENDPOINT, cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    for name in ("controlplane.yaml", "worker.yaml", "talosconfig"):
        assert (tmp_path / name).is_file()
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o600
        assert f"Created {name}" in result.stderr
    assert "generating PKI and tokens" in result.stderr
    assert "talosctl --talosconfig talosconfig config endpoint" in result.stderr
    cp = _doc(tmp_path / "controlplane.yaml")
    assert cp["cluster"]["clusterName"] == "my-cluster"
    assert cp["cluster"]["controlPlane"]["endpoint"] == ENDPOINT
    tc = _doc(tmp_path / "talosconfig")
    assert tc["context"] == "my-cluster"
    assert tc["contexts"]["my-cluster"]["endpoints"] == []


def test_with_secrets_reuses_the_bundle(talosctl, tmp_path: Path) -> None:
    result = talosctl(
        "gen", "config", "--with-secrets", str(DATA / "secrets.yaml"), "c", ENDPOINT, cwd=tmp_path
    )
    assert result.exit_code == 0, result.stderr
    assert "generating PKI" not in result.stderr
    cp = _doc(tmp_path / "controlplane.yaml")
    assert cp["cluster"]["id"] == "0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w="
    assert cp["machine"]["token"] == "d8cwfa.eyvpi0xwxyarbfid"


def test_seed_example_worker_patch_to_a_single_file(talosctl, tmp_path: Path) -> None:
    # Production Clusters guide: --config-patch-worker @worker1.patch --output-types worker -o worker1.yaml
    (tmp_path / "worker1.patch").write_text("machine:\n  network:\n    hostname: worker1\n")
    result = talosctl(
        "gen", "config", "--with-secrets", str(DATA / "secrets.yaml"),
        "--config-patch-worker", "@worker1.patch", "--output-types", "worker", "-o", "worker1.yaml",
        "my-cluster", ENDPOINT, cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker1.patch", "worker1.yaml"]
    assert _doc(tmp_path / "worker1.yaml")["machine"]["network"]["hostname"] == "worker1"


def test_patches_apply_to_the_right_types(talosctl, tmp_path: Path) -> None:
    result = talosctl(
        "gen", "config", "c", ENDPOINT,
        "--config-patch", '[{"op": "add", "path": "/machine/network/hostname", "value": "all"}]',
        "--config-patch-control-plane", "cluster:\n  allowSchedulingOnControlPlanes: true\n",
        "--config-patch-worker", "machine:\n  nodeLabels:\n    role: worker\n",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    cp, worker = _doc(tmp_path / "controlplane.yaml"), _doc(tmp_path / "worker.yaml")
    assert cp["machine"]["network"]["hostname"] == worker["machine"]["network"]["hostname"] == "all"
    assert cp["cluster"]["allowSchedulingOnControlPlanes"] is True
    assert "allowSchedulingOnControlPlanes" not in worker["cluster"]
    assert worker["machine"]["nodeLabels"] == {"role": "worker"}
    assert "nodeLabels" not in cp["machine"]


def test_stdout_output_for_one_type(talosctl, tmp_path: Path) -> None:
    result = talosctl(
        "gen", "config", "c", ENDPOINT, "-t", "controlplane", "-o", "-", "--with-docs=false", cwd=tmp_path
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("version: v1alpha1\ndebug: false\npersist: true\nmachine:\n")
    assert list(tmp_path.iterdir()) == []


def test_output_directory_is_created(talosctl, tmp_path: Path) -> None:
    result = talosctl("gen", "config", "c", ENDPOINT, "-o", "out/cfg", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "cfg").iterdir()) == [
        "controlplane.yaml", "talosconfig", "worker.yaml",
    ]  # fmt: skip


def test_cobra_style_boolean_flags(talosctl, tmp_path: Path) -> None:
    result = talosctl(
        "gen", "config", "c", ENDPOINT, "--with-docs=false", "--with-examples=false",
        "--with-cluster-discovery=false", "--with-kubespan", cwd=tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "controlplane.yaml").read_text()
    assert "#" not in text
    cp = _doc(tmp_path / "controlplane.yaml")
    assert cp["cluster"]["discovery"]["enabled"] is False
    assert cp["machine"]["network"]["kubespan"] == {"enabled": True}


def test_endpoints_flag_fills_talosconfig(talosctl, tmp_path: Path) -> None:
    result = talosctl(
        "gen", "config", "c", ENDPOINT, "-e", "10.0.0.2,10.0.0.3", "-t", "talosconfig", cwd=tmp_path
    )
    assert result.exit_code == 0, result.stderr
    assert _doc(tmp_path / "talosconfig")["contexts"]["c"]["endpoints"] == ["10.0.0.2", "10.0.0.3"]
    assert "config endpoint" not in result.stderr


def _assert_nothing_written(tmp_path: Path, keep: set[str] | None = None) -> None:
    assert {p.name for p in tmp_path.iterdir()} == (keep or set())


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (["c", "192.168.0.2:6443"], "is not a URL", "https://"),
        (["c", "http://192.168.0.2:6443"], "must use the https:// scheme", "https://"),
        (["c", ENDPOINT, "-t", "controlplane,bogus"], "unknown output type 'bogus'", None),
        (["c", ENDPOINT, "--registry-mirror", "docker.io"], "invalid registry mirror spec", None),
        (["c", ENDPOINT, "--talos-version", "latest"], "error parsing version", "--talos-version"),
        (["c", ENDPOINT, "--with-secrets", "missing.yaml"], "missing.yaml", None),
        (["c", ENDPOINT, "--config-patch", "@missing.patch"], "missing.patch", None),
        (["c", ENDPOINT, "--config-patch", "machine: [unclosed"], "", None),
        (["c", ENDPOINT, "--config-patch", "machine:\n  kubelet:\n    imagee: x\n"], "imagee", None),
        (["c", ENDPOINT, "-o", "-"], "single output type", None),
        (["c", ENDPOINT, "--with-docs=maybe"], 'invalid argument "maybe"', None),
        (["c", ENDPOINT, "--version", "v1alpha2"], "unknown config version", None),
    ],
)
def test_wrong_input_gives_one_clear_error_and_writes_nothing(
    talosctl, tmp_path: Path, args: list[str], message: str, hint: str | None
) -> None:
    result = talosctl("gen", "config", *args, cwd=tmp_path)
    assert result.exit_code != 0
    assert result.stderr.count("error") + result.stderr.count("Error") >= 1
    assert message in result.stderr
    if hint:
        assert hint in result.stderr
    assert result.stdout == ""
    _assert_nothing_written(tmp_path)


def test_existing_file_without_force_writes_nothing(talosctl, tmp_path: Path) -> None:
    (tmp_path / "worker.yaml").write_text("mine\n")
    result = talosctl("gen", "config", "c", ENDPOINT, cwd=tmp_path)
    assert result.exit_code == 1
    assert "worker.yaml" in result.stderr and "already exists" in result.stderr
    assert "--force" in result.stderr
    _assert_nothing_written(tmp_path, {"worker.yaml"})
    assert (tmp_path / "worker.yaml").read_text() == "mine\n"

    forced = talosctl("gen", "config", "c", ENDPOINT, "--force", cwd=tmp_path)
    assert forced.exit_code == 0, forced.stderr
    assert _doc(tmp_path / "worker.yaml")["machine"]["type"] == "worker"


def test_image_default_lists_versioned_images(talosctl) -> None:
    result = talosctl("image", "default")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "registry.k8s.io/kube-apiserver:v1.30.3" in lines
    assert "ghcr.io/siderolabs/installer:v1.7.6" in lines
    assert "gcr.io/etcd-development/etcd:v3.5.13" in lines
    other = talosctl("images", "default", "--kubernetes-version", "1.29.2")
    assert "ghcr.io/siderolabs/kubelet:v1.29.2" in other.stdout.splitlines()


@pytest.mark.parametrize("version", ["1.99.0", "banana", "1.24.0"])
def test_a_kubernetes_version_talos_17_does_not_run_is_refused_naming_the_flag(
    talosctl, tmp_path: Path, version: str
) -> None:
    result = talosctl("gen", "config", "c", ENDPOINT, "--kubernetes-version", version, cwd=tmp_path)
    assert result.exit_code != 0
    assert "--kubernetes-version" in result.stderr and version in result.stderr, result.stderr
    assert not (tmp_path / "controlplane.yaml").exists()
