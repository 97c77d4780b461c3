"""Private keys the way Talos writes them: generate, PEM-encode, parse, name the algorithm, and hand a
key pair to a stdlib ``ssl`` context without writing the key to disk.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ichor.machinery.errors import PKIError

from ._pem import (
    PEM_EC_PRIVATE_KEY,
    PEM_ED25519_PRIVATE_KEY,
    PEM_PRIVATE_KEY,
    PEM_RSA_PRIVATE_KEY,
    _pem,
    _pem_block,
)

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey

_SignHash = hashes.SHA256 | hashes.SHA512


def encode_private_key(key: PrivateKey) -> bytes:
    """PEM-encode ``key`` the way Talos does (see the package docstring)."""
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


def _public_key(cert: x509.Certificate | x509.CertificateSigningRequest) -> PublicKey:
    public = cert.public_key()
    if not isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey):
        raise PKIError(f"unsupported public key algorithm {type(public).__name__}")
    return public


def _same_public_key(a: PublicKey, b: PublicKey) -> bool:
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    return a.public_bytes(serialization.Encoding.DER, fmt) == b.public_bytes(serialization.Encoding.DER, fmt)


def _signing_hash(key: PrivateKey) -> _SignHash | None:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return None
    return hashes.SHA256()


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
