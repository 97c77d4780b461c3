"""TLS for apid: the server side of :50000 and the client side of the hop to another node.

Talos's policy: client certificate required and verified against the accepted OS CAs, TLS 1.2 at
least (in practice 1.3), session tickets off, ALPN ``h2``. With the ``apidCheckExtKeyUsage``
feature a non-CA client certificate must carry exactly the ``ClientAuth`` extended key usage;
Go checks that during the handshake, so here a refused certificate fails the handshake too.

Key pairs are loaded with :func:`ichor.machinery.pki.load_into_ssl_context` (keys never touch disk).

A refused handshake sends its TLS alert before the connection closes (:class:`AlertingServer`): a
client without a certificate (``apply-config --insecure`` against a configured node) then reads
TLS 1.3's ``certificate_required``, and Talos's Go client says ``remote error: tls: certificate
required``, as against Talos's apid. asyncio's own TLS server drops the alert OpenSSL wrote and
resets the connection, which Go reports as ``EOF``/``connection reset by peer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from asyncio import sslproto
from collections.abc import Sequence
from typing import Any, cast

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpclib.protocol import H2Protocol
from grpclib.server import Server

from ichor.machinery.pki import CertKey, load_into_ssl_context

log = logging.getLogger(__name__)

# Talos's only TLS 1.2 suite (siderolabs/crypto defaults); TLS 1.3 suites are not configurable.
_TLS12_CIPHERS = "ECDHE-ECDSA-AES256-GCM-SHA384"


def ext_key_usage_problem(der: bytes) -> str | None:
    """Why a client certificate fails apid's ext-key-usage check, or ``None`` if it passes."""
    cert = x509.load_der_x509_certificate(der)
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return None
    except x509.ExtensionNotFound:
        pass
    try:
        usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = []
    if usages == [ExtendedKeyUsageOID.CLIENT_AUTH]:
        return None
    names = ", ".join(getattr(u, "_name", u.dotted_string) for u in usages) or "none"
    return (
        f"client certificate {cert.subject.rfc4514_string()!r} has extended key usage [{names}], "
        "want exactly [clientAuth]"
    )


class _ExtKeyUsageChecking(ssl.SSLObject):
    def do_handshake(self) -> None:
        super().do_handshake()
        der = self.getpeercert(binary_form=True)
        problem = ext_key_usage_problem(der) if der else None
        if problem is not None:
            log.warning("apid: refused TLS client: %s", problem)
            raise ssl.SSLError(ssl.SSL_ERROR_SSL, f"apid ext key usage check failed: {problem}")


def _load_chain(ctx: ssl.SSLContext, pair: CertKey) -> None:
    load_into_ssl_context(ctx, pair.crt, pair.key)


def _ca_data(cas: Sequence[bytes]) -> str:
    if not cas:
        raise ValueError("apid needs at least one accepted CA")
    return "\n".join(pem.decode("ascii").strip() for pem in cas) + "\n"


def server_context(
    server: CertKey, accepted_cas: Sequence[bytes], *, check_ext_key_usage: bool
) -> ssl.SSLContext:
    """TLS server context for apid's :50000 listener."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(_TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_TICKET
    # Go's SessionTicketsDisabled sends no TLS 1.3 ticket either (OpenSSL would send stateful ones):
    # no session outlives a change of the accepted CAs by resumption, past the client's certificate.
    ctx.num_tickets = 0
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=_ca_data(accepted_cas))
    _load_chain(ctx, server)
    ctx.set_alpn_protocols(["h2"])
    if check_ext_key_usage:
        ctx.sslobject_class = _ExtKeyUsageChecking
    return ctx


def reload_context(ctx: ssl.SSLContext, pair: CertKey, accepted_cas: Sequence[bytes]) -> None:
    """Give ``ctx`` a new key pair and trust ``accepted_cas`` too, from its next handshake on."""
    ctx.load_verify_locations(cadata=_ca_data(accepted_cas))
    _load_chain(ctx, pair)


class ServerContexts:
    """apid's listener context, whose certificate and accepted CAs can change while it listens.

    An ``SSLContext``'s trust store only grows (OpenSSL cannot forget a CA), yet the last step of a
    CA rotation (``talosctl rotate-ca``) drops the old CA from ``machine.acceptedCAs`` and from then
    on its client certificates must be refused. So :attr:`listener` (what the server listens with)
    switches each handshake, in its SNI callback (OpenSSL calls it with or without a server name,
    before it checks the client's certificate), to :attr:`current`, a context built whole for the
    current certificate and CAs; :meth:`reload` replaces that one. Open connections keep theirs.
    """

    def __init__(self, server: CertKey, accepted_cas: Sequence[bytes], *, check_ext_key_usage: bool) -> None:
        self._check_ext_key_usage = check_ext_key_usage
        self.current = server_context(server, accepted_cas, check_ext_key_usage=check_ext_key_usage)
        self.listener = server_context(server, accepted_cas, check_ext_key_usage=check_ext_key_usage)
        self.listener.sni_callback = self._switch

    def _switch(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        connection.context = self.current

    def reload(self, server: CertKey, accepted_cas: Sequence[bytes]) -> None:
        """Serve ``server`` and trust exactly ``accepted_cas`` from the next handshake on."""
        self.current = server_context(server, accepted_cas, check_ext_key_usage=self._check_ext_key_usage)


def client_context(client: CertKey, accepted_cas: Sequence[bytes]) -> ssl.SSLContext:
    """TLS client context for dialling another node's apid with this node's client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the server and its SAN
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cadata=_ca_data(accepted_cas))
    _load_chain(ctx, client)
    ctx.set_alpn_protocols(["h2"])
    return ctx


