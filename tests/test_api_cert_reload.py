"""A re-issued API certificate is served without a restart: apid and trustd take it in place.

A metal node booted from its disk has no ``ip=``: apid starts before DHCP gives the node its
address, with a certificate naming only ``0.0.0.0`` and the hostname. When the address comes,
``CertSANs`` and ``ApiCertificates`` change; apid and trustd must serve the new certificate, or
every client that checks the node's address (talosctl, a worker asking trustd) is refused forever.
"""

from __future__ import annotations

import asyncio
import io
import random
import ssl
from datetime import timedelta
from pathlib import Path

import pytest

from ichor.machined import _certs, trustd
from ichor.machined.apid import Apid
from ichor.machined.cosi import State
from ichor.machined.resources import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    ApiCertificatesSpec,
    PEMCertificate,
    PEMCertificateAndKey,
)
from ichor.machined.services._certwatch import follow_api_certificates
from ichor.machinery import pki


def _address() -> str:
    return f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"


def _spec(certs: _certs.ApiCertificates) -> ApiCertificatesSpec:
    return ApiCertificatesSpec(
        accepted_cas=tuple(PEMCertificate(c) for c in certs.accepted_cas),
        client=PEMCertificateAndKey(certs.client.crt, certs.client.key) if certs.client else None,
        server=PEMCertificateAndKey(certs.server.crt, certs.server.key),
    )


async def _handshake(address: str, port: int, ca: pki.CertKey) -> None:
    """A TLS handshake as talosctl's: the node's certificate must name ``address``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca.crt.decode())
    ctx.set_alpn_protocols(["h2"])
    _, writer = await asyncio.wait_for(asyncio.open_connection(address, port, ssl=ctx), 5)
    writer.close()
    try:
        await writer.wait_closed()
    except ssl.SSLError as exc:  # apid's alert to a client without a certificate, after the handshake
        assert "CERTIFICATE_REQUIRED" in str(exc), exc


def test_apid_serves_a_reissued_certificate_to_the_next_handshake(tmp_path: Path) -> None:
    address = _address()
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    before = _certs.issue_api_certificates(ca, address="0.0.0.0", hostname="cp-1")
    after = _certs.issue_api_certificates(ca, address="0.0.0.0", hostname="cp-1", cert_sans=[address])

    async def go() -> None:
        apid = Apid(
            address=address, machined_socket=tmp_path / "machined.sock", server_cert=before.server,
            accepted_cas=before.accepted_cas, client_cert=before.client, port=0,
        )  # fmt: skip
        await apid.start()
        try:
            with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
                await _handshake(address, apid.port, ca)
            assert after.client is not None
            apid.reload_certificates(after.server, after.accepted_cas, after.client)
            await _handshake(address, apid.port, ca)
        finally:
            await apid.close()

    asyncio.run(go())


def test_trustd_serves_a_reissued_certificate_from_a_context_reloaded_in_place() -> None:
    address = _address()
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    before = _certs.issue_api_certificates(ca, address="0.0.0.0", hostname="cp-1")
    after = _certs.issue_api_certificates(ca, address=address, hostname="cp-1")
    service = trustd.SecurityService(ca, "abcdef.0123456789abcdef", before.accepted_cas)
    context = trustd.server_context(before.server)

    async def request() -> pki.CertKey:
        cert, _ = await trustd.request_server_certificate(
            [address], os_ca_crt=ca.crt, token="abcdef.0123456789abcdef", hostname="w-1", address="127.9.9.9",
            timeout=2,
        )  # fmt: skip
        return cert

    async def go() -> None:
        server = asyncio.create_task(trustd.serve(address, context, service, port=50001))
        try:
            for _ in range(100):
                await asyncio.sleep(0.02)
                try:
                    await request()
                except ConnectionError as exc:
                    if "IP address mismatch" in str(exc):
                        break
            else:
                raise AssertionError("trustd never answered with its first certificate")
            pki.load_into_ssl_context(context, after.server.crt, after.server.key)
            assert b"CERTIFICATE" in (await request()).crt
        finally:
            server.cancel()

    asyncio.run(go())


def test_follow_hands_over_each_changed_certificate_and_skips_the_current_one() -> None:
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    first = _spec(_certs.issue_api_certificates(ca, address="0.0.0.0", hostname="cp-1"))
    second = _spec(_certs.issue_api_certificates(ca, address="10.5.0.2", hostname="cp-1"))
    seen: list[ApiCertificatesSpec] = []
    log = io.StringIO()

    async def go() -> None:
        state = State()
        state.create(API_CERTIFICATES.new(API_CERTIFICATES_ID, first))
        follower = asyncio.create_task(follow_api_certificates(state, first, seen.append, log))
        await asyncio.sleep(0.05)
        assert seen == []
        current = state.get(API_CERTIFICATES.default_namespace, API_CERTIFICATES, API_CERTIFICATES_ID)
        state.update(current.with_spec(second))
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        follower.cancel()

    asyncio.run(go())
    assert seen == [second]
    assert "re-issued" in log.getvalue()
