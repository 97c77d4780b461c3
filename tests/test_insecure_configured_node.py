"""What a Talos user replaying the docs meets on a configured node: ``apply-config --insecure`` /
``disks --insecure`` say that the node's TLS refused a client without a certificate (Talos's client
reports "tls: certificate required") and what to do, instead of a bare "connection lost".

The servers are asyncio TLS listeners on 127.0.0.1 (as Ichor's apid, which closes a refused
connection without the alert a Go server sends); each is closed in ``finally``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from google.protobuf import empty_pb2

from ichor.client import Client, ClientCertificateRequiredError, ConnectionLostError
from ichor.client._channel import CallContext, FailoverChannel
from ichor.client._endpoints import parse_endpoint
from ichor.client._tls import insecure_ssl_context
from ichor.machinery.clientconfig import GlobalOptions
from ichor.machinery.pki import load_into_ssl_context, new_ed25519_ca, new_keypair

TIMEOUT = 10.0


def _server_context(*, client_ca: bool) -> ssl.SSLContext:
    ca = new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    cert = new_keypair(ca, common_name="node", ttl=timedelta(days=1), server=True, client=False,
                       ip_addresses=["127.0.0.1"])  # fmt: skip
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_into_ssl_context(ctx, cert.crt, cert.key)
    ctx.set_alpn_protocols(["h2"])
    if client_ca:  # a configured node: only clients with a certificate of its cluster
        ctx.load_verify_locations(cadata=ca.crt.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


@asynccontextmanager
async def _tls_server(ctx: ssl.SSLContext, greeting: bytes) -> AsyncIterator[str]:
    """A listener that sends ``greeting`` (an HTTP/2 server's first bytes) to a client it accepts."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(greeting)
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(30):
            await scenario()

    asyncio.run(bounded())


_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty HTTP/2 SETTINGS frame


def test_insecure_call_to_a_configured_node_says_tls_refused_it_and_what_to_do() -> None:
    async def scenario() -> None:
        async with (
            _tls_server(_server_context(client_ca=True), _SETTINGS) as node,
            Client.from_options(GlobalOptions(nodes=[node]), insecure=True) as client,
        ):
            with pytest.raises(ClientCertificateRequiredError) as failed:
                async with asyncio.timeout(TIMEOUT):
                    await client.with_node(node).machine.Version(empty_pb2.Empty())
        error = failed.value
        assert str(error) == (
            'rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: '
            'remote error: tls: certificate required"'
        )
        assert isinstance(error, ConnectionLostError) and error.code_name == "Unavailable"
        hint = error.hint or ""
        assert "127.0.0.1 is configured, not in maintenance mode" in hint and "Drop --insecure" in hint
        assert "may be refusing" not in hint

    _run(scenario)


@pytest.mark.parametrize(("client_ca", "refused"), [(True, True), (False, False)])
def test_the_probe_tells_a_refusal_from_a_node_that_answers(client_ca: bool, refused: bool) -> None:
    async def scenario() -> None:
        async with _tls_server(_server_context(client_ca=client_ca), _SETTINGS) as node:
            endpoint = parse_endpoint(node)
            channel = FailoverChannel(
                [endpoint], insecure_ssl_context(), call=CallContext(insecure=True), connect_timeout=3
            )
            try:
                assert await channel.client_certificate_required(endpoint) is refused
            finally:
                await channel.aclose()

    _run(scenario)


def test_a_node_that_is_gone_is_not_called_a_refusal() -> None:
    async def scenario() -> None:
        async with _tls_server(_server_context(client_ca=True), b"") as node:
            endpoint = parse_endpoint(node)
        channel = FailoverChannel(
            [endpoint], insecure_ssl_context(), call=CallContext(insecure=True), connect_timeout=3
        )
        assert await channel.client_certificate_required(endpoint) is False

    _run(scenario)
