"""``cluster create`` merges the admin kubeconfig into ``~/.kube/config`` as Talos's does (so the
Quickstart's ``kubectl get nodes -o wide`` works), and destroy leaves it, as Talos's does, saying how
to remove it; tested at the function that merges and at create's end, with no node started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision import _cluster
from ichor.provision._kubeconfig import merge_into, removal_hint
from ichor.provision._record import ClusterRecord, NodeRecord


def _kubeconfig(cluster: str, server: str) -> bytes:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    certificate-authority-data: Q0E=\n"
        f"users:\n- name: admin@{cluster}\n  user:\n    client-certificate-data: Q1JU\n    client-key-data: S0VZ\n"
        f"contexts:\n- name: admin@{cluster}\n  context:\n    cluster: {cluster}\n    namespace: default\n"
        f"    user: admin@{cluster}\ncurrent-context: admin@{cluster}\n"
    ).encode()


def _plain(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = to_plain(load_documents(path.read_text(), source=str(path))[0])
    return doc


def test_a_missing_kubeconfig_is_written_as_the_node_sent_it(tmp_path: Path) -> None:
    path = tmp_path / ".kube" / "config"
    data = _kubeconfig("talos-default", "https://10.5.0.2:6443")
    result = merge_into(path, data)
    assert path.read_bytes() == data and path.stat().st_mode & 0o777 == 0o600
    assert result.context == "admin@talos-default" and result.renamed == []


def test_an_existing_kubeconfig_keeps_its_entries_and_the_cluster_becomes_current(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_bytes(_kubeconfig("other", "https://192.168.1.1:6443"))
    path.chmod(0o640)
    result = merge_into(path, _kubeconfig("talos-default", "https://10.5.0.2:6443"))
    doc = _plain(path)
    assert [c["name"] for c in doc["clusters"]] == ["other", "talos-default"]
    assert doc["current-context"] == result.context == "admin@talos-default"
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_second_cluster_of_the_same_name_is_renamed_as_talos_does(tmp_path: Path) -> None:
    path = tmp_path / "config"
    merge_into(path, _kubeconfig("talos-default", "https://10.5.0.2:6443"))
    result = merge_into(path, _kubeconfig("talos-default", "https://10.6.0.2:6443"))
    doc = _plain(path)
    assert [c["name"] for c in doc["clusters"]] == ["talos-default", "talos-default-1"]
    assert doc["current-context"] == result.context == "admin@talos-default-1"
    assert 'renamed cluster "talos-default" -> "talos-default-1"' in result.renamed
    servers = {c["name"]: c["cluster"]["server"] for c in doc["clusters"]}
    assert servers["talos-default-1"] == "https://10.6.0.2:6443"


def test_destroy_says_what_it_leaves() -> None:
    hint = removal_hint("/root/.kube/config", "admin@talos-default")
    assert "as Talos's cluster destroy does" in hint
    assert "kubectl config delete-context admin@talos-default" in hint


def _record(tmp_path: Path, provisioner: str, kubeconfig: str) -> ClusterRecord:
    record = ClusterRecord(name="c", cidr="10.5.0.0/24", state_dir=str(tmp_path), provisioner=provisioner,
                           kubeconfig=kubeconfig)  # fmt: skip
    record.nodes = [NodeRecord("c-controlplane-1", "controlplane", "10.5.0.2", str(tmp_path / "n"))]
    return record


@pytest.mark.parametrize(
    ("provisioner", "kubeconfig", "merged"),
    [("container", "config", True), ("container", "", False), ("process", "config", False)],
)
def test_create_merges_only_container_clusters_unless_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provisioner: str, kubeconfig: str, merged: bool
) -> None:
    """The last step of create's bring-up, after its waits: the merge (or why there is none)."""
    calls: list[tuple[str, Path]] = []
    lines: list[str] = []
    monkeypatch.setattr(
        _cluster,
        "_merge_kubeconfig",
        lambda record, options, node, path, progress: calls.append((node, path)),
    )
    record = _record(tmp_path, provisioner, str(tmp_path / kubeconfig) if kubeconfig else "")
    _cluster._after_waits(record, None, "10.5.0.2", lines.append)  # type: ignore[arg-type]
    assert calls == ([("10.5.0.2", tmp_path / "config")] if merged else [])
    if provisioner == "process":
        assert any("process nodes run no Kubernetes" in line for line in lines)


def test_a_failed_merge_leaves_the_cluster_up_and_says_how_to_get_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ichor.machinery.errors import MachineryError

    def fail(*_: object) -> None:
        raise MachineryError("error loading existing kubeconfig 'x': bad", hint="fix or move it away")

    lines: list[str] = []
    monkeypatch.setattr(_cluster, "_merge_kubeconfig", fail)
    _cluster._after_waits(
        _record(tmp_path, "container", str(tmp_path / "config")), None, "10.5.0.2", lines.append
    )  # type: ignore[arg-type]
    (line,) = lines
    assert line.startswith("warning: the cluster is up, but its kubeconfig was not merged into ")
    assert "fix or move it away" in line and "talosctl -n 10.5.0.2 kubeconfig" in line
