"""Keys, CAs and certificates shaped exactly like the ones Talos makes.

Talos (through ``siderolabs/crypto``) has fixed habits that other tools depend on, and files written
here must be interchangeable with Talos's:

* PEM types: ECDSA keys are SEC1 ``EC PRIVATE KEY``, RSA keys PKCS#1 ``RSA PRIVATE KEY``, Ed25519
  keys PKCS#8 DER under the non-standard label ``ED25519 PRIVATE KEY``. Reading also accepts
  generic PKCS#8 ``PRIVATE KEY`` (kubeadm and OpenSSL write it).
* A CA carries KeyUsage ``DigitalSignature|CertSign`` (critical), ExtKeyUsage
  ``ServerAuth, ClientAuth``, BasicConstraints ``CA:TRUE`` without path length (critical), and a
  SubjectKeyIdentifier = SHA-1 of the public key; its subject holds only Organization.
* A leaf carries KeyUsage ``DigitalSignature`` (critical), the ExtKeyUsages asked for, no
  BasicConstraints, and an AuthorityKeyIdentifier pointing at the CA.
* Serial numbers are random below 2**128; times are whole seconds.

This module turns bytes into keys and certificates and back. It knows nothing of secrets bundles,
talosconfig files or YAML, and never touches the filesystem. Every malformed input raises
:class:`~ichor.machinery.errors.PKIError`.
"""

from __future__ import annotations

__all__ = [
    "PEM_CERTIFICATE",
    "PEM_CERTIFICATE_REQUEST",
    "PEM_EC_PRIVATE_KEY",
    "PEM_ED25519_PRIVATE_KEY",
    "PEM_PRIVATE_KEY",
    "PEM_RSA_PRIVATE_KEY",
    "CertKey",
    "PrivateKey",
    "encode_private_key",
    "issue_certificate",
    "key_algorithm",
    "load_certificate",
    "load_csr",
    "load_into_ssl_context",
    "load_private_key",
    "new_csr",
    "new_ecdsa_ca",
    "new_ecdsa_key",
    "new_ed25519_ca",
    "new_ed25519_key",
    "new_key_like",
    "new_keypair",
    "new_rsa_ca",
    "new_rsa_key",
    "new_self_signed_ca",
    "spki_fingerprint",
    "spki_sha256",
    "utc_now",
]

import base64
import binascii
import hashlib
import ipaddress
import os
import re
import secrets as _random
import ssl
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ichor.machinery.errors import PKIError

PEM_CERTIFICATE = "CERTIFICATE"
PEM_CERTIFICATE_REQUEST = "CERTIFICATE REQUEST"
PEM_RSA_PRIVATE_KEY = "RSA PRIVATE KEY"
PEM_EC_PRIVATE_KEY = "EC PRIVATE KEY"
PEM_ED25519_PRIVATE_KEY = "ED25519 PRIVATE KEY"
PEM_PRIVATE_KEY = "PRIVATE KEY"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey

_SignHash = hashes.SHA256 | hashes.SHA512

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


def utc_now(now: datetime | None = None) -> datetime:
    """``now`` (or the clock) as an aware UTC time truncated to whole seconds, as X.509 stores it."""
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


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


# --- keys -------------------------------------------------------------------------------------


