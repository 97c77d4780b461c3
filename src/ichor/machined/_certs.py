"""The node's Talos API certificates, issued from the machine config (Talos's ``ApiCertificates``).

A control plane holds the OS CA key (``machine.ca``) and issues its own server certificate (SANs:
the node address, hostname, ``machine.certSANs``; ServerAuth) and an ``os:impersonator`` client
certificate for forwarding calls to other nodes. Talos API certificates live 24 hours. The
maintenance server gets a per-boot self-signed CA instead (``maintenance-service.talos.dev``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ichor.machinery import pki
from ichor.machinery.constants import MAINTENANCE_CN

API_CERT_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class ApiCertificates:
    server: pki.CertKey
    client: pki.CertKey | None
    accepted_cas: tuple[bytes, ...]


def _sans(address: str, hostname: str, extra: Sequence[str]) -> tuple[list[str], list[str]]:
    import ipaddress

    ips, names = [], []
    for value in (address, hostname, *extra):
        if not value:
            continue
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if value not in names:
                names.append(value)
        else:
            if value not in ips:
                ips.append(value)
    return ips, names


def issue_api_certificates(
    os_ca: pki.CertKey,
    *,
    address: str,
    hostname: str,
    cert_sans: Sequence[str] = (),
    accepted_cas: Sequence[bytes] = (),
    now: datetime | None = None,
) -> ApiCertificates:
    """Certificates of a control plane's apid, signed by the OS CA it holds."""
    ips, names = _sans(address, hostname, cert_sans)
    server_key = pki.new_ed25519_key()
    server = pki.CertKey(
        pki.issue_certificate(
            os_ca, server_key, common_name=hostname, organizations=[], ttl=API_CERT_TTL,
            server=True, client=False, dns_names=names, ip_addresses=ips, now=now,
        ),
        server_key,
    )  # fmt: skip
    client_key = pki.new_ed25519_key()
    client = pki.CertKey(
        pki.issue_certificate(
            os_ca, client_key, common_name=hostname, organizations=["os:impersonator"], ttl=API_CERT_TTL,
            server=False, client=True, now=now,
        ),
        client_key,
    )  # fmt: skip
    return ApiCertificates(server=server, client=client, accepted_cas=(os_ca.crt, *accepted_cas))


def maintenance_certificate(*, address: str, hostname: str, now: datetime | None = None) -> pki.CertKey:
    """A per-boot self-signed server certificate for maintenance mode."""
    ca = pki.new_ed25519_ca(organization="talos", ttl=API_CERT_TTL, now=now)
    ips, names = _sans(address, hostname, [])
    key = pki.new_ed25519_key()
    crt = pki.issue_certificate(
        ca, key, common_name=MAINTENANCE_CN, organizations=[], ttl=API_CERT_TTL,
        server=True, client=False, dns_names=names, ip_addresses=ips, now=now,
    )  # fmt: skip
    return pki.CertKey(crt, key)
