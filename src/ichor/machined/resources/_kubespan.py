"""KubeSpan resources (namespace ``kubespan``): the node's identity on the KubeSpan network.

* ``KubeSpanIdentities`` (id ``local``): the node's WireGuard keys and its address, an EUI-64 /128 in
  the cluster's KubeSpan ULA /64 (sensitive: it holds the private key).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = ["KUBESPAN_IDENTITIES", "KUBESPAN_TYPES", "LOCAL_KUBESPAN_IDENTITY_ID", "KubeSpanIdentitySpec"]

LOCAL_KUBESPAN_IDENTITY_ID = "local"


@dataclasses.dataclass(frozen=True)
class KubeSpanIdentitySpec:
    address: str = ""
    """The node's KubeSpan address, ``fdxx:...:xxxx/128``."""
    subnet: str = ""
    """The cluster's KubeSpan network, a ULA /64."""
    private_key: str = ""
    public_key: str = ""


KUBESPAN_IDENTITIES: ResourceType[KubeSpanIdentitySpec] = ResourceType(
    type="KubeSpanIdentities.kubespan.talos.dev", default_namespace="kubespan", spec_class=KubeSpanIdentitySpec,
    print_columns=(PrintColumn("Address", "{.address}"), PrintColumn("PublicKey", "{.publicKey}")),
    sensitive=True,
)  # fmt: skip

KUBESPAN_TYPES: tuple[ResourceType[Any], ...] = (KUBESPAN_IDENTITIES,)
