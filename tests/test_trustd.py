"""trustd over real TLS on loopback: the token gates certificates, and no roles can be obtained."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ichor.machined import _certs, trustd
from ichor.machinery import pki


def _serve_and_request(
    token_offered: str, *, organizations: list[str] | None = None
) -> tuple[pki.CertKey, bytes]:
    address = f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
    ca = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
    certs = _certs.issue_api_certificates(ca, address=address, hostname="cp-1")
    service = trustd.SecurityService(ca, "abcdef.0123456789abcdef", certs.accepted_cas)

    async def go() -> tuple[pki.CertKey, bytes]:
        server = asyncio.create_task(trustd.serve(address, certs.server, service, port=50001))
        try:
            for _ in range(50):
                await asyncio.sleep(0.02)
                try:
                    return await trustd.request_server_certificate(
                        [address], os_ca_crt=ca.crt, token=token_offered, hostname="worker-1", address="127.9.9.9",
                        timeout=2,
                    )  # fmt: skip
                except ConnectionError as exc:
                    if "invalid token" in str(exc):
                        raise
            raise AssertionError("trustd did not come up")
        finally:
            server.cancel()
            with pytest.raises(asyncio.CancelledError):
                await server

    return asyncio.run(asyncio.wait_for(go(), 20))


def test_right_token_gets_a_server_certificate_without_roles() -> None:
    pair, accepted = _serve_and_request("abcdef.0123456789abcdef")
    cert = x509.load_pem_x509_certificate(pair.crt)
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "worker-1"
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "worker-1" in sans.get_values_for_type(x509.DNSName)
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc) <= timedelta(hours=24, minutes=1)
    assert b"BEGIN CERTIFICATE" in accepted
    pair.check_pair()


def test_wrong_token_is_refused() -> None:
    with pytest.raises(ConnectionError, match="invalid token"):
        _serve_and_request("wrong0.0000000000000000")
