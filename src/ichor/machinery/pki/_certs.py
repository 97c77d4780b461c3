"""CAs and leaf certificates with Talos's extensions, serials and times: :class:`CertKey` (a PEM
certificate with its key), self-signed CAs, issuing leaves from a public key or CSR, and CSRs.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import secrets as _random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ichor.machinery.errors import PKIError

from ._keys import (
    PrivateKey,
    PublicKey,
    _generate_like,
    _public_key,
    _same_public_key,
    _SignHash,
    _signing_hash,
    encode_private_key,
    load_private_key,
    new_ecdsa_key,
    new_ed25519_key,
    new_rsa_key,
)
from ._pem import PEM_CERTIFICATE_REQUEST, _pem_block, load_certificate, load_csr


def utc_now(now: datetime | None = None) -> datetime:
    """``now`` (or the clock) as an aware UTC time truncated to whole seconds, as X.509 stores it."""
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


def new_key_like(ca: CertKey) -> bytes:
    """A fresh key of the family Talos picks for leaves of ``ca`` (Ed25519, P-256 or RSA 4096)."""
    return encode_private_key(_generate_like(_public_key(ca.certificate())))


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
