"""The admin kubeconfig generator, its tar.gz carrier and talosctl's merge rules (ichor.machinery.kubeconfig)."""

from __future__ import annotations

import base64
import io
import tarfile
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from ichor.machinery.config import load_config
from ichor.machinery.errors import ConfigError
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.kubeconfig import (
    KubeconfigError,
    admin_kubeconfig,
    extract_kubeconfig,
    kubeconfig_archive,
    merge_kubeconfig,
)
from ichor.machinery.secrets import SecretsBundle

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@cache
def _controlplane_text(name: str = "demo", endpoint: str = "https://10.5.0.2:6443") -> str:
    bundle = SecretsBundle.generate()
    out = generate(
        bundle, GenOptions(cluster_name=name, endpoint=endpoint), output_types=[OutputType.CONTROLPLANE]
    )
    return out.outputs[OutputType.CONTROLPLANE]


def _plain(text: str) -> Any:
    return YAML(typ="safe").load(text)


def _patched(text: str, edit: Any) -> Any:
    container = load_config(text)
    doc = container.v1alpha1
    assert doc is not None
    edit(doc.raw)
    doc.refresh()
    return container


def test_admin_kubeconfig_layout_and_certificate() -> None:
    container = load_config(_controlplane_text())
    text = admin_kubeconfig(container, now=NOW)
    kc = _plain(text)
    assert kc["apiVersion"] == "v1" and kc["kind"] == "Config"
    assert kc["clusters"][0]["name"] == "demo"
    assert kc["clusters"][0]["cluster"]["server"] == "https://10.5.0.2:6443"
    assert kc["users"][0]["name"] == "admin@demo"
    assert kc["contexts"][0] == {
        "name": "admin@demo",
        "context": {"cluster": "demo", "namespace": "default", "user": "admin@demo"},
    }
    assert kc["current-context"] == "admin@demo"

    cluster = container.v1alpha1.model.cluster  # type: ignore[union-attr]
    ca_pem = base64.b64decode(cluster.ca.crt)
    assert base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]) == ca_pem
    crt = x509.load_pem_x509_certificate(base64.b64decode(kc["users"][0]["user"]["client-certificate-data"]))
    ca = x509.load_pem_x509_certificate(ca_pem)
    assert crt.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert crt.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    assert crt.issuer == ca.subject
    crt.verify_directly_issued_by(ca)
    assert crt.not_valid_before_utc == NOW
    assert crt.not_valid_after_utc - crt.not_valid_before_utc == timedelta(days=365)
    usages = crt.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert b"PRIVATE KEY" in base64.b64decode(kc["users"][0]["user"]["client-key-data"])


def test_cert_lifetime_and_accepted_cas_come_from_the_config() -> None:
    other = SecretsBundle.generate()

    def edit(raw: Any) -> None:
        raw["cluster"]["adminKubeconfig"] = {"certLifetime": "2h30m"}
        raw["cluster"]["acceptedCAs"] = [{"crt": other.k8s.crt_b64()}]

    text = admin_kubeconfig(_patched(_controlplane_text(), edit), now=NOW)
    kc = _plain(text)
    crt = x509.load_pem_x509_certificate(base64.b64decode(kc["users"][0]["user"]["client-certificate-data"]))
    assert crt.not_valid_after_utc - NOW == timedelta(hours=2, minutes=30)
    trusted = base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"])
    assert trusted.count(b"BEGIN CERTIFICATE") == 2 and other.k8s.crt.strip() in trusted


@pytest.mark.parametrize(
    ("edit", "message", "hint_key"),
    [
        (lambda raw: raw["cluster"]["ca"].pop("key"), "cluster.ca.key is not set", "cluster.ca.key"),
        (lambda raw: raw["cluster"]["controlPlane"].pop("endpoint"), "endpoint is required", "controlPlane"),
        (lambda raw: raw["cluster"].pop("clusterName"), "cluster.clusterName is not set", "clusterName"),
        (
            lambda raw: raw["cluster"].__setitem__("adminKubeconfig", {"certLifetime": "0s"}),
            "certLifetime must be positive",
            "8760h",
        ),
        (  # the schema's pattern lets "1s0" through; Go's parser does not
            lambda raw: raw["cluster"].__setitem__("adminKubeconfig", {"certLifetime": "1s0"}),
            "cluster.adminKubeconfig.certLifetime: invalid duration '1s0'",
            "8760h",
        ),
    ],
)
def test_bad_configs_name_the_key(edit: Any, message: str, hint_key: str) -> None:
    with pytest.raises(ConfigError) as err:
        admin_kubeconfig(_patched(_controlplane_text(), edit), now=NOW)
    assert message in str(err.value)
    assert err.value.hint is not None and hint_key in err.value.hint


