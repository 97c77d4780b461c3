"""TLS for talosctl's connections: stdlib ``ssl`` contexts (Ed25519 works), SPKI pinning, expiry warning.

Python's ``ssl`` loads a client key only from a path, and Talos writes Ed25519 keys under a PEM label
OpenSSL does not read (``ED25519 PRIVATE KEY``), so the pair is re-encoded as PKCS#8 and handed over
through an anonymous in-memory file; the key never touches a disk. This module does not dial.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import sys
from collections.abc import Callable
from datetime import datetime, timedelta

from cryptography import x509

from ichor.client._errors import ClientError
from ichor.machinery.errors import ClientConfigError, PKIError

EXPIRY_WARNING = timedelta(days=30)
GRPC_MAX_MESSAGE_SIZE = 32 * 1024 * 1024
"""talosctl's MaxCallRecvMsgSize (constants.GRPCMaxMessageSize)."""

_warned: set[int] = set()
"""Serial numbers already warned about in this process: the warning is printed once per invocation."""


def _base_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    return ctx


def _load_pair(ctx: ssl.SSLContext, crt_pem: bytes, key_pem: bytes) -> None:
    from ichor.machinery.pki import load_certificate, load_into_ssl_context, load_private_key

    try:
        load_certificate(crt_pem, what="client certificate (crt)")
        load_private_key(key_pem, what="client key (key)")
    except PKIError as exc:
        raise ClientConfigError(
            str(exc), hint="the talosconfig context's crt/key are damaged; regenerate the talosconfig"
        ) from None
    try:
        load_into_ssl_context(ctx, crt_pem, key_pem)
    except ssl.SSLError as exc:
        raise ClientConfigError(
            f"could not load client key pair: {exc.reason or exc}",
            hint="the context's crt and key must belong together; regenerate the talosconfig",
        ) from None


def client_ssl_context(*, ca_pem: bytes, crt_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """Mutual TLS as talosctl does it: trust ``ca_pem`` (system roots if empty), present crt/key,
    check the server certificate against the host as dialled."""
    ctx = _base_context()
    if ca_pem.strip():
        try:
            ctx.load_verify_locations(cadata=ca_pem.decode("ascii", errors="replace"))
        except ssl.SSLError as exc:
            raise ClientConfigError(
                f"failed to append CA certificate to RootCAs pool: {exc.reason or exc}",
                hint="the talosconfig context's ca is damaged; regenerate the talosconfig",
            ) from None
    else:
        ctx.load_default_certs()
    if crt_pem or key_pem:
        _load_pair(ctx, crt_pem, key_pem)
    return ctx


def insecure_ssl_context() -> ssl.SSLContext:
    """Maintenance mode: no client certificate, no verification (pinning is checked after the handshake)."""
    ctx = _base_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def spki_fingerprint(cert_der: bytes) -> str:
    """Base64 SHA-256 of the certificate's SubjectPublicKeyInfo (talosctl's ``--cert-fingerprint``)."""
    from ichor.machinery.pki import spki_fingerprint as fingerprint

    return fingerprint(cert_der)


def parse_fingerprint(text: str) -> str:
    """Check a ``--cert-fingerprint`` value (base64 of 32 bytes) and return it canonicalised."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != hashlib.sha256().digest_size:
        raise ClientError(
            f"error parsing certificate fingerprint {text!r}: expected base64 of a SHA-256 digest",
            hint="--cert-fingerprint is the base64 SHA-256 of the node certificate's public key (SPKI), "
            "as printed on the node's console in maintenance mode",
        )
    return base64.b64encode(raw).decode("ascii")


def certificate_roles(crt_pem: bytes) -> list[str]:
    """The Organization values (Talos roles) of a PEM certificate; [] if it cannot be read."""
    try:
        cert = x509.load_pem_x509_certificate(crt_pem)
    except ValueError:
        return []
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)]


def _days(delta: timedelta) -> str:
    days = int(delta.total_seconds() // 86400)
    if days >= 1:
        return f"{days} day{'s' if days != 1 else ''}"
    hours = max(int(delta.total_seconds() // 3600), 0)
    return f"{hours} hour{'s' if hours != 1 else ''}"


def expiry_warning(crt_pem: bytes, context: str | None, *, now: datetime) -> str | None:
    """The warning text when the client certificate expires within 30 days (or has expired), else None."""
    try:
        cert = x509.load_pem_x509_certificate(crt_pem)
    except ValueError:
        return None
    expires = cert.not_valid_after_utc
    whose = f"the client certificate of context {context!r}" if context else "the client certificate"
    if expires <= now:
        return (
            f"warning: {whose} expired {_days(now - expires)} ago ({expires:%Y-%m-%d}); "
            "nodes will refuse it: generate a new talosconfig from the cluster's secrets"
        )
    if expires - now <= EXPIRY_WARNING:
        return (
            f"warning: {whose} expires in {_days(expires - now)} ({expires:%Y-%m-%d}); "
            "renew it before then with `talosctl config new`"
        )
    return None


def warn_if_expiring(
    crt_pem: bytes,
    context: str | None,
    *,
    now: datetime | None = None,
    write: Callable[[str], object] | None = None,
) -> str | None:
    """Print :func:`expiry_warning` to stderr, once per certificate per process; returns what was printed."""
    from ichor.machinery.pki import utc_now

    try:
        serial = x509.load_pem_x509_certificate(crt_pem).serial_number
    except ValueError:
        return None
    if serial in _warned:
        return None
    text = expiry_warning(crt_pem, context, now=utc_now(now))
    if text is None:
        return None
    _warned.add(serial)
    if write is None:
        sys.stderr.write(text + "\n")
    else:
        write(text)
    return text
