"""The connection half of :class:`~ichor.etcd.EtcdClient`: endpoints, the TLS context and failover.

:class:`_Connection` dials endpoints in order from the one that last answered, skips those it cannot
connect to, and turns what went wrong into :mod:`ichor.etcd` errors (:func:`translate_grpc_error`).
It sends no etcd request of its own: the KV, Cluster and Maintenance calls are in ``_client``.
"""

from __future__ import annotations

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_TIMEOUT", "parse_endpoint", "translate_grpc_error"]

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

from grpclib.client import Channel
from grpclib.const import Status as GRPCStatus
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.protocol import H2Protocol

from ichor.etcd._errors import (
    EtcdConfigError,
    EtcdError,
    EtcdLearnerNotReadyError,
    EtcdNoSpaceError,
    EtcdNotFoundError,
    EtcdNotLeaderError,
    EtcdRequestError,
    EtcdTLSError,
    EtcdTooManyLearnersError,
    EtcdUnavailableError,
)
from ichor.machinery.errors import PKIError
from ichor.machinery.pki import load_into_ssl_context

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 3.0


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``https://10.5.0.2:2379`` (or ``10.5.0.2:2379``, ``[::1]:2379``) -> ``(host, port)``."""
    text = endpoint if "://" in endpoint else f"https://{endpoint}"
    parts = urlsplit(text)
    if parts.scheme != "https":
        raise EtcdConfigError(
            f"etcd endpoint {endpoint!r} is not https",
            hint="Talos's etcd only accepts mutual TLS: use https://<address>:2379",
        )
    try:
        port = parts.port or 2379
    except ValueError:
        port = -1
    if not parts.hostname or port <= 0:
        raise EtcdConfigError(
            f"invalid etcd endpoint {endpoint!r}", hint="endpoints look like https://10.5.0.2:2379"
        )
    return parts.hostname, port


# etcd's error texts (rpctypes) -> our errors and what to do about them.
_KNOWN_ERRORS: tuple[tuple[str, type[EtcdRequestError], str], ...] = (
    ("member not found", EtcdNotFoundError, "check the member ID against the current member list"),
    (
        "can only promote a learner member which is in sync with leader",
        EtcdLearnerNotReadyError,
        "the learner has not caught up with the leader yet: retry the promotion in a few seconds",
    ),
    (
        "too many learner members in cluster",
        EtcdTooManyLearnersError,
        "promote or remove the existing learner member before adding another",
    ),
    ("not leader", EtcdNotLeaderError, "send the request to the current leader"),
    (
        "database space exceeded",
        EtcdNoSpaceError,
        "defragment the members, then disarm the NOSPACE alarm",
    ),
)
_UNAVAILABLE_TEXTS = ("no leader", "request timed out", "leader changed", "unhealthy cluster", "timed out")


def translate_grpc_error(exc: GRPCError, *, what: str, endpoint: str) -> EtcdError:
    """The :mod:`ichor.etcd` error for a gRPC error etcd answered ``what`` with."""
    text = exc.message or exc.status.name
    message = f"{what} failed ({endpoint}): {text}"
    for needle, cls, hint in _KNOWN_ERRORS:
        if text.endswith(needle):
            return cls(message, status=exc.status.name, etcd_message=text, hint=hint)
    if exc.status in (GRPCStatus.UNAVAILABLE, GRPCStatus.DEADLINE_EXCEEDED) or any(
        t in text for t in _UNAVAILABLE_TEXTS
    ):
        return EtcdUnavailableError(message, hint="etcd may have lost quorum: check that most members are up")
    return EtcdRequestError(message, status=exc.status.name, etcd_message=text)