def test_a_worker_config_cannot_make_an_admin_kubeconfig() -> None:
    bundle = SecretsBundle.generate()
    out = generate(
        bundle,
        GenOptions(cluster_name="demo", endpoint="https://10.5.0.2:6443"),
        output_types=[OutputType.WORKER],
    )
    with pytest.raises(ConfigError) as err:
        admin_kubeconfig(load_config(out.outputs[OutputType.WORKER]), now=NOW)
    assert "cluster.ca.key" in str(err.value)


# --------------------------------------------------------------------------- archive


def test_archive_round_trip_and_format() -> None:
    archive = kubeconfig_archive("apiVersion: v1\n", now=NOW)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        (member,) = tar.getmembers()
    assert member.name == "kubeconfig" and member.isreg() and member.mode == 0o600
    assert extract_kubeconfig(archive) == b"apiVersion: v1\n"


def test_archive_without_kubeconfig_or_damaged() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("other")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(KubeconfigError, match='"kubeconfig" not found'):
        extract_kubeconfig(out.getvalue())
    with pytest.raises(KubeconfigError, match="error reading the kubeconfig archive"):
        extract_kubeconfig(b"not a tarball")
    with pytest.raises(KubeconfigError, match="error reading the kubeconfig archive"):
        extract_kubeconfig(kubeconfig_archive("x" * 1000)[:40])


# --------------------------------------------------------------------------- merge


def _kc(cluster: str, server: str, *, ca: str = "Q0E=", crt: str = "Q1JU", context: str | None = None) -> str:
    user = f"admin@{cluster}"
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n"
        f"users:\n- name: {user}\n  user:\n    client-certificate-data: {crt}\n    client-key-data: S0VZ\n"
        f"contexts:\n- context:\n    cluster: {cluster}\n    namespace: default\n    user: {user}\n"
        f"  name: {context or user}\ncurrent-context: {context or user}\n"
    )


def _names(text: str, section: str) -> list[str]:
    return [e["name"] for e in _plain(text)[section]]


def test_merge_into_an_empty_file_is_the_new_config() -> None:
    result = merge_kubeconfig("", _kc("demo", "https://a:6443"))
    assert _plain(result.text) == _plain(_kc("demo", "https://a:6443"))
    assert result.renamed == [] and result.context == "admin@demo"


def test_merge_keeps_other_entries_comments_and_activates_the_new_context() -> None:
    existing = "# my clusters\n" + _kc("prod", "https://prod:6443")
    result = merge_kubeconfig(existing, _kc("demo", "https://a:6443"))
    assert result.text.startswith("# my clusters\n")
    assert _names(result.text, "clusters") == ["prod", "demo"]
    assert _names(result.text, "contexts") == ["admin@prod", "admin@demo"]
    assert _plain(result.text)["current-context"] == "admin@demo"
    assert result.renamed == []


def test_merge_renames_on_conflict_like_talosctl() -> None:
    existing = _kc("demo", "https://old:6443")
    result = merge_kubeconfig(existing, _kc("demo", "https://new:6443", crt="TkVX"))
    assert result.renamed == [
        'renamed cluster "demo" -> "demo-1"',
        'renamed auth info "admin@demo" -> "admin@demo-1"',
        'renamed context "admin@demo" -> "admin@demo-1"',
    ]
    kc = _plain(result.text)
    assert _names(result.text, "clusters") == ["demo", "demo-1"]
    assert kc["clusters"][0]["cluster"]["server"] == "https://old:6443"
    assert kc["clusters"][1]["cluster"]["server"] == "https://new:6443"
    ctx = kc["contexts"][1]
    assert ctx["name"] == "admin@demo-1"
    assert ctx["context"] == {"cluster": "demo-1", "namespace": "default", "user": "admin@demo-1"}
    assert kc["current-context"] == "admin@demo-1"

    # A third, different one goes to -2.
    again = merge_kubeconfig(result.text, _kc("demo", "https://third:6443", crt="VEhJUkQ="))
    assert 'renamed cluster "demo" -> "demo-2"' in again.renamed
    assert _plain(again.text)["current-context"] == "admin@demo-2"


