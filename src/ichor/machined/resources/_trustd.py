"""``TrustdCertificates`` (namespace ``secrets``, id ``trustd``, sensitive): the certificate trustd
serves and the CAs it accepts, on control planes. Ichor's trustd serves apid's server pair (the OS
CA's, for the node's CertSANs), so these are that pair and apid's accepted CAs, the certificate
a worker sees when it asks trustd for its own. Types only; ``controllers.secrets_trustd`` fills it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import ResourceType
from ichor.machined.resources._secrets import PEMCertificate, PEMCertificateAndKey

__all__ = ["TRUSTD_CERTIFICATES", "TRUSTD_ID", "TRUSTD_TYPES", "TrustdCertsSpec"]

TRUSTD_ID = "trustd"


@dataclasses.dataclass(frozen=True)
class TrustdCertsSpec:
    accepted_cas: tuple[PEMCertificate, ...] = dataclasses.field(default=(), metadata={"yaml": "acceptedCAs"})
    server: PEMCertificateAndKey | None = None


TRUSTD_CERTIFICATES: ResourceType[TrustdCertsSpec] = ResourceType(
    type="TrustdCertificates.secrets.talos.dev", default_namespace="secrets", spec_class=TrustdCertsSpec,
    sensitive=True,
)  # fmt: skip

TRUSTD_TYPES: tuple[ResourceType[Any], ...] = (TRUSTD_CERTIFICATES,)