def _describe_connect_failure(exc: BaseException, timeout: float) -> tuple[str, bool]:
    """(reason, is_tls) for a failed connection attempt."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"tls: the server certificate is not trusted: {exc.verify_message}", True
    if isinstance(exc, ssl.SSLError):
        return f"tls handshake failed: {exc.reason or exc}", True
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g}s", False
    if isinstance(exc, ConnectionResetError):
        return "connection reset during the TLS handshake", True
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:], False
    return str(exc) or type(exc).__name__, False


class _Channel(Channel):
    """A grpclib channel that aborts its TLS transport on close.

    A graceful TLS close waits for the peer's close_notify in later loop turns; an event loop
    that ends right after ``close()`` (``asyncio.run``) would leak the socket. etcd loses nothing
    when we drop a connection with no call in flight.
    """

    _transport: asyncio.Transport | None = None

    async def _create_connection(self) -> H2Protocol:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(
            self._protocol_factory, self._host, self._port, ssl=self._ssl
        )
        assert isinstance(transport, asyncio.Transport) and isinstance(protocol, H2Protocol)
        self._transport = transport
        return protocol

    def close(self) -> None:
        super().close()
        if self._transport is not None:
            self._transport.abort()
            self._transport = None


class _Connection:
    """Endpoints, TLS and failover for :class:`~ichor.etcd.EtcdClient` (its base class)."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        ca: bytes,
        cert: bytes,
        key: bytes,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        if not endpoints:
            raise EtcdConfigError("no etcd endpoints given", hint="pass at least one https://<address>:2379")
        self._endpoints = list(dict.fromkeys(endpoints))
        self._addresses = {ep: parse_endpoint(ep) for ep in self._endpoints}
        self._ssl = self._ssl_context(ca, cert, key)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._channels: dict[str, _Channel] = {}
        self._current = 0

    @staticmethod
    def _ssl_context(ca: bytes, cert: bytes, key: bytes) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
            raise EtcdConfigError(
                f"cannot load the etcd CA certificate: {exc}", hint="pass the PEM of cluster.etcd.ca.crt"
            ) from None
        try:
            load_into_ssl_context(ctx, cert, key)
        except (PKIError, ssl.SSLError) as exc:
            raise EtcdConfigError(
                f"cannot load the etcd client certificate: {exc}",
                hint="pass a PEM certificate and its private key issued by the etcd CA",
            ) from None
        ctx.set_alpn_protocols(["h2"])
        return ctx

    @property
    def endpoints(self) -> list[str]:
        return list(self._endpoints)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    # --- plumbing ---------------------------------------------------------------------------------

    def _drop(self, endpoint: str) -> None:
        channel = self._channels.pop(endpoint, None)
        if channel is not None:
            channel.close()

    async def _connect(self, endpoint: str) -> _Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            host, port = self._addresses.get(endpoint) or parse_endpoint(endpoint)
            channel = _Channel(host, port, ssl=self._ssl)
            self._channels[endpoint] = channel
        try:
            async with asyncio.timeout(self._connect_timeout):
                await channel.__connect__()
        except BaseException:
            self._drop(endpoint)
            raise
        return channel

    def _dial_order(self) -> list[str]:
        return self._endpoints[self._current :] + self._endpoints[: self._current]

    async def _call(
        self,
        what: str,
        fn: Callable[[Channel], Awaitable[T]],
        *,
        endpoint: str | None = None,
        timeout: float | None = None,
    ) -> T:
        targets = [endpoint] if endpoint is not None else self._dial_order()
        failures: list[str] = []
        tls_failures = 0
        for ep in targets:
            try:
                channel = await self._connect(ep)
            except (OSError, TimeoutError) as exc:
                reason, is_tls = _describe_connect_failure(exc, self._connect_timeout)
                failures.append(f"{ep}: {reason}")
                tls_failures += is_tls
                continue
            if ep in self._endpoints:
                self._current = self._endpoints.index(ep)
            limit = self._timeout if timeout is None else timeout
            try:
                async with asyncio.timeout(limit):
                    return await fn(channel)
            except GRPCError as exc:
                raise translate_grpc_error(exc, what=what, endpoint=ep) from None
            except TimeoutError:
                raise EtcdUnavailableError(
                    f"{what} failed ({ep}): no answer within {limit:g}s",
                    hint="etcd may be overloaded or without quorum; retry with a longer timeout",
                ) from None
            except (StreamTerminatedError, OSError) as exc:
                self._drop(ep)
                raise EtcdUnavailableError(
                    f"{what} failed ({ep}): connection lost: {exc}",
                    hint="the etcd member stopped or closed the connection; retry",
                ) from None
        detail = "; ".join(failures)
        if tls_failures == len(failures):
            raise EtcdTLSError(
                f"{what} failed: TLS with every etcd endpoint failed: {detail}",
                hint="the client certificate must be issued by the cluster's etcd CA (cluster.etcd.ca), "
                "and the CA given must be the one that signed etcd's server certificate",
            )
        raise EtcdUnavailableError(
            f"{what} failed: no etcd endpoint is reachable: {detail}",
            hint="check that etcd is running on the control-plane nodes and listening on port 2379",
        )
