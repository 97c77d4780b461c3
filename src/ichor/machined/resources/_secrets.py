"""Resources of namespace ``secrets``: the OS CA, the API certificates and their SANs.

Every type here is sensitive: ``talosctl get`` shows them to ``os:admin`` only. PEM material is
rendered as Talos does, base64 of the PEM bytes under ``crt``/``key``.
"""

from __future__ import annotations

import dataclasses
import ipaddress

from ichor.machined.cosi import ResourceType

__all__ = [
    "API_CERTIFICATES",
    "API_CERTIFICATES_ID",
    "CERT_SANS",
    "CERT_SAN_API_ID",
    "OS_ROOT_ID",
    "OS_ROOT_SECRETS",
    "SECRETS_NAMESPACE",
    "ApiCertificatesSpec",
    "CertSANSpec",
    "IPAddress",
    "OSRootSpec",
    "PEMCertificate",
    "PEMCertificateAndKey",
    "PEMKey",
]

SECRETS_NAMESPACE = "secrets"
OS_ROOT_ID = "os"
API_CERTIFICATES_ID = "api"
CERT_SAN_API_ID = "api"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


_PEM = {"base64": True}
"""Go's ``x509.PEMEncoded*`` marshal their bytes as plain base64 strings, not as other ``[]byte``."""


@dataclasses.dataclass(frozen=True)
class PEMCertificate:
    crt: bytes = dataclasses.field(metadata=_PEM)


@dataclasses.dataclass(frozen=True)
class PEMKey:
    key: bytes = dataclasses.field(metadata=_PEM)


@dataclasses.dataclass(frozen=True)
class PEMCertificateAndKey:
    crt: bytes = dataclasses.field(metadata=_PEM)
    key: bytes = dataclasses.field(metadata=_PEM)


@dataclasses.dataclass(frozen=True)
class OSRootSpec:
    """The OS (Talos API) CA, the CAs accepted for client certificates, SANs and trustd token."""

    issuing_ca: PEMCertificateAndKey | None = dataclasses.field(default=None, metadata={"yaml": "issuingCA"})
    accepted_cas: tuple[PEMCertificate, ...] = dataclasses.field(default=(), metadata={"yaml": "acceptedCAs"})
    cert_san_ips: tuple[IPAddress, ...] = dataclasses.field(default=(), metadata={"yaml": "certSANIPs"})
    cert_san_dns_names: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "certSANDNSNames"})
    token: str = ""


@dataclasses.dataclass(frozen=True)
class ApiCertificatesSpec:
    """apid's certificates: server (ServerAuth) and, on control planes, the client (impersonator)."""

    accepted_cas: tuple[PEMCertificate, ...] = dataclasses.field(default=(), metadata={"yaml": "acceptedCAs"})
    client: PEMCertificateAndKey | None = None
    server: PEMCertificateAndKey | None = None


@dataclasses.dataclass(frozen=True)
class CertSANSpec:
    ips: tuple[IPAddress, ...] = ()
    dns_names: tuple[str, ...] = ()
    fqdn: str = ""


OS_ROOT_SECRETS: ResourceType[OSRootSpec] = ResourceType(
    type="OSRootSecrets.secrets.talos.dev",
    default_namespace=SECRETS_NAMESPACE,
    spec_class=OSRootSpec,
    sensitive=True,
)

API_CERTIFICATES: ResourceType[ApiCertificatesSpec] = ResourceType(
    type="ApiCertificates.secrets.talos.dev",
    default_namespace=SECRETS_NAMESPACE,
    spec_class=ApiCertificatesSpec,
    sensitive=True,
)

CERT_SANS: ResourceType[CertSANSpec] = ResourceType(
    type="CertSANs.secrets.talos.dev",
    default_namespace=SECRETS_NAMESPACE,
    spec_class=CertSANSpec,
    sensitive=True,
)