def encode_private_key(key: PrivateKey) -> bytes:
    """PEM-encode ``key`` the way Talos does (see the module docstring)."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        der = key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return _pem(PEM_ED25519_PRIVATE_KEY, der)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        der = key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        return _pem(PEM_EC_PRIVATE_KEY, der)
    if isinstance(key, rsa.RSAPrivateKey):
        der = key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        return _pem(PEM_RSA_PRIVATE_KEY, der)
    raise PKIError(f"unsupported private key type {type(key).__name__}")


def load_private_key(data: bytes, *, what: str = "private key") -> PrivateKey:
    """Parse a PEM private key in any of the forms Talos reads; ``what`` names it in errors."""
    kind, der = _pem_block(data, what)
    try:
        if kind == PEM_EC_PRIVATE_KEY:
            key = serialization.load_der_private_key(der, password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError("not an EC key")
        elif kind == PEM_RSA_PRIVATE_KEY:
            key = serialization.load_der_private_key(der, password=None)
            if not isinstance(key, rsa.RSAPrivateKey):
                raise ValueError("not an RSA key")
        elif kind == PEM_ED25519_PRIVATE_KEY:
            key = serialization.load_der_private_key(der, password=None)
            if not isinstance(key, ed25519.Ed25519PrivateKey):
                raise ValueError("not an Ed25519 key")
        elif kind == PEM_PRIVATE_KEY:
            key = serialization.load_der_private_key(der, password=None)
        else:
            raise PKIError(
                f"{what}: unsupported key type {kind!r}",
                hint="expected a PEM block of type RSA PRIVATE KEY, EC PRIVATE KEY, ED25519 PRIVATE KEY "
                "or PRIVATE KEY",
            )
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise PKIError(f"{what}: cannot parse the {kind} PEM block: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise PKIError(f"{what}: unsupported key algorithm {type(key).__name__}")
    return key


def key_algorithm(key: PrivateKey | PublicKey) -> str:
    """A short human name: ``Ed25519``, ``ECDSA P-256``, ``RSA 4096``."""
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "Ed25519"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return f"ECDSA {key.curve.name}"
    return f"RSA {key.key_size}"


def new_ed25519_key() -> bytes:
    """A fresh Ed25519 private key as Talos PEM (``ED25519 PRIVATE KEY``)."""
    return encode_private_key(ed25519.Ed25519PrivateKey.generate())


def new_ecdsa_key() -> bytes:
    """A fresh ECDSA P-256 private key as Talos PEM (``EC PRIVATE KEY``)."""
    return encode_private_key(ec.generate_private_key(ec.SECP256R1()))


def new_rsa_key(bits: int = 4096) -> bytes:
    """A fresh RSA private key as Talos PEM (``RSA PRIVATE KEY``)."""
    return encode_private_key(rsa.generate_private_key(public_exponent=65537, key_size=bits))


def _generate_like(public: PublicKey) -> PrivateKey:
    if isinstance(public, ed25519.Ed25519PublicKey):
        return ed25519.Ed25519PrivateKey.generate()
    if isinstance(public, ec.EllipticCurvePublicKey):
        # Talos issues P-256 leaves whatever the curve of an ECDSA CA.
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=4096)


def new_key_like(ca: CertKey) -> bytes:
    """A fresh key of the family Talos picks for leaves of ``ca`` (Ed25519, P-256 or RSA 4096)."""
    return encode_private_key(_generate_like(_public_key(ca.certificate())))


def _public_key(cert: x509.Certificate | x509.CertificateSigningRequest) -> PublicKey:
    public = cert.public_key()
    if not isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey):
        raise PKIError(f"unsupported public key algorithm {type(public).__name__}")
    return public


def _same_public_key(a: PublicKey, b: PublicKey) -> bool:
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    return a.public_bytes(serialization.Encoding.DER, fmt) == b.public_bytes(serialization.Encoding.DER, fmt)


# --- certificates -----------------------------------------------------------------------------


def load_certificate(data: bytes, *, what: str = "certificate") -> x509.Certificate:
    """Parse the first PEM ``CERTIFICATE`` block of ``data``."""
    kind, der = _pem_block(data, what)
    if kind != PEM_CERTIFICATE:
        raise PKIError(f"{what}: expected a CERTIFICATE PEM block, found {kind!r}")
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise PKIError(f"{what}: cannot parse the certificate: {exc}") from None


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


@dataclass(frozen=True)
class CertKey:
    """A PEM certificate and its PEM private key; ``key`` is ``b""`` when only the certificate is known."""

    crt: bytes
    key: bytes

    def crt_b64(self) -> str:
        """Base64 of the PEM, as Talos stores it in YAML."""
        return base64.b64encode(self.crt).decode("ascii")

    def key_b64(self) -> str:
        return base64.b64encode(self.key).decode("ascii")

    @classmethod
    def from_b64(cls, crt: str, key: str, *, what: str = "certificate") -> CertKey:
        """Decode base64 PEM strings (empty strings allowed) and check each parses."""
        out = cls(_b64decode(crt, f"{what} crt"), _b64decode(key, f"{what} key"))
        if out.crt:
            load_certificate(out.crt, what=f"{what} crt")
        if out.key:
            load_private_key(out.key, what=f"{what} key")
        return out

    @property
    def has_key(self) -> bool:
        return bool(self.key)

    def certificate(self) -> x509.Certificate:
        return load_certificate(self.crt)

    def private_key(self) -> PrivateKey:
        if not self.key:
            raise PKIError("the certificate has no private key")
        return load_private_key(self.key)

    def check_pair(self, *, what: str = "certificate") -> None:
        """Raise :class:`PKIError` unless the key is the certificate's private key."""
        cert = load_certificate(self.crt, what=f"{what} crt")
        key = load_private_key(self.key, what=f"{what} key")
        if not _same_public_key(_public_key(cert), key.public_key()):
            raise PKIError(f"{what}: the key does not belong to the certificate")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise PKIError(f"{what}: not valid base64") from None


