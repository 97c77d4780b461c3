"""KubeSpan resources (namespace ``kubespan``): the node's identity on the KubeSpan network.

* ``KubeSpanIdentities`` (id ``local``): the node's WireGuard keys and its address, an EUI-64 /128 in
  the cluster's KubeSpan ULA /64 (sensitive: it holds the private key);
* ``KubeSpanPeerSpecs`` (id = the peer's public key): each other affiliate that publishes KubeSpan
  keys, with the addresses it may send from (``allowedIPs``) and its endpoints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "KUBESPAN_IDENTITIES",
    "KUBESPAN_PEER_SPECS",
    "KUBESPAN_TYPES",
    "LOCAL_KUBESPAN_IDENTITY_ID",
    "KubeSpanIdentitySpec",
    "KubeSpanPeerSpecSpec",
]

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


@dataclasses.dataclass(frozen=True)
class KubeSpanPeerSpecSpec:
    address: str = ""
    """The peer's KubeSpan address (no prefix length)."""
    allowed_ips: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "allowedIPs"})
    """Prefixes the peer may send from: its KubeSpan address, its node addresses and what it
    advertises, minus what an earlier peer already claimed (Talos's overlap rule)."""
    endpoints: tuple[str, ...] = ()
    """``ip:port`` (``[ip]:port`` for IPv6) to reach the peer on."""
    label: str = ""
    """The peer's node name."""


KUBESPAN_PEER_SPECS: ResourceType[KubeSpanPeerSpecSpec] = ResourceType(
    type="KubeSpanPeerSpecs.kubespan.talos.dev", default_namespace="kubespan", spec_class=KubeSpanPeerSpecSpec,
    print_columns=(PrintColumn("Label", "{.label}"), PrintColumn("Endpoints", "{.endpoints}")),
)  # fmt: skip

KUBESPAN_TYPES: tuple[ResourceType[Any], ...] = (KUBESPAN_IDENTITIES, KUBESPAN_PEER_SPECS)
