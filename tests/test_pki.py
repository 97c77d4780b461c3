"""Certificates and keys must look like Talos's, attribute for attribute."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ichor.machinery import pki
from ichor.machinery.clientconfig import issue_admin_context
from ichor.machinery.contract import VersionContract
from ichor.machinery.errors import ClientConfigError, PKIError
from ichor.machinery.secrets import SecretsBundle

NOW = datetime(2024, 3, 1, 12, 30, 45, tzinfo=UTC)
TEN_YEARS = timedelta(hours=87600)


@pytest.fixture(scope="module")
def bundle() -> SecretsBundle:
    return SecretsBundle.generate(VersionContract.parse("v1.7"), now=NOW)


def _ku(cert: x509.Certificate) -> tuple[x509.KeyUsage, bool]:
    ext = cert.extensions.get_extension_for_class(x509.KeyUsage)
    return ext.value, ext.critical


def _eku(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def _check_ca(cert: x509.Certificate, *, subject: list[tuple[x509.ObjectIdentifier, str]]) -> None:
    assert [(a.oid, a.value) for a in cert.subject] == subject
    assert cert.issuer == cert.subject
    ku, critical = _ku(cert)
    assert critical
    assert ku.digital_signature and ku.key_cert_sign
    assert not (ku.key_encipherment or ku.crl_sign or ku.content_commitment or ku.key_agreement)
    assert _eku(cert) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length is None
    ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert ski.digest == x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest  # type: ignore[arg-type]
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == TEN_YEARS
    assert 0 < cert.serial_number < 2**128
    cert.verify_directly_issued_by(cert)


def test_etcd_and_kubernetes_cas_are_ecdsa_p256(bundle: SecretsBundle) -> None:
    for pair, org in ((bundle.etcd, "etcd"), (bundle.k8s, "kubernetes")):
        cert = pair.certificate()
        _check_ca(cert, subject=[(NameOID.ORGANIZATION_NAME, org)])
        key = cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
        assert cert.signature_hash_algorithm is not None and cert.signature_hash_algorithm.name == "sha256"
        assert pair.key.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
        pair.check_pair()


def test_aggregator_ca_has_the_empty_subject_talos_gives_it(bundle: SecretsBundle) -> None:
    cert = bundle.k8s_aggregator.certificate()
    _check_ca(cert, subject=[])
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)


def test_os_ca_is_ed25519_with_talos_pem_label(bundle: SecretsBundle) -> None:
    cert = bundle.os.certificate()
    _check_ca(cert, subject=[(NameOID.ORGANIZATION_NAME, "talos")])
    assert isinstance(cert.public_key(), ed25519.Ed25519PublicKey)
    assert bundle.os.key.startswith(b"-----BEGIN ED25519 PRIVATE KEY-----\n")
    assert isinstance(bundle.os.private_key(), ed25519.Ed25519PrivateKey)


def test_service_account_key_follows_the_contract(bundle: SecretsBundle) -> None:
    key = pki.load_private_key(bundle.k8s_service_account_key)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 4096
    assert bundle.k8s_service_account_key.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    old = SecretsBundle.generate(VersionContract.parse("v1.6"), now=NOW)
    old_key = pki.load_private_key(old.k8s_service_account_key)
    assert isinstance(old_key, ec.EllipticCurvePrivateKey) and old_key.curve.name == "secp256r1"


def test_admin_certificate(bundle: SecretsBundle) -> None:
    ctx = issue_admin_context(bundle, now=NOW)
    assert ctx.ca == bundle.os.crt_b64()
    pair = pki.CertKey.from_b64(ctx.crt, ctx.key)
    cert = pair.certificate()
    assert [(a.oid, a.value) for a in cert.subject] == [(NameOID.ORGANIZATION_NAME, "os:admin")]
    assert cert.issuer == bundle.os.certificate().subject
    assert isinstance(cert.public_key(), ed25519.Ed25519PublicKey)
    assert pair.key.startswith(b"-----BEGIN ED25519 PRIVATE KEY-----\n")
    ku, critical = _ku(cert)
    assert critical and ku.digital_signature and not ku.key_cert_sign and not ku.key_encipherment
    assert _eku(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.BasicConstraints)
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = bundle.os.certificate().extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=365)
    cert.verify_directly_issued_by(bundle.os.certificate())
    pair.check_pair()


def test_admin_certificate_roles_and_ttl(bundle: SecretsBundle) -> None:
    ctx = issue_admin_context(bundle, roles=["os:reader", "os:etcd:backup"], ttl=timedelta(hours=1), now=NOW)
    cert = pki.CertKey.from_b64(ctx.crt, "").certificate()
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["os:reader", "os:etcd:backup"]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(hours=1)
    with pytest.raises(ClientConfigError, match="unknown roles: os:root") as err:
        issue_admin_context(bundle, roles=["os:root"])
    assert err.value.hint is not None and "os:admin" in err.value.hint


def test_server_certificate_from_ecdsa_ca(bundle: SecretsBundle) -> None:
    leaf_key = pki.new_ecdsa_key()
    crt = pki.issue_certificate(
        bundle.k8s,
        leaf_key,
        organizations=["system:masters"],
        common_name="kube-apiserver",
        ttl=timedelta(days=365),
        server=True,
        client=False,
        dns_names=["kubernetes", "kubernetes.default"],
        ip_addresses=["10.96.0.1", "fd00::1"],
        now=NOW,
    )
    cert = pki.load_certificate(crt)
    cert.verify_directly_issued_by(bundle.k8s.certificate())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver"
    assert _eku(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kubernetes", "kubernetes.default"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.96.0.1", "fd00::1"]
    assert pki.CertKey(crt, leaf_key).check_pair() is None


def test_keypair_matches_ca_family(bundle: SecretsBundle) -> None:
    pair = pki.new_keypair(
        bundle.etcd, common_name="etcd-peer", ttl=TEN_YEARS, server=True, client=True, now=NOW
    )
    assert isinstance(pair.private_key(), ec.EllipticCurvePrivateKey)
    pair.certificate().verify_directly_issued_by(bundle.etcd.certificate())
    assert _eku(pair.certificate()) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def test_csr_subject_and_sans_are_kept(bundle: SecretsBundle) -> None:
    key = pki.new_ed25519_key()
    csr = pki.new_csr(key, organizations=["os:admin"], ip_addresses=["10.5.0.2"])
    crt = pki.issue_certificate(bundle.os, csr, ttl=timedelta(hours=24), server=False, client=True, now=NOW)
    cert = pki.load_certificate(crt)
    assert cert.subject.rfc4514_string() == "O=os:admin"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.5.0.2"]
    cert.verify_directly_issued_by(bundle.os.certificate())


def test_tampered_csr_is_refused(bundle: SecretsBundle) -> None:
    csr = pki.load_csr(pki.new_csr(pki.new_ecdsa_key(), common_name="a"))
    der = bytearray(csr.public_bytes(serialization.Encoding.DER))
    der[-5] ^= 0xFF  # inside the signature
    bad = x509.load_der_x509_csr(bytes(der))
    with pytest.raises(PKIError, match="CSR signature"):
        pki.issue_certificate(bundle.os, bad, ttl=timedelta(hours=1), server=False, client=True)


def test_issuing_needs_the_ca_key(bundle: SecretsBundle) -> None:
    with pytest.raises(PKIError, match="no private key"):
        pki.issue_certificate(
            pki.CertKey(bundle.os.crt, b""),
            pki.new_ed25519_key(),
            ttl=timedelta(1),
            server=True,
            client=False,
        )
    with pytest.raises(PKIError, match="does not belong"):
        pki.issue_certificate(
            pki.CertKey(bundle.os.crt, pki.new_ed25519_key()),
            pki.new_ed25519_key(),
            ttl=timedelta(1),
            server=True,
            client=False,
        )


def test_rsa_ca_uses_sha512_and_pkcs1() -> None:
    ca = pki.new_rsa_ca(organization="acme", ttl=timedelta(hours=2), now=NOW, bits=2048)
    cert = ca.certificate()
    assert cert.signature_hash_algorithm is not None and cert.signature_hash_algorithm.name == "sha512"
    assert ca.key.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    leaf = pki.issue_certificate(ca, pki.new_ed25519_key(), ttl=timedelta(hours=1), server=False, client=True)
    pki.load_certificate(leaf).verify_directly_issued_by(cert)


def test_spki_hash_format(bundle: SecretsBundle) -> None:
    spki = (
        bundle.os.certificate()
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert pki.spki_sha256(bundle.os.crt) == "sha256:" + hashlib.sha256(spki).hexdigest()


def test_generic_pkcs8_keys_are_accepted() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    loaded = pki.load_private_key(pem)
    assert isinstance(loaded, ec.EllipticCurvePrivateKey)
    assert loaded.private_numbers() == key.private_numbers()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"hello", "not PEM data"),
        (b"-----BEGIN EC PRIVATE KEY-----\n!!!!\n-----END EC PRIVATE KEY-----\n", "not valid base64"),
        (b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", "cannot parse"),
        (b"-----BEGIN DSA PRIVATE KEY-----\nAAAA\n-----END DSA PRIVATE KEY-----\n", "unsupported key type"),
    ],
)
def test_bad_private_keys(data: bytes, message: str) -> None:
    with pytest.raises(PKIError, match=message):
        pki.load_private_key(data, what="certs.os.key")


def test_wrong_pem_label_for_key_family() -> None:
    ed = pki.new_ed25519_key()
    relabelled = ed.replace(b"ED25519 PRIVATE KEY", b"EC PRIVATE KEY")
    with pytest.raises(PKIError, match="EC PRIVATE KEY"):
        pki.load_private_key(relabelled)


def test_certificate_in_key_slot_is_named(bundle: SecretsBundle) -> None:
    with pytest.raises(PKIError, match="unsupported key type 'CERTIFICATE'"):
        pki.load_private_key(bundle.os.crt)
    with pytest.raises(PKIError, match="expected a CERTIFICATE PEM block"):
        pki.load_certificate(bundle.os.key)


def test_certkey_from_b64_errors(bundle: SecretsBundle) -> None:
    with pytest.raises(PKIError, match="crt: not valid base64"):
        pki.CertKey.from_b64("not base64!", "")
    with pytest.raises(PKIError, match="key: not PEM data"):
        pki.CertKey.from_b64(bundle.os.crt_b64(), base64.b64encode(b"plain text").decode())
    round_trip = pki.CertKey.from_b64(bundle.os.crt_b64(), bundle.os.key_b64())
    assert round_trip == bundle.os
    assert pki.CertKey.from_b64(bundle.os.crt_b64(), "").key == b""


def test_invalid_ip_san(bundle: SecretsBundle) -> None:
    with pytest.raises(PKIError, match=r"invalid IP: 10\.0\.0\.300"):
        pki.issue_certificate(
            bundle.os,
            pki.new_ed25519_key(),
            ttl=timedelta(1),
            server=True,
            client=False,
            ip_addresses=["10.0.0.300"],
        )


def test_naive_now_is_utc_and_truncated() -> None:
    moment = datetime(2024, 1, 2, 3, 4, 5, 678901)
    ca = pki.new_ed25519_ca(organization="x", ttl=timedelta(hours=1), now=moment)
    assert ca.certificate().not_valid_before_utc == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
