"""``PKIStatuses`` (namespace ``etcd``, id ``etcd``): whether this control plane's etcd PKI is on disk
(``/system/secrets/etcd``: the CA and etcd's server, peer and admin key pairs) for the etcd CA the
config names, and the version of the secrets it was written from.

Talos writes the files from its ``EtcdSecrets`` and reports that resource's version; Ichor's etcd
service issues the key pairs from ``EtcdRootSecrets`` as it starts etcd, so the version here is the
``EtcdRootSecrets`` one. Types only; ``controllers.etcd_pki`` fills it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = ["ETCD_PKI_ID", "ETCD_PKI_TYPES", "PKI_STATUSES", "PKIStatusSpec"]

ETCD_PKI_ID = "etcd"


@dataclasses.dataclass(frozen=True)
class PKIStatusSpec:
    ready: bool = False
    version: str = ""


PKI_STATUSES: ResourceType[PKIStatusSpec] = ResourceType(
    type="PKIStatuses.etcd.talos.dev", default_namespace="etcd", spec_class=PKIStatusSpec,
    print_columns=(PrintColumn("Ready", "{.ready}"), PrintColumn("Secrets Version", "{.version}")),
)  # fmt: skip

ETCD_PKI_TYPES: tuple[ResourceType[Any], ...] = (PKI_STATUSES,)