def _serial() -> int:
    # x509 requires a positive serial; Talos draws from [0, 2**128).
    return _random.randbelow((1 << 128) - 1) + 1


def _signing_hash(key: PrivateKey) -> _SignHash | None:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return None
    return hashes.SHA256()


def _name(organizations: Iterable[str] = (), common_name: str | None = None) -> x509.Name:
    try:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        if common_name:
            attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    except ValueError as exc:  # e.g. a common name over X.509's 64 characters
        raise PKIError(f"invalid certificate subject: {exc}") from None
    return x509.Name(attrs)


def _san(dns_names: Iterable[str], ip_addresses: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    for ip in ip_addresses:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(ip)))
        except ValueError:
            raise PKIError(f"invalid IP: {ip}") from None
    return names


def new_self_signed_ca(
    key_pem: bytes,
    *,
    organization: str | None = None,
    common_name: str | None = None,
    ttl: timedelta,
    now: datetime | None = None,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    signing_hash: _SignHash | None = None,
) -> CertKey:
    """A self-signed CA for the private key ``key_pem``, valid ``ttl`` from ``now``."""
    key = load_private_key(key_pem)
    start = utc_now(now)
    subject = _name([organization] if organization else [], common_name)
    algorithm = (
        _signing_hash(key)
        if signing_hash is None or isinstance(key, ed25519.Ed25519PrivateKey)
        else signing_hash
    )
    builder = (
        x509.CertificateBuilder()
        .serial_number(_serial())
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .not_valid_before(start)
        .not_valid_after(start + ttl)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    san = _san(dns_names, ip_addresses)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = builder.sign(key, algorithm)
    return CertKey(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def new_ed25519_ca(*, organization: str, ttl: timedelta, now: datetime | None = None) -> CertKey:
    """An Ed25519 CA (Talos's OS CA is one, with O=talos)."""
    return new_self_signed_ca(new_ed25519_key(), organization=organization, ttl=ttl, now=now)


def new_ecdsa_ca(
    *,
    organization: str | None = None,
    common_name: str | None = None,
    ttl: timedelta,
    now: datetime | None = None,
) -> CertKey:
    """An ECDSA P-256 / SHA-256 CA (Talos's etcd, Kubernetes and aggregator CAs)."""
    return new_self_signed_ca(
        new_ecdsa_key(), organization=organization, common_name=common_name, ttl=ttl, now=now
    )


def new_rsa_ca(
    *, organization: str | None = None, ttl: timedelta, now: datetime | None = None, bits: int = 4096
) -> CertKey:
    """An RSA CA signed with SHA-512, as ``talosctl gen ca --rsa`` makes."""
    return new_self_signed_ca(
        new_rsa_key(bits), organization=organization, ttl=ttl, now=now, signing_hash=hashes.SHA512()
    )


def issue_certificate(
    ca: CertKey,
    public_key_or_csr: bytes | PublicKey | x509.CertificateSigningRequest,
    *,
    organizations: Sequence[str] | None = None,
    common_name: str | None = None,
    ttl: timedelta,
    server: bool,
    client: bool,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    now: datetime | None = None,
) -> bytes:
    """Sign a leaf certificate with ``ca``; returns its PEM.

    ``public_key_or_csr`` is a public key, a CSR object, or PEM bytes of a private key (its public
    half is used), a CSR or a public key. With a CSR and no ``organizations``/``common_name``, the
    CSR's subject is kept; the CSR's SANs are always added to ``dns_names``/``ip_addresses``.
    ``server``/``client`` select the ExtKeyUsages ServerAuth/ClientAuth.
    """
    ca_cert = load_certificate(ca.crt, what="CA certificate")
    ca_key = load_private_key(ca.key, what="CA key") if ca.key else None
    if ca_key is None:
        raise PKIError("cannot issue a certificate: the CA has no private key")
    if not _same_public_key(_public_key(ca_cert), ca_key.public_key()):
        raise PKIError("cannot issue a certificate: the CA key does not belong to the CA certificate")

    subject: x509.Name | None = None
    dns = list(dns_names)
    ips = list(ip_addresses)
    public: PublicKey
    if isinstance(public_key_or_csr, bytes):
        public_key_or_csr = _public_from_pem(public_key_or_csr)
    if isinstance(public_key_or_csr, x509.CertificateSigningRequest):
        csr = public_key_or_csr
        if not csr.is_signature_valid:
            raise PKIError("failed verifying CSR signature")
        public = _public_key(csr)
        if organizations is None and common_name is None:
            subject = csr.subject
        try:
            csr_san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            csr_san = None
        if csr_san is not None:
            dns.extend(n for n in csr_san.get_values_for_type(x509.DNSName) if n not in dns)
            ips.extend(str(ip) for ip in csr_san.get_values_for_type(x509.IPAddress) if str(ip) not in ips)
    else:
        public = public_key_or_csr
    if subject is None:
        subject = _name(organizations or (), common_name)

    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    start = utc_now(now)
    builder = (
        x509.CertificateBuilder()
        .serial_number(_serial())
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .not_valid_before(start)
        .not_valid_after(start + ttl)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    builder = builder.add_extension(_authority_key_id(ca_cert), critical=False)
    san = _dedupe_san(dns, ips)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = builder.sign(ca_key, _signing_hash(ca_key))
    return cert.public_bytes(serialization.Encoding.PEM)


def _dedupe_san(dns: list[str], ips: list[str]) -> list[x509.GeneralName]:
    return _san(dict.fromkeys(dns), dict.fromkeys(ips))


def _authority_key_id(ca_cert: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(_public_key(ca_cert))
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _public_from_pem(data: bytes) -> PublicKey | x509.CertificateSigningRequest:
    kind, _ = _pem_block(data, "public key or CSR")
    if kind == PEM_CERTIFICATE_REQUEST:
        return load_csr(data)
    if kind.endswith("PRIVATE KEY"):
        return load_private_key(data).public_key()
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise PKIError(f"cannot parse the {kind} PEM block: {exc}") from None
    if not isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey):
        raise PKIError(f"unsupported public key algorithm {type(public).__name__}")
    return public


def new_keypair(
    ca: CertKey,
    *,
    organizations: Sequence[str] = (),
    common_name: str | None = None,
    ttl: timedelta,
    server: bool,
    client: bool,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    now: datetime | None = None,
) -> CertKey:
    """A fresh key of the CA's family plus a leaf certificate for it, signed by ``ca``."""
    key_pem = new_key_like(ca)
    crt = issue_certificate(
        ca,
        load_private_key(key_pem).public_key(),
        organizations=organizations,
        common_name=common_name,
        ttl=ttl,
        server=server,
        client=client,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        now=now,
    )
    return CertKey(crt, key_pem)


def new_csr(
    key_pem: bytes,
    *,
    organizations: Sequence[str] = (),
    common_name: str | None = None,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
) -> bytes:
    """A PEM CSR signed by ``key_pem`` (SHA-256 for ECDSA/RSA, pure Ed25519 otherwise)."""
    key = load_private_key(key_pem)
    builder = x509.CertificateSigningRequestBuilder().subject_name(_name(organizations, common_name))
    san = _san(dns_names, ip_addresses)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    algorithm: _SignHash | None = _signing_hash(key)
    if isinstance(key, rsa.RSAPrivateKey):
        algorithm = hashes.SHA512()
    try:
        csr = builder.sign(key, algorithm)
    except (ValueError, InvalidSignature) as exc:
        raise PKIError(f"error generating CSR: {exc}") from None
    return csr.public_bytes(serialization.Encoding.PEM)


def load_into_ssl_context(ctx: ssl.SSLContext, crt_pem: bytes, key_pem: bytes) -> None:
    """Give a stdlib ``ssl`` context a certificate and key in any PEM form Talos writes.

    OpenSSL cannot read Talos's ``ED25519 PRIVATE KEY`` label, so the key is re-encoded as PKCS#8.
    ``ssl`` only loads key pairs from files: an anonymous in-memory file keeps the key off the disk
    (a private temporary directory where memfd does not exist).
    """
    pkcs8 = load_private_key(key_pem).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    blob = crt_pem.rstrip(b"\n") + b"\n" + pkcs8
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        fd = memfd("ichor-key-pair", os.MFD_CLOEXEC)
        try:
            os.write(fd, blob)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ichor-tls-") as tmp:  # pragma: no cover - non-Linux
        path = Path(tmp) / "pair.pem"
        path.touch(mode=0o600)
        path.write_bytes(blob)
        ctx.load_cert_chain(path)


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
