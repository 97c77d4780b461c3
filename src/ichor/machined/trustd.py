"""trustd: how workers get a Talos API server certificate without holding the OS CA key.

A control plane serves ``securityapi.SecurityService/Certificate`` on ``<address>:50001`` over
server-only TLS (its certificate is signed by the OS CA). A caller proves it belongs to the cluster
with the ``token`` metadata (``machine.token``); trustd strips any Organization from the CSR (no
roles can be obtained this way) and signs a ServerAuth certificate valid for 24 hours, returning it
with the accepted CAs (architecture spec §7). A worker calls :func:`request_server_certificate`.
"""

from __future__ import annotations

import asyncio
import hmac
import ssl
from collections.abc import Sequence
from typing import Any

from cryptography import x509
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.security import security_grpc, security_pb2
from ichor.api.limits import limit_requests
from ichor.machined._certs import API_CERT_TTL
from ichor.machined.server._codec import grpc_server
from ichor.machinery import pki
from ichor.machinery.errors import PKIError

TRUSTD_PORT = 50001


class SecurityService(security_grpc.SecurityServiceBase):
    def __init__(self, os_ca: pki.CertKey, token: str, accepted_cas: Sequence[bytes]) -> None:
        self.update(os_ca, token, accepted_cas)

    def update(self, os_ca: pki.CertKey, token: str, accepted_cas: Sequence[bytes]) -> None:
        """Sign with ``os_ca`` and answer with ``accepted_cas`` from the next request on (Talos's
        trustd reads ``OSRootSecrets`` at each request: a CA rotation swaps the issuing CA)."""
        self._ca = os_ca
        self._token = token
        self._accepted = b"".join(accepted_cas)

    async def Certificate(self, stream: Stream[Any, Any]) -> None:
        offered = stream.metadata.get("token", "") if stream.metadata else ""
        if isinstance(offered, bytes):
            offered = offered.decode(errors="replace")
        if not self._token or not hmac.compare_digest(str(offered), self._token):
            raise GRPCError(Status.UNAUTHENTICATED, "invalid token")
        request = await stream.recv_message()
        assert request is not None
        try:
            csr = pki.load_csr(request.csr)
        except PKIError as exc:
            raise GRPCError(Status.INVALID_ARGUMENT, f"failed to parse CSR: {exc}") from None
        cn = csr.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
        try:
            # organizations=[] drops any O from the CSR: no roles can be obtained through trustd.
            crt = pki.issue_certificate(
                self._ca, csr, organizations=[], common_name=str(cn[0].value) if cn else None,
                ttl=API_CERT_TTL, server=True, client=False,
            )  # fmt: skip
        except PKIError as exc:  # a bad signature, a subject X.509 cannot carry
            raise GRPCError(Status.INVALID_ARGUMENT, f"failed to sign CSR: {exc}") from None
        await stream.send_message(security_pb2.CertificateResponse(ca=self._accepted, crt=crt))


def server_context(cert: pki.CertKey) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    pki.load_into_ssl_context(ctx, cert.crt, cert.key)
    ctx.set_alpn_protocols(["h2"])
    return ctx


async def serve(
    address: str, cert: pki.CertKey | ssl.SSLContext, service: SecurityService, port: int = TRUSTD_PORT
) -> None:
    """Serve until cancelled; ``cert`` may be a :func:`server_context` its owner reloads in place."""
    server = grpc_server(limit_requests([service]))
    await server.start(address, port, ssl=cert if isinstance(cert, ssl.SSLContext) else server_context(cert))
    try:
        await asyncio.Event().wait()
    finally:
        server.close()
        await server.wait_closed()


async def request_server_certificate(
    endpoints: Sequence[str],
    *,
    os_ca_crt: bytes,
    token: str,
    hostname: str,
    address: str,
    port: int = TRUSTD_PORT,
    timeout: float = 10.0,
) -> tuple[pki.CertKey, bytes]:
    """Ask the control planes' trustd for a server certificate; returns it and the accepted CAs.

    Tries each endpoint in turn; raises ``ConnectionError`` naming every endpoint tried and why.
    """
    key = pki.new_ed25519_key()
    csr = pki.new_csr(key, common_name=hostname, dns_names=[hostname], ip_addresses=[address])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=os_ca_crt.decode("ascii"))
    ctx.set_alpn_protocols(["h2"])
    failures: list[str] = []
    for host in endpoints:
        channel = Channel(host, port, ssl=ctx)
        try:
            async with asyncio.timeout(timeout):
                reply = await security_grpc.SecurityServiceStub(channel).Certificate(
                    security_pb2.CertificateRequest(csr=csr), metadata={"token": token}
                )
            return pki.CertKey(reply.crt, key), reply.ca
        except (OSError, TimeoutError, GRPCError, ssl.SSLError) as exc:
            failures.append(f"{host}:{port}: {exc}")
        finally:
            channel.close()
    raise ConnectionError("trustd: no control plane issued a certificate: " + "; ".join(failures))
