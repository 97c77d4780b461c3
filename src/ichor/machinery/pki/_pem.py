"""PEM blocks in and out, and reading certificates and CSRs from them (plus SPKI fingerprints).

The PEM type names are Talos's (see the package docstring); nothing here makes keys or signs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from ichor.machinery.errors import PKIError

PEM_CERTIFICATE = "CERTIFICATE"
PEM_CERTIFICATE_REQUEST = "CERTIFICATE REQUEST"
PEM_RSA_PRIVATE_KEY = "RSA PRIVATE KEY"
PEM_EC_PRIVATE_KEY = "EC PRIVATE KEY"
PEM_ED25519_PRIVATE_KEY = "ED25519 PRIVATE KEY"
PEM_PRIVATE_KEY = "PRIVATE KEY"

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


# --- PEM blocks -------------------------------------------------------------------------------


def _pem_block(data: bytes, what: str) -> tuple[str, bytes]:
    """The type and DER body of the first PEM block in ``data``."""
    match = _PEM_BLOCK.search(data)
    if match is None:
        raise PKIError(f"{what}: not PEM data (no -----BEGIN ...----- block found)")
    kind = match.group(1).decode("ascii")
    body = b"".join(line.strip() for line in match.group(2).splitlines() if b":" not in line)
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise PKIError(f"{what}: the {kind} PEM block is not valid base64") from None
    return kind, der


def _pem(kind: str, der: bytes) -> bytes:
    body = base64.b64encode(der)
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return (
        b"-----BEGIN "
        + kind.encode()
        + b"-----\n"
        + b"\n".join(lines)
        + b"\n-----END "
        + kind.encode()
        + b"-----\n"
    )


def load_certificate(data: bytes, *, what: str = "certificate") -> x509.Certificate:
    """Parse the first PEM ``CERTIFICATE`` block of ``data``."""
    kind, der = _pem_block(data, what)
    if kind != PEM_CERTIFICATE:
        raise PKIError(f"{what}: expected a CERTIFICATE PEM block, found {kind!r}")
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise PKIError(f"{what}: cannot parse the certificate: {exc}") from None


def load_certificates(data: bytes, *, what: str = "certificates") -> list[x509.Certificate]:
    """Every PEM ``CERTIFICATE`` block of ``data`` (a CA bundle), in order; other blocks are skipped."""
    out = []
    for index, match in enumerate(_PEM_BLOCK.finditer(data)):
        if match.group(1) == PEM_CERTIFICATE.encode():
            out.append(load_certificate(match.group(0), what=f"{what}[{index}]"))
    return out


def issued_by_any(cert_pem: bytes, ca_bundle: bytes) -> bool:
    """Whether the first non-CA certificate of ``cert_pem`` (a kubelet's ``cert+key`` file holds its
    chain) is signed directly by one of the CAs of ``ca_bundle`` and valid now (Go's
    ``Certificate.Verify`` with a pool of roots, for leaves issued straight from a root)."""
    leaves = [
        c for c in load_certificates(cert_pem, what="certificate")
        if not _is_ca(c)
    ]  # fmt: skip
    if not leaves:
        return False
    leaf = leaves[0]
    now = datetime.now(UTC)
    if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
        return False
    for ca in load_certificates(ca_bundle, what="CA bundle"):
        try:
            leaf.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def load_csr(data: bytes, *, what: str = "certificate request") -> x509.CertificateSigningRequest:
    """Parse a PEM ``CERTIFICATE REQUEST``."""
    kind, der = _pem_block(data, what)
    if kind != PEM_CERTIFICATE_REQUEST:
        raise PKIError(f"{what}: expected a CERTIFICATE REQUEST PEM block, found {kind!r}")
    try:
        csr = x509.load_der_x509_csr(der)
        # The parts are parsed lazily: parse them now, so a garbled one is this error, here, and
        # not a bare ValueError wherever the CSR is used next.
        csr.public_key()
        _ = csr.subject, csr.extensions, csr.is_signature_valid
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise PKIError(f"{what}: cannot parse the certificate request: {exc}") from None
    return csr


def spki_sha256(cert_pem: bytes) -> str:
    """``sha256:<hex>`` of the certificate's SubjectPublicKeyInfo (what ``gen ca`` writes to .sha256)."""
    spki = (
        load_certificate(cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def spki_fingerprint(cert: bytes) -> str:
    """Base64 SHA-256 of a certificate's SubjectPublicKeyInfo (``talosctl --cert-fingerprint``).

    ``cert`` is PEM or DER.
    """
    parsed = (
        x509.load_pem_x509_certificate(cert)
        if cert.lstrip().startswith(b"-----")
        else x509.load_der_x509_certificate(cert)
    )
    spki = parsed.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")
