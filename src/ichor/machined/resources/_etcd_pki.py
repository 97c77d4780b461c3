"""This control plane's etcd PKI: ``EtcdSecrets`` (namespace ``secrets``, id ``etcd``, sensitive): etcd's
server, peer and admin key pairs and the kube-apiserver's etcd client pair; ``PKIStatuses``
(namespace ``etcd``, id ``etcd``): the PKI is on disk (``/system/secrets/etcd``), with the version
of the EtcdSecrets it holds, as Talos reports it. Types only; ``controllers.etcd_pki`` fills them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._secrets import PEMCertificateAndKey

__all__ = [
    "ETCD_PKI_ID",
    "ETCD_PKI_TYPES",
    "ETCD_SECRETS",
    "ETCD_SECRETS_ID",
    "PKI_STATUSES",
    "EtcdCertsSpec",
    "PKIStatusSpec",
]

ETCD_PKI_ID = "etcd"
ETCD_SECRETS_ID = "etcd"


@dataclasses.dataclass(frozen=True)
class EtcdCertsSpec:
    etcd: PEMCertificateAndKey | None = None
    etcd_peer: PEMCertificateAndKey | None = None
    etcd_admin: PEMCertificateAndKey | None = None
    etcd_api_server: PEMCertificateAndKey | None = dataclasses.field(
        default=None, metadata={"yaml": "etcdAPIServer"}
    )


@dataclasses.dataclass(frozen=True)
class PKIStatusSpec:
    ready: bool = False
    version: str = ""


PKI_STATUSES: ResourceType[PKIStatusSpec] = ResourceType(
    type="PKIStatuses.etcd.talos.dev", default_namespace="etcd", spec_class=PKIStatusSpec,
    print_columns=(PrintColumn("Ready", "{.ready}"), PrintColumn("Secrets Version", "{.version}")),
)  # fmt: skip

ETCD_SECRETS: ResourceType[EtcdCertsSpec] = ResourceType(
    type="EtcdSecrets.secrets.talos.dev",
    default_namespace="secrets",
    spec_class=EtcdCertsSpec,
    sensitive=True,
)

ETCD_PKI_TYPES: tuple[ResourceType[Any], ...] = (ETCD_SECRETS, PKI_STATUSES)
