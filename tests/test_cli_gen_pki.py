"""``talosctl gen ca|key|csr|crt|keypair|secrets`` through the CLI."""

from __future__ import annotations

import base64
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import NameOID

from ichor.machinery import pki
from ichor.machinery.contract import VersionContract
from ichor.machinery.secrets import SecretsBundle


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_gen_ca_writes_crt_key_and_hash(talosctl, tmp_path: Path) -> None:
    r = talosctl("gen", "ca", "--organization", "acme", "--hours", "48", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    crt, key, digest = (tmp_path / f"acme.{ext}" for ext in ("crt", "key", "sha256"))
    for path in (crt, key, digest):
        assert _mode(path) == 0o600
    cert = pki.load_certificate(crt.read_bytes())
    assert cert.subject.rfc4514_string() == "O=acme"
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(hours=48)
    assert isinstance(pki.load_private_key(key.read_bytes()), ed25519.Ed25519PrivateKey)
    assert digest.read_text() == pki.spki_sha256(crt.read_bytes())


def test_gen_ca_rsa(talosctl, tmp_path: Path) -> None:
    assert talosctl("gen", "ca", "--organization", "r", "--rsa", cwd=tmp_path).exit_code == 0
    assert isinstance(pki.load_private_key((tmp_path / "r.key").read_bytes()), rsa.RSAPrivateKey)


def test_gen_ca_refuses_to_overwrite_any_file(talosctl, tmp_path: Path) -> None:
    (tmp_path / "acme.sha256").write_text("keep me")
    r = talosctl("gen", "ca", "--organization", "acme", cwd=tmp_path)
    assert r.exit_code == 1
    assert "error: file 'acme.sha256' already exists" in r.stderr and "--force" in r.stderr
    assert not (tmp_path / "acme.crt").exists() and not (tmp_path / "acme.key").exists()
    assert (tmp_path / "acme.sha256").read_text() == "keep me"
    assert talosctl("gen", "ca", "--organization", "acme", "--force", cwd=tmp_path).exit_code == 0
    assert (tmp_path / "acme.sha256").read_text().startswith("sha256:")


def test_gen_ca_needs_organization_and_positive_hours(talosctl, tmp_path: Path) -> None:
    r = talosctl("gen", "ca", cwd=tmp_path)
    assert r.exit_code == 2 and "--organization" in r.stderr
    r = talosctl("gen", "ca", "--organization", "a", "--hours", "0", cwd=tmp_path)
    assert r.exit_code == 2 and "--hours" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_key_csr_crt_chain(talosctl, tmp_path: Path) -> None:
    assert talosctl("gen", "ca", "--organization", "ca", cwd=tmp_path).exit_code == 0
    assert talosctl("gen", "key", "--name", "admin", cwd=tmp_path).exit_code == 0
    assert (tmp_path / "admin.key").read_bytes().startswith(b"-----BEGIN ED25519 PRIVATE KEY-----")
    r = talosctl("gen", "csr", "--key", "admin.key", "--ip", "10.5.0.2", "--roles", "os:reader", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    csr = pki.load_csr((tmp_path / "admin.csr").read_bytes())
    assert csr.subject.rfc4514_string() == "O=os:reader"
    r = talosctl(
        "gen", "crt", "--name", "admin", "--ca", "ca", "--csr", "admin.csr", "--hours", "5", cwd=tmp_path
    )
    assert r.exit_code == 0, r.stderr
    cert = pki.load_certificate((tmp_path / "admin.crt").read_bytes())
    cert.verify_directly_issued_by(pki.load_certificate((tmp_path / "ca.crt").read_bytes()))
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "os:reader"
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(hours=5)
    assert _mode(tmp_path / "admin.crt") == 0o600
    pki.CertKey((tmp_path / "admin.crt").read_bytes(), (tmp_path / "admin.key").read_bytes()).check_pair()


def test_gen_csr_errors(talosctl, tmp_path: Path) -> None:
    assert talosctl("gen", "key", "--name", "k", cwd=tmp_path).exit_code == 0
    r = talosctl("gen", "csr", "--key", "k.key", "--ip", "not-an-ip", cwd=tmp_path)
    assert r.exit_code == 1 and "error: invalid IP: not-an-ip" in r.stderr and "--ip" in r.stderr
    r = talosctl("gen", "csr", "--key", "k.key", "--ip", "10.0.0.1", "--roles", "os:god", cwd=tmp_path)
    assert r.exit_code == 1 and "unknown roles: os:god" in r.stderr
    r = talosctl("gen", "csr", "--key", "missing.key", "--ip", "10.0.0.1", cwd=tmp_path)
    assert r.exit_code == 1 and "'missing.key' does not exist" in r.stderr and "--key" in r.stderr
    assert not (tmp_path / "k.csr").exists()


def test_gen_crt_errors(talosctl, tmp_path: Path) -> None:
    assert talosctl("gen", "key", "--name", "k", cwd=tmp_path).exit_code == 0
    (tmp_path / "ca.crt").write_text("not a cert")
    (tmp_path / "ca.key").write_text("not a key")
    assert talosctl("gen", "csr", "--key", "k.key", "--ip", "10.0.0.1", cwd=tmp_path).exit_code == 0
    r = talosctl("gen", "crt", "--name", "out", "--ca", "ca", "--csr", "k.csr", cwd=tmp_path)
    assert r.exit_code == 1 and "ca.crt: not PEM data" in r.stderr
    r = talosctl("gen", "crt", "--name", "out", "--ca", "nope", "--csr", "k.csr", cwd=tmp_path)
    assert r.exit_code == 1 and "'nope.crt' does not exist" in r.stderr and "--ca" in r.stderr
    assert not (tmp_path / "out.crt").exists()


def test_gen_keypair(talosctl, tmp_path: Path) -> None:
    r = talosctl("gen", "keypair", "--organization", "peer", "--ip", "10.0.0.9", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    pair = pki.CertKey((tmp_path / "peer.crt").read_bytes(), (tmp_path / "peer.key").read_bytes())
    pair.check_pair()
    cert = pair.certificate()
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(hours=24)
    r = talosctl("gen", "keypair", "--organization", "peer", cwd=tmp_path)
    assert r.exit_code == 1 and "already exists" in r.stderr


# --- gen secrets -------------------------------------------------------------------------------


def test_gen_secrets_default(talosctl, tmp_path: Path) -> None:
    r = talosctl("gen", "secrets", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    path = tmp_path / "secrets.yaml"
    assert _mode(path) == 0o600
    bundle = SecretsBundle.load(path)
    assert isinstance(pki.load_private_key(bundle.k8s_service_account_key), rsa.RSAPrivateKey)
    age = datetime.now(UTC) - bundle.os.certificate().not_valid_before_utc
    assert timedelta(0) <= age < timedelta(minutes=5)


def test_gen_secrets_refuses_existing_file(talosctl, tmp_path: Path) -> None:
    (tmp_path / "secrets.yaml").write_text("precious")
    r = talosctl("gen", "secrets", cwd=tmp_path)
    assert r.exit_code == 1 and "already exists" in r.stderr and "--force" in r.stderr
    assert (tmp_path / "secrets.yaml").read_text() == "precious"
    assert talosctl("gen", "secrets", "-f", cwd=tmp_path).exit_code == 0
    SecretsBundle.load(tmp_path / "secrets.yaml")


def test_gen_secrets_stdout_and_talos_version(talosctl, tmp_path: Path) -> None:
    r = talosctl("gen", "secrets", "-o", "-", "--talos-version", "v1.2", cwd=tmp_path)
    assert r.exit_code == 0
    assert "aescbcencryptionsecret" in r.stdout and "secretboxencryptionsecret" not in r.stdout
    assert SecretsBundle.from_yaml(r.stdout).aescbc_encryption_secret
    assert list(tmp_path.iterdir()) == []
    r = talosctl("gen", "secrets", "--talos-version", "banana", cwd=tmp_path)
    assert r.exit_code == 1 and "banana" in r.stderr and "--talos-version" in r.stderr
    assert list(tmp_path.iterdir()) == []


def _controlplane_yaml(bundle: SecretsBundle) -> str:
    def pair(v: pki.CertKey) -> str:
        return f"\n            crt: {v.crt_b64()}\n            key: {v.key_b64()}"

    sa = base64.b64encode(bundle.k8s_service_account_key).decode()
    return f"""version: v1alpha1
machine:
    type: controlplane
    token: {bundle.trustd_token}
    ca:{pair(bundle.os).replace("            ", "        ")}
cluster:
    id: {bundle.cluster_id}
    secret: {bundle.cluster_secret}
    token: {bundle.bootstrap_token}
    secretboxEncryptionSecret: {bundle.secretbox_encryption_secret}
    ca:{pair(bundle.k8s).replace("            ", "        ")}
    aggregatorCA:{pair(bundle.k8s_aggregator).replace("            ", "        ")}
    serviceAccount:
        key: {sa}
    etcd:
        ca:{pair(bundle.etcd)}
---
apiVersion: v1alpha1
kind: KmsgLogConfig
name: remote-log
url: tcp://1.2.3.4:12345
"""


def test_gen_secrets_from_controlplane_config(talosctl, tmp_path: Path) -> None:
    bundle = SecretsBundle.generate(VersionContract.parse("v1.6"))
    (tmp_path / "controlplane.yaml").write_text(_controlplane_yaml(bundle))
    r = talosctl("gen", "secrets", "--from-controlplane-config", "controlplane.yaml", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert SecretsBundle.load(tmp_path / "secrets.yaml") == bundle


def test_gen_secrets_from_worker_or_missing_config(talosctl, tmp_path: Path) -> None:
    bundle = SecretsBundle.generate(VersionContract.parse("v1.6"))
    worker = _controlplane_yaml(bundle).replace(f"key: {bundle.os.key_b64()}", 'key: ""')
    (tmp_path / "worker.yaml").write_text(worker)
    r = talosctl("gen", "secrets", "--from-controlplane-config", "worker.yaml", cwd=tmp_path)
    assert r.exit_code == 1 and ".machine.ca.key is required" in r.stderr and "controlplane" in r.stderr
    r = talosctl("gen", "secrets", "--from-controlplane-config", "nope.yaml", cwd=tmp_path)
    assert r.exit_code == 1 and "'nope.yaml' does not exist" in r.stderr
    (tmp_path / "other.yaml").write_text("apiVersion: v1alpha1\nkind: KmsgLogConfig\nname: x\n")
    r = talosctl("gen", "secrets", "--from-controlplane-config", "other.yaml", cwd=tmp_path)
    assert r.exit_code == 1 and "no v1alpha1 machine config" in r.stderr
    assert not (tmp_path / "secrets.yaml").exists()


def test_gen_secrets_from_kubernetes_pki(talosctl, tmp_path: Path) -> None:
    pki_dir = tmp_path / "pki"
    ttl = timedelta(days=10)
    for base in ("ca", "front-proxy-ca", "etcd/ca"):
        ca = pki.new_ecdsa_ca(organization="k", ttl=ttl)
        (pki_dir / base).parent.mkdir(parents=True, exist_ok=True)
        (pki_dir / f"{base}.crt").write_bytes(ca.crt)
        (pki_dir / f"{base}.key").write_bytes(ca.key)
    (pki_dir / "sa.key").write_bytes(pki.new_ecdsa_key())
    token = "abcdef.0123456789abcdef"
    r = talosctl("gen", "secrets", "-p", "pki", "-t", token, "-o", "out.yaml", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    bundle = SecretsBundle.load(tmp_path / "out.yaml")
    assert bundle.bootstrap_token == token
    assert bundle.k8s.crt == (pki_dir / "ca.crt").read_bytes()
    r = talosctl("gen", "secrets", "--from-kubernetes-pki", "missing", "-o", "x.yaml", cwd=tmp_path)
    assert r.exit_code == 1 and "does not exist" in r.stderr and "--from-kubernetes-pki" in r.stderr
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("-t", "abcdef.0123456789abcdef"),
        ("--from-kubernetes-pki", "a", "--from-controlplane-config", "b"),
    ],
)
def test_gen_secrets_flag_conflicts(talosctl, tmp_path: Path, args: tuple[str, ...]) -> None:
    r = talosctl("gen", "secrets", *args, cwd=tmp_path)
    assert r.exit_code == 2
    assert list(tmp_path.iterdir()) == []