REFUSED_LINGER = 2.0
"""Seconds a refused connection stays open for reading after its alert and FIN (see below)."""


class _AlertingSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS server side, but a refused handshake ends as Go's does, readable by the peer:
    the alert OpenSSL wrote is sent, then a FIN, and what the peer still sends (Go's client has
    its HTTP/2 preface and first request on the way) is read and dropped until it closes or
    :data:`REFUSED_LINGER` passes. asyncio drops the alert and closes at once, and a close with
    unread data is a TCP reset, which makes the peer's next write fail (``broken pipe``) before it
    reads anything."""

    _refused = False
    lingering: set[asyncio.Transport] | None = None
    """The server's refused connections still open: closing the server aborts them."""

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        transport = cast("asyncio.Transport | None", self._transport)
        if handshake_exc is None or transport is None or transport.is_closing():
            super()._on_handshake_complete(handshake_exc)
            return
        timeout = cast("asyncio.TimerHandle | None", self._handshake_timeout_handle)  # type: ignore[has-type]
        if timeout is not None:
            timeout.cancel()
            self._handshake_timeout_handle = None
        self._refused = True
        self._set_state(sslproto.SSLProtocolState.UNWRAPPED)  # type: ignore[attr-defined]  # CPython's
        with contextlib.suppress(Exception):  # a peer already gone: nothing to tell it
            self._process_outgoing()  # type: ignore[attr-defined]  # CPython's, not in typeshed
            transport.write_eof()
        lingering = self.lingering if self.lingering is not None else set()
        lingering.add(transport)

        def done() -> None:
            lingering.discard(transport)
            transport.abort()

        self._loop.call_later(REFUSED_LINGER, done)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.lingering is not None and self._transport is not None:
            self.lingering.discard(cast("asyncio.Transport", self._transport))
        super().connection_lost(exc)

    def buffer_updated(self, nbytes: int) -> None:
        if not self._refused:
            super().buffer_updated(nbytes)


class AlertingServer(Server):
    """grpclib's server over TLS whose refused handshakes send their alert (see the module doc).

    Start it with ``start(sock=...)`` and no ``ssl``: each accepted connection gets its own TLS
    layer from ``tls`` (reloading ``tls`` in place changes the next handshakes, as before)."""

    def __init__(self, *args: Any, tls: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tls = tls
        self._lingering: set[asyncio.Transport] = set()

    def close(self) -> None:
        """Stop listening, as grpclib's, and drop the refused connections still draining."""
        super().close()
        for transport in list(self._lingering):
            transport.abort()
        self._lingering.clear()

    def _protocol_factory(self) -> Any:  # an asyncio protocol wrapping grpclib's H2Protocol
        app: H2Protocol = super()._protocol_factory()
        loop = asyncio.get_running_loop()
        no_waiter = cast("asyncio.Future[Any]", None)  # nobody awaits the handshake: SSLProtocol allows None
        protocol = _AlertingSSLProtocol(loop, app, self._tls, no_waiter, server_side=True)
        protocol.lingering = self._lingering
        return protocol
