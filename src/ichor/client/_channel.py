"""A grpclib channel over several endpoints: shuffled order, failover, TLS checks, errors a user can act on.

grpclib dials one host lazily, when a call first needs the connection; this channel overrides that
one step (``_create_connection``) to walk the endpoints and to check what the handshake gave us, and
wraps call streams so gRPC failures leave as :class:`~ichor.client.RPCError`. Everything else is
grpclib's own, so generated ``*Stub`` classes work unchanged. It does not know talosconfig files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

from cryptography import x509
from grpclib.client import Channel, Stream
from grpclib.const import Cardinality, Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.metadata import Deadline
from grpclib.protocol import H2Protocol
from multidict import MultiDict

from ichor.client._endpoints import Endpoint
from ichor.client._errors import (
    CertificateNameError,
    ClientCertificateRequiredError,
    ConnectionFailedError,
    ConnectionLostError,
    EndpointFailure,
    EndpointUnreachableError,
    FingerprintMismatchError,
    MaintenanceModeError,
    NoForwardingError,
    PermissionDeniedError,
    RPCError,
    TLSError,
    UnknownAuthorityError,
    roles_for,
)
from ichor.client._tls import GRPC_MAX_MESSAGE_SIZE, spki_fingerprint
from ichor.machinery.constants import MAINTENANCE_CN, NO_FORWARDING

# OpenSSL X509_V_ERR_* codes (ssl.SSLCertVerificationError.verify_code).
_UNKNOWN_AUTHORITY_CODES = {2, 7, 18, 19, 20, 21}
_NAME_CODES = {62, 64}
_EXPIRED_CODES = {9, 10}
_PROBE_TIMEOUT = 3.0


class _LimitedCodec(ProtoCodec):
    """Protobuf, refusing replies over talosctl's 32 MiB receive limit with grpc-go's status."""

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > GRPC_MAX_MESSAGE_SIZE:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"grpc: received message larger than max ({len(data)} vs. {GRPC_MAX_MESSAGE_SIZE})",
            )
        return super().decode(data, message_type)


@dataclass
class CallContext:
    """What error messages need to know about the caller."""

    context_name: str | None = None
    roles: list[str] = field(default_factory=list)
    trusted_ca_pem: bytes = b""
    endpoints_source: str = ""
    """Where the endpoints came from, for hints (e.g. ``context 'x'`` or ``-e/--endpoints``)."""
    insecure: bool = False


def translate_error(exc: BaseException, *, method: str | None, call: CallContext) -> RPCError:
    """The :class:`RPCError` for a grpclib failure of a call to ``method``."""
    if isinstance(exc, GRPCError):
        message = exc.message or ""
        if exc.status is Status.PERMISSION_DENIED and message == NO_FORWARDING:
            return NoForwardingError(message, method=method, endpoints_source=call.endpoints_source)
        if exc.status is Status.PERMISSION_DENIED:
            return PermissionDeniedError(
                message,
                method=method,
                roles_needed=roles_for(method) if method and not call.insecure else (),
                roles_held=call.roles,
                context=call.context_name,
            )
        return RPCError(exc.status.value, message, method=method)
    hint = "the node may be rebooting; if every call fails like this, the node may be refusing " + (
        f"the client certificate of context {call.context_name!r} (issued by another cluster's CA, or expired)"
        if call.context_name
        else "this client"
    )
    detail = str(exc)
    text = "connection lost" if detail.lower() in ("", "connection lost") else f"connection lost: {detail}"
    return ConnectionLostError(Status.UNAVAILABLE.value, text, method=method, hint=hint)


class _TranslatingStream(Stream[Any, Any]):
    """A call stream whose gRPC failures leave the ``async with`` block as :class:`RPCError`."""

    _call: CallContext
    _failover: FailoverChannel

    async def _translate(self, exc: BaseException) -> RPCError:
        error = translate_error(exc, method=self._method_name, call=self._call)
        endpoint = self._failover.endpoint
        # Talos's client reports the TLS refusal; here the alert is lost under grpclib, so ask again.
        if (
            type(error) is ConnectionLostError
            and self._call.insecure
            and endpoint is not None
            and await self._failover.client_certificate_required(endpoint)
        ):
            return ClientCertificateRequiredError(endpoint.host, method=self._method_name)
        return error

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        try:
            await super().__aexit__(exc_type, exc_val, exc_tb)
        except (GRPCError, StreamTerminatedError) as exc:
            raise await self._translate(exc) from exc
        if isinstance(exc_val, GRPCError | StreamTerminatedError):
            raise await self._translate(exc_val) from exc_val


class FailoverChannel(Channel):
    """One HTTP/2 connection at a time to the first endpoint (in shuffled order) that answers.

    On a connection failure the next endpoint is tried, for unary calls and for opening streams
    alike; when all fail, the error lists each endpoint and why. ``fingerprints`` (maintenance mode)
    pins the leaf certificate's SPKI after the handshake.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        ssl_context: ssl.SSLContext,
        *,
        call: CallContext,
        connect_timeout: float,
        fingerprints: Sequence[str] = (),
        rng: random.Random | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("FailoverChannel needs at least one endpoint")
        order = list(endpoints)
        (rng or random.Random()).shuffle(order)
        codec = _LimitedCodec()
        super().__init__(order[0].host, order[0].port, ssl=ssl_context, codec=codec)
        self._order = order
        self._ssl_context = ssl_context
        self._call = call
        self._connect_timeout = connect_timeout
        self._fingerprints = tuple(fingerprints)
        self.endpoint: Endpoint | None = None
        """The endpoint of the current (or last) connection."""
        self._open: dict[asyncio.Future[None], asyncio.Transport] = {}
        """Each connection not yet lost: a future its protocol's ``connection_lost`` resolves."""

    @property
    def dial_order(self) -> list[Endpoint]:
        """Endpoints in the order the next connection attempt will try them."""
        if self.endpoint is None or self.endpoint not in self._order:
            return list(self._order)
        i = self._order.index(self.endpoint)
        return self._order[i:] + self._order[:i]

    def request(
        self,
        name: str,
        cardinality: Cardinality,
        request_type: type[Any],
        reply_type: type[Any],
        *,
        timeout: float | None = None,
        deadline: Deadline | None = None,
        metadata: Any = None,
    ) -> Stream[Any, Any]:
        stream = super().request(
            name, cardinality, request_type, reply_type, timeout=timeout, deadline=deadline, metadata=metadata
        )
        # Re-class rather than re-construct: Stream's constructor arguments are grpclib internals.
        stream.__class__ = _TranslatingStream
        cast(_TranslatingStream, stream)._call = self._call
        cast(_TranslatingStream, stream)._failover = self
        return stream

    async def _create_connection(self) -> H2Protocol:
        loop = asyncio.get_running_loop()
        failures: list[EndpointFailure] = []
        for ep in self.dial_order:
            try:
                async with asyncio.timeout(self._connect_timeout):
                    transport, protocol = await loop.create_connection(
                        self._protocol_factory,
                        ep.host,
                        ep.port,
                        ssl=self._ssl_context,
                        server_hostname=ep.host,
                    )
            except (OSError, TimeoutError) as exc:
                failures.append(await self._classify(exc, ep))
                continue
            self._track(transport, protocol)
            problem = self._check_pinning(transport, ep)
            if problem is not None:
                transport.abort()
                await asyncio.sleep(0)  # abort closes the socket in a callback: let it run
                failures.append(problem)
                continue
            self.endpoint = ep
            self._authority = ep.address
            assert isinstance(protocol, H2Protocol)
            return protocol
        raise self._all_failed(failures)

    def _track(self, transport: asyncio.Transport, protocol: asyncio.BaseProtocol) -> None:
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        original = protocol.connection_lost

        def connection_lost(exc: Exception | None) -> None:
            try:
                original(exc)
            finally:
                self._open.pop(lost, None)
                if not lost.done():
                    lost.set_result(None)

        protocol.connection_lost = connection_lost  # type: ignore[method-assign]
        self._open[lost] = transport

    async def aclose(self, grace: float = 1.0) -> None:
        """Close, then wait until every socket is closed (TLS closes in loop callbacks after ``close``).

        A peer that does not finish the TLS shutdown within ``grace`` seconds has its socket aborted.
        """
        self.close()
        if not self._open:
            return
        _, pending = await asyncio.wait(list(self._open), timeout=grace)
        for lost in pending:
            transport = self._open.get(lost)
            if transport is not None:
                transport.abort()
        if pending:
            await asyncio.wait(pending, timeout=grace)

    def _check_pinning(self, transport: asyncio.BaseTransport, ep: Endpoint) -> EndpointFailure | None:
        if not self._fingerprints:
            return None
        tls = transport.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        if not der:
            return EndpointFailure(ep.address, "no peer certificates found", "fingerprint")
        got = spki_fingerprint(der)
        if got in self._fingerprints:
            return None
        return EndpointFailure(
            ep.address,
            f"leaf peer certificate doesn't match the provided fingerprints: [{' '.join(self._fingerprints)}] "
            f"(the node presented {got})",
            "fingerprint",
            hint="the node's certificate is not the one pinned with --cert-fingerprint: check that you dial "
            "the machine you mean, and compare with the fingerprint shown on its console",
        )

    async def _classify(self, exc: BaseException, ep: Endpoint) -> EndpointFailure:
        if isinstance(exc, ssl.SSLCertVerificationError):
            code = exc.verify_code
            if code in _NAME_CODES:
                return await self._name_failure(ep)
            if code in _UNKNOWN_AUTHORITY_CODES:
                return await self._authority_failure(ep)
            if code in _EXPIRED_CODES:
                return EndpointFailure(
                    ep.address,
                    f"the server certificate is not valid now: {exc.verify_message}",
                    "tls",
                    hint="check the clock of this machine and of the node",
                )
            return EndpointFailure(ep.address, f"tls: {exc.verify_message or exc}", "tls")
        if isinstance(exc, ssl.SSLError):
            reason = exc.reason or str(exc)
            return EndpointFailure(
                ep.address,
                f"tls handshake failed: {reason}",
                "tls",
                hint="the endpoint must be a Talos API (port 50000) speaking TLS"
                if "WRONG_VERSION" in reason
                else "the node refused this client's TLS handshake (client certificate from another cluster?)",
            )
        if isinstance(exc, TimeoutError):
            return EndpointFailure(ep.address, f"timed out after {self._connect_timeout:g}s", "unreachable")
        if isinstance(exc, ConnectionResetError | ConnectionAbortedError):
            return EndpointFailure(
                ep.address,
                "connection closed during the TLS handshake",
                "tls",
                hint="the node may be refusing this client's certificate",
            )
        if isinstance(exc, socket.gaierror):
            return EndpointFailure(ep.address, f"lookup {ep.host}: {exc.strerror}", "unreachable")
        assert isinstance(exc, OSError)
        # asyncio's message repeats the address ("Connect call failed (...)"); the errno text is the news.
        reason = os.strerror(exc.errno) if exc.errno else str(exc) or type(exc).__name__
        return EndpointFailure(ep.address, reason[:1].lower() + reason[1:], "unreachable")

    async def _probe(self, ep: Endpoint) -> x509.Certificate | None:
        """The certificate the endpoint presents, fetched without verification, for error messages."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT):
                _, writer = await asyncio.open_connection(ep.host, ep.port, ssl=ctx, server_hostname=ep.host)
        except (OSError, TimeoutError):
            return None
        try:
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            return x509.load_der_x509_certificate(der) if der else None
        except ValueError:
            return None
        finally:
            writer.transport.abort()
            await asyncio.sleep(0)  # abort closes the socket in a callback: let it run

    async def client_certificate_required(self, ep: Endpoint) -> bool:
        """Whether ``ep``'s TLS refuses a client without a certificate, asked on a fresh connection
        with this channel's context (in a thread: asyncio's TLS transport drops the alert). A Go
        server sends TLS 1.3's ``certificate_required`` alert after the handshake; an asyncio one
        (Ichor's apid) closes the connection instead, before the HTTP/2 settings every gRPC server
        sends first. Either is the refusal; data or silence is not."""

        def ask() -> bool:
            try:
                with (
                    socket.create_connection((ep.host, ep.port), timeout=_PROBE_TIMEOUT) as raw,
                    self._ssl_context.wrap_socket(raw, server_hostname=ep.host) as tls,
                ):
                    return tls.version() == "TLSv1.3" and tls.recv(1) == b""
            except ssl.SSLError as exc:
                return "CERTIFICATE_REQUIRED" in (exc.reason or str(exc))
            except OSError:
                return False

        return await asyncio.to_thread(ask)

    async def _name_failure(self, ep: Endpoint) -> EndpointFailure:
        cert = await self._probe(ep)
        names: list[str] = []
        if cert is not None:
            with contextlib.suppress(x509.ExtensionNotFound):
                san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                names = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
                names += list(san.get_values_for_type(x509.DNSName))
        kind = "IP" if ep.is_ip else "DNS"
        if names:
            detail = f"certificate is valid for {', '.join(names)}, not {ep.host}"
        else:
            detail = f"certificate has no {kind} SAN for {ep.host}"
        return EndpointFailure(
            ep.address,
            f"x509: {detail}",
            "name",
            hint=f"connect through an address the node's certificate names (-e/--endpoints or "
            f"`talosctl config endpoint`), or add {ep.host} to machine.certSANs in the node's machine config",
        )

    async def _authority_failure(self, ep: Endpoint) -> EndpointFailure:
        where = (
            f"the talosconfig context {self._call.context_name!r}"
            if self._call.context_name
            else "this client"
        )
        hint = (
            f"the endpoint's CA differs from {where} CA: the talosconfig is probably from another cluster "
            "(mixing talosconfigs of different clusters, or secrets regenerated since); use this cluster's "
            "talosconfig (--talosconfig, --context), or check that the endpoint is the cluster you mean"
        )
        detail = ""
        cert = await self._probe(ep)
        if cert is not None and _common_name(cert) == MAINTENANCE_CN:
            return EndpointFailure(
                ep.address,
                "the node is in maintenance mode: it has no machine config yet and serves only the "
                "insecure maintenance API",
                "maintenance",
                hint=f"apply a machine config with `talosctl apply-config --insecure --nodes {ep.host} --file "
                "<config.yaml>` (a node that was just given one is rebooting into it: try again in a moment)",
            )
        if cert is not None:
            detail = f" (issued by {cert.issuer.rfc4514_string() or 'an empty subject'}"
            with contextlib.suppress(x509.ExtensionNotFound):
                aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
                if aki.key_identifier:
                    detail += f", CA key id {aki.key_identifier.hex()[:16]}"
            trusted = _key_id(self._call.trusted_ca_pem)
            if trusted:
                detail += f"; the context trusts CA key id {trusted}"
            detail += ")"
        return EndpointFailure(
            ep.address, f"x509: certificate signed by unknown authority{detail}", "unknown-authority", hint
        )

    def _all_failed(self, failures: list[EndpointFailure]) -> ConnectionFailedError:
        kinds = {f.kind for f in failures}
        if len(failures) == 1:
            message = f"cannot connect to {failures[0]}"
        else:
            message = "cannot connect to any endpoint:\n" + "\n".join(f"\t* {f}" for f in failures)
        hints = list(dict.fromkeys(f.hint for f in failures if f.hint))
        if "unreachable" in kinds:
            hints.append(self._unreachable_hint())
        hint = "; ".join(hints) or None
        if len(kinds) == 1:
            cls: type[ConnectionFailedError] = {
                "unreachable": EndpointUnreachableError,
                "unknown-authority": UnknownAuthorityError,
                "maintenance": MaintenanceModeError,
                "name": CertificateNameError,
                "fingerprint": FingerprintMismatchError,
                "tls": TLSError,
            }[kinds.pop()]
            return cls(message, failures, hint=hint)
        return ConnectionFailedError(message, failures, hint=hint)

    def _unreachable_hint(self) -> str:
        if self._call.insecure:
            return (
                "with --insecure talosctl dials the --nodes directly: check the node is up, in maintenance "
                "mode, and listening on port 50000"
            )
        source = f" (from {self._call.endpoints_source})" if self._call.endpoints_source else ""
        return (
            f"endpoints{source} are the addresses talosctl connects to (control plane nodes), --nodes the "
            "machines a command acts on; check the endpoints are up, or set others with "
            "`talosctl config endpoint <IP>` or -e/--endpoints"
        )


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def _key_id(ca_pem: bytes) -> str:
    """The first 16 hex digits of the (first) CA certificate's key id, or "" if unknown."""
    if not ca_pem:
        return ""
    try:
        cert = x509.load_pem_x509_certificate(ca_pem)
        ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except (ValueError, x509.ExtensionNotFound):
        return ""
    return ski.digest.hex()[:16]


class ScopedChannel:
    """A view of a :class:`FailoverChannel` that adds routing metadata (``nodes``/``node``) to every call.

    Generated stubs only call ``request()``, so they accept it in place of a grpclib Channel. Metadata
    a caller passes wins: a call given ``node`` or ``nodes`` drops the view's routing keys.
    """

    _ROUTING = ("node", "nodes")

    def __init__(self, channel: FailoverChannel, metadata: Sequence[tuple[str, str]]) -> None:
        self.channel = channel
        self.metadata = tuple(metadata)

    def request(
        self,
        name: str,
        cardinality: Cardinality,
        request_type: type[Any],
        reply_type: type[Any],
        *,
        timeout: float | None = None,
        deadline: Deadline | None = None,
        metadata: Any = None,
    ) -> Stream[Any, Any]:
        extra: list[tuple[str, str]]
        if metadata is None:
            extra = []
        elif isinstance(metadata, Mapping):
            extra = list(MultiDict(metadata).items())
        else:
            extra = list(metadata)
        keys = {k for k, _ in extra}
        base = [(k, v) for k, v in self.metadata if not (k in self._ROUTING and keys & set(self._ROUTING))]
        return self.channel.request(
            name,
            cardinality,
            request_type,
            reply_type,
            timeout=timeout,
            deadline=deadline,
            metadata=base + extra,
        )
