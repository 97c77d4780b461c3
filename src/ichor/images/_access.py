"""``machine.registries.config`` for a node's own pulls: credentials and TLS per registry endpoint, as Talos 1.7.

Talos 1.7.6 (``internal/pkg/containers/image/resolver.go``) pulls its installer image through
containerd's resolver with these rules, which :class:`Registries` and :func:`prepare_auth` keep:

* the settings of an endpoint are ``config[<the endpoint URL's host[:port]>]`` (a mirror endpoint's,
  or ``registry-1.docker.io`` for Docker Hub); no ``*`` fallback;
* ``tls`` on an endpoint that is not ``https`` is an error ("TLS config specified for non-HTTPS
  registry: "host""); ``tls.ca`` replaces the system roots (only that CA is trusted),
  ``tls.insecureSkipVerify`` skips verification, ``tls.clientIdentity`` is the client certificate;
* credentials (``PrepareAuth``) go only to the host they are configured for: ``username`` (with
  ``password``), else ``identityToken`` (as the secret, no user), else ``auth`` (base64
  ``user:password``); an ``auth`` block with none of them is "invalid auth config for "host"".
  A ``Basic`` challenge is answered with them; a ``Bearer`` one by asking the token realm (an
  OAuth2 ``POST`` when there is a secret, a ``GET`` otherwise or when the POST is refused: 400,
  401, 404, or 405 with a user), as containerd's authorizer.

Errors are :class:`~ichor.images.ImageError`.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ichor.images._errors import ImageError

__all__ = ["Registries", "RegistryAccess", "access_from_config", "prepare_auth"]

_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


@dataclass(frozen=True)
class RegistryAccess:
    """One ``machine.registries.config`` entry."""

    username: str = ""
    password: str = ""
    auth: str = ""
    identity_token: str = ""
    has_auth: bool = False
    """An ``auth`` block was given (even an empty one, which Talos refuses when asked)."""
    has_tls: bool = False
    ca: str = ""
    """base64 PEM, as in the machine config (decoded when the context is built)."""
    insecure_skip_verify: bool = False
    client_cert: str = ""
    client_key: str = ""

    def ssl_context(self, host: str) -> ssl.SSLContext | None:
        """Talos's ``GetTLSConfig`` as an SSL context; None without ``tls`` (the system's defaults)."""
        if not self.has_tls:
            return None
        where = f"error preparing TLS config for {_q(host)}"
        ca = _decode_pem(self.ca, where)
        try:
            context = ssl.create_default_context(cadata=ca.decode()) if ca else ssl.create_default_context()
        except (ssl.SSLError, ValueError) as err:
            raise ImageError(f"{where}: the CA is not a PEM certificate ({err})") from None
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert or self.client_key:
            cert, key = _decode_pem(self.client_cert, where), _decode_pem(self.client_key, where)
            _load_client_identity(context, cert, key, where)
        return context


def _load_client_identity(context: ssl.SSLContext, cert: bytes, key: bytes, where: str) -> None:
    """``tls.X509KeyPair`` into ``context`` (:func:`ichor.machinery.pki.load_into_ssl_context`: any
    key form Talos writes, kept off the disk)."""
    from ichor.machinery.errors import PKIError
    from ichor.machinery.pki import load_into_ssl_context

    try:
        load_into_ssl_context(context, cert, key)
    except (PKIError, ssl.SSLError, OSError) as err:
        raise ImageError(f"{where}: the client identity is not a key pair ({err})") from None


def prepare_auth(access: RegistryAccess | None, host: str, expected_host: str) -> tuple[str, str]:
    """Talos's ``PrepareAuth``: (user, secret) for a request to ``expected_host`` with the settings
    of ``host``; ("", "") for none. A secret without a user is an identity token."""
    if access is None or not access.has_auth or expected_host != host:
        return "", ""
    if access.username:
        return access.username, access.password
    if access.identity_token:
        return "", access.identity_token
    if access.auth:
        raw = access.auth.encode()
        bad = next((i for i, c in enumerate(raw) if c not in _B64), None)
        try:
            if bad is not None:
                raise binascii.Error
            decoded = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            where = bad if bad is not None else len(raw) - len(raw) % 4
            raise ImageError(
                f"error parsing auth for {_q(host)}: illegal base64 data at input byte {where}"
            ) from None
        user, colon, password = decoded.decode(errors="replace").partition(":")
        if not colon:
            raise ImageError(f"invalid decoded auth for {_q(host)}: {_q(decoded.decode(errors='replace'))}")
        return user, password.strip("\x00")
    raise ImageError(f"invalid auth config for {_q(host)}")


def _q(text: str) -> str:
    from ichor.machinery import goquote

    return goquote.quote(text)


@dataclass(frozen=True, eq=False)
class Registries(Mapping[str, Any]):
    """Talos's ``config.Registries``: as a mapping, the mirrors (registry -> :class:`MirrorEndpoints`)
    that :func:`~ichor.images.fetch_installer` has always taken (and equal to a plain dict of them);
    ``config`` is the per-endpoint :class:`RegistryAccess`."""

    mirrors: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, RegistryAccess] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.mirrors[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.mirrors)

    def __len__(self) -> int:
        return len(self.mirrors)


def _decode_pem(value: str, where: str) -> bytes:
    if not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError(f"{where}: PEM material that is not base64",
                         hint="machine.registries.config's ca, crt and key are base64-encoded PEM") from None  # fmt: skip


def access_from_config(config: Mapping[str, Any] | None) -> dict[str, RegistryAccess]:
    """``machine.registries.config`` (the typed models or plain mappings) as :class:`RegistryAccess` by host."""
    out: dict[str, RegistryAccess] = {}
    for host, entry in (config or {}).items():
        if entry is None:
            continue
        auth, tls = _part(entry, "auth"), _part(entry, "tls")
        identity = _part(tls, "clientIdentity", "client_identity") if tls is not None else None
        out[host] = RegistryAccess(
            username=str(_part(auth, "username") or ""),
            password=str(_part(auth, "password") or ""),
            auth=str(_part(auth, "auth") or ""),
            identity_token=str(_part(auth, "identityToken", "identity_token") or ""),
            has_auth=auth is not None,
            has_tls=tls is not None,
            ca=str(_part(tls, "ca") or ""),
            insecure_skip_verify=bool(_part(tls, "insecureSkipVerify", "insecure_skip_verify")),
            client_cert=str(_part(identity, "crt") or ""),
            client_key=str(_part(identity, "key") or ""),
        )
    return out


def _part(entry: Any, key: str, attribute: str | None = None) -> Any:
    """``entry[key]`` of a plain mapping, or the typed model's attribute (``attribute`` or ``key``)."""
    if entry is None:
        return None
    if isinstance(entry, Mapping):
        return entry.get(key)
    return getattr(entry, attribute or key, None)