def test_merge_of_the_same_config_changes_nothing_but_the_current_context() -> None:
    kc = _kc("demo", "https://a:6443")
    first = merge_kubeconfig(_kc("prod", "https://p:6443"), kc)
    second = merge_kubeconfig(first.text, kc)
    assert second.renamed == []
    assert _plain(second.text) == _plain(first.text)


def test_merge_force_overwrites_in_place() -> None:
    existing = _kc("prod", "https://prod:6443").replace("current-context: admin@prod\n", "") + ""
    existing = merge_kubeconfig(existing, _kc("demo", "https://old:6443")).text
    result = merge_kubeconfig(existing, _kc("demo", "https://new:6443", crt="TkVX"), force=True)
    assert result.renamed == []
    kc = _plain(result.text)
    assert _names(result.text, "clusters") == ["prod", "demo"]
    assert kc["clusters"][1]["cluster"]["server"] == "https://new:6443"
    assert kc["users"][1]["user"]["client-certificate-data"] == "TkVX"


def test_merge_force_context_name() -> None:
    result = merge_kubeconfig(
        _kc("prod", "https://prod:6443"), _kc("demo", "https://a:6443"), force_context_name="main"
    )
    kc = _plain(result.text)
    assert kc["current-context"] == "main"
    assert kc["contexts"][-1] == {
        "name": "main",
        "context": {"cluster": "demo", "namespace": "default", "user": "admin@demo"},
    }
    assert result.renamed == ['renamed context "admin@demo" -> "main"']
    # The forced name taken by another context: renamed main-1 unless --force.
    again = merge_kubeconfig(result.text, _kc("other", "https://o:6443"), force_context_name="main")
    assert _plain(again.text)["current-context"] == "main-1"
    forced = merge_kubeconfig(
        result.text, _kc("other", "https://o:6443"), force_context_name="main", force=True
    )
    assert _plain(forced.text)["current-context"] == "main"
    assert _names(forced.text, "contexts") == ["admin@prod", "main"]


@pytest.mark.parametrize(
    ("existing", "problem"),
    [
        ("clusters: [\n", "invalid YAML"),
        ("- just\n- a list\n", "expected one YAML mapping"),
        ("clusters: 3\n", "clusters must be a list"),
        ("users:\n- user: {}\n", "users must be a list of entries with a name"),
        ("a: 1\n---\nb: 2\n", "expected one YAML mapping"),
    ],
)
def test_merge_refuses_a_damaged_kubeconfig(existing: str, problem: str) -> None:
    with pytest.raises(KubeconfigError) as err:
        merge_kubeconfig(existing, _kc("demo", "https://a:6443"), source="/home/u/.kube/config")
    assert "/home/u/.kube/config" in str(err.value) and problem in str(err.value)
    assert err.value.hint is not None and "talosctl kubeconfig <path>" in err.value.hint


_name = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@pytest.mark.slow  # 100 examples of up to five ruamel.yaml merges: ~15-35 s
@given(
    existing=st.lists(st.tuples(_name, st.sampled_from(["a", "b"])), max_size=4),
    new=_name,
    server=st.sampled_from(["a", "b"]),
)
def test_merge_properties(existing: list[tuple[str, str]], new: str, server: str) -> None:
    text = ""
    for cluster, srv in existing:
        text = merge_kubeconfig(text, _kc(cluster, f"https://{srv}:6443")).text
    before = _plain(text) if text else {"clusters": [], "users": [], "contexts": []}
    result = merge_kubeconfig(text, _kc(new, f"https://{server}:6443"))
    kc = _plain(result.text)
    # Nothing that was there is lost or changed; names stay unique; the current context resolves.
    for section in ("clusters", "users", "contexts"):
        names = [e["name"] for e in kc[section]]
        assert len(names) == len(set(names))
        for entry in before[section]:
            assert entry in kc[section]
    ctx = next(c for c in kc["contexts"] if c["name"] == kc["current-context"])
    cluster = next(c for c in kc["clusters"] if c["name"] == ctx["context"]["cluster"])
    assert cluster["cluster"]["server"] == f"https://{server}:6443"
    assert any(u["name"] == ctx["context"]["user"] for u in kc["users"])
