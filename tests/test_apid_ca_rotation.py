"""apid and trustd through a Talos API CA rotation (``talosctl rotate-ca``), without a restart.

Each step of the rotation re-issues ``ApiCertificates``; apid must trust exactly the accepted CAs of
the step from the next handshake on (a client certificate from the dropped CA refused at the end,
though an ``SSLContext`` can only add CAs), and trustd must sign with the issuing CA of the step.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from ichor.machined import _certs, trustd
from ichor.machined.apid import Apid
from ichor.machinery import pki

OLD = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
NEW = pki.new_ed25519_ca(organization="talos", ttl=timedelta(days=1))
TOKEN = "abcdef.0123456789abcdef"
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _address() -> str:
    return f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"


def _admin(ca: pki.CertKey) -> pki.CertKey:
    return pki.new_keypair(ca, organizations=["os:admin"], ttl=timedelta(hours=1), server=False, client=True)


async def _accepted(address: str, port: int, trusted: Sequence[bytes], client: pki.CertKey) -> bool:
    """Whether apid takes ``client``: with TLS 1.3 the server checks the client's certificate after
    the client's side of the handshake is done, so look for the HTTP/2 SETTINGS apid sends first."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata="".join(c.decode() for c in trusted))
    pki.load_into_ssl_context(ctx, client.crt, client.key)
    ctx.set_alpn_protocols(["h2"])
    reader, writer = await asyncio.wait_for(asyncio.open_connection(address, port, ssl=ctx), 5)
    try:
        writer.write(_H2_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        await writer.drain()
        return len(await asyncio.wait_for(reader.read(9), 5)) == 9
    except (ssl.SSLError, ConnectionError):
        return False
    finally:
        writer.close()


def test_apid_trusts_exactly_each_steps_accepted_cas(tmp_path: Path) -> None:
    address = _address()
    old_admin, new_admin = _admin(OLD), _admin(NEW)

    def certs(issuing: pki.CertKey, *accepted: pki.CertKey) -> _certs.ApiCertificates:
        return _certs.issue_api_certificates(
            issuing, address=address, hostname="cp-1", accepted_cas=[c.crt for c in accepted]
        )

    async def go() -> None:
        first = certs(OLD)
        apid = Apid(
            address=address, machined_socket=tmp_path / "machined.sock", server_cert=first.server,
            accepted_cas=first.accepted_cas, client_cert=first.client, port=0,
        )  # fmt: skip
        await apid.start()

        async def step(issuing: pki.CertKey, accepted: Sequence[pki.CertKey]) -> tuple[bool, bool]:
            now = certs(issuing, *accepted)
            apid.reload_certificates(now.server, now.accepted_cas, now.client)
            trusted = [issuing.crt]
            return (
                await _accepted(address, apid.port, trusted, old_admin),
                await _accepted(address, apid.port, trusted, new_admin),
            )

        try:
            assert await _accepted(address, apid.port, [OLD.crt], old_admin)
            assert not await _accepted(address, apid.port, [OLD.crt], new_admin)
            assert await step(OLD, [NEW]) == (True, True)  # the new CA accepted
            assert await step(NEW, [OLD]) == (True, True)  # the new CA issuing, the old accepted
            assert await step(NEW, []) == (False, True)  # the old CA dropped: its clients refused
        finally:
            await apid.close()

    asyncio.run(go())


def test_trustd_signs_with_the_issuing_ca_it_was_last_given() -> None:
    address = _address()
    served = _certs.issue_api_certificates(OLD, address=address, hostname="cp-1")
    service = trustd.SecurityService(OLD, TOKEN, served.accepted_cas)
    context = trustd.server_context(served.server)

    async def request(ca: pki.CertKey) -> tuple[pki.CertKey, bytes]:
        return await trustd.request_server_certificate(
            [address], os_ca_crt=ca.crt, token=TOKEN, hostname="w-1", address="127.9.9.9", timeout=2
        )

    async def go() -> None:
        server = asyncio.create_task(trustd.serve(address, context, service, port=50001))
        try:
            for _ in range(100):
                await asyncio.sleep(0.02)
                try:
                    cert, bundle = await request(OLD)
                    break
                except ConnectionError:
                    continue
            else:
                raise AssertionError("trustd never answered")
            assert pki.issued_by_any(cert.crt, OLD.crt) and bundle == OLD.crt
            swapped = _certs.issue_api_certificates(
                NEW, address=address, hostname="cp-1", accepted_cas=[OLD.crt]
            )
            pki.load_into_ssl_context(context, swapped.server.crt, swapped.server.key)
            service.update(NEW, TOKEN, swapped.accepted_cas)
            cert, bundle = await request(NEW)
            assert pki.issued_by_any(cert.crt, NEW.crt) and not pki.issued_by_any(cert.crt, OLD.crt)
            assert bundle == NEW.crt + OLD.crt
        finally:
            server.cancel()

    asyncio.run(go())
