"""KubeSpan, from its config: ``kubespan.IdentityController`` and ``kubespan.PeerSpecController``.

With ``machine.network.kubespan.enabled`` and the node's first hardware address known, the node's
KubeSpan identity (``KubeSpanIdentities`` ``local``): a WireGuard key pair generated once and kept in
STATE (``kubespan-identity.yaml``, 0600, Talos's file and keys), and the address KubeSpan gives the
node: its first MAC's EUI-64 /128 in the cluster's KubeSpan ULA /64 (from ``cluster.id``). Disabled,
the identity is not published (the file stays, so enabling again keeps the key). The local affiliate
carries the identity's address and public key and the node's endpoints to the other nodes
(``controllers/cluster/affiliates.py``).

The peers (``KubeSpanPeerSpecs``, id = public key): every other affiliate that publishes KubeSpan
keys, with the prefixes it may send from — its KubeSpan address, its node addresses and the networks
it advertises — less what a peer before it (by affiliate id) already claimed, as Talos resolves an
overlap; its endpoints; its node name as the label.

Not here yet (issue 25): the WireGuard link, its peers' status, routing rules and nftables marks.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from ichor.machined.cosi import ControllerContext, Input, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    AFFILIATES,
    IDENTITIES,
    KUBESPAN_IDENTITIES,
    KUBESPAN_PEER_SPECS,
    LOCAL_IDENTITY_ID,
    LOCAL_KUBESPAN_IDENTITY_ID,
    KubeSpanIdentitySpec,
    KubeSpanPeerSpecSpec,
)
from ichor.machined.resources._feature_configs import KUBESPAN_CONFIG_ID, KUBESPAN_CONFIGS
from ichor.machined.resources._network_probes import FIRST_HARDWARE_ADDR_ID, HARDWARE_ADDRESSES
from ichor.machinery.errors import KubeSpanError, YAMLError
from ichor.machinery.files import write_atomic
from ichor.machinery.kubespan import ULA_KUBESPAN, eui64_address, new_private_key, public_key, ula_prefix
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = [
    "allowed_ips",
    "kubespan_identity_controller",
    "kubespan_peer_spec_controller",
    "load_or_new_private_key",
]

log = logging.getLogger("ichor.machined.kubespan")


def load_or_new_private_key(layout: Layout) -> str:
    """The private key kept in STATE; a new one written there (0600) when there is none or it is
    not a WireGuard key."""
    path = layout.kubespan_identity_file
    try:
        docs = load_documents(path.read_text(), source=str(path))
        plain = to_plain(docs[0]) if docs else None
        key = plain.get("privateKey") if isinstance(plain, dict) else None
        if isinstance(key, str):
            public_key(key)  # a WireGuard key, or KubeSpanError
            return key
        log.warning("KubeSpan identity %s has no privateKey; generating a new one", path)
    except FileNotFoundError:
        pass
    except (YAMLError, KubeSpanError) as exc:
        log.warning("KubeSpan identity %s is not usable (%s); generating a new one", path, exc)
    key = new_private_key()
    # Talos's file as it writes it: the key pair, the prefixes empty (they are derived at each start).
    write_atomic(
        path, f'address: ""\nsubnet: ""\nprivateKey: {key}\npublicKey: {public_key(key)}\n', mode=0o600
    )
    log.info("KubeSpan identity established in %s", path)
    return key


def kubespan_identity_controller(layout: Layout) -> TransformController[KubeSpanIdentitySpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubeSpanIdentitySpec]:
        config = ctx.get_or_none(KUBESPAN_CONFIGS, KUBESPAN_CONFIG_ID)
        first = ctx.get_or_none(HARDWARE_ADDRESSES, FIRST_HARDWARE_ADDR_ID)
        if config is None or not config.spec.enabled or first is None:
            return {}
        subnet = ula_prefix(config.spec.cluster_id, ULA_KUBESPAN)
        address = eui64_address(subnet, first.spec.hardware_addr)
        key = load_or_new_private_key(layout)
        spec = KubeSpanIdentitySpec(
            address=str(address), subnet=str(subnet), private_key=key, public_key=public_key(key)
        )
        return {LOCAL_KUBESPAN_IDENTITY_ID: spec}

    return TransformController(
        "kubespan.IdentityController",
        inputs=[Input(KUBESPAN_CONFIGS), Input(HARDWARE_ADDRESSES)],
        output=KUBESPAN_IDENTITIES,
        map_inputs=derive,
    )


_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _collapse(networks: Iterable[_Network]) -> list[_Network]:
    """The smallest list of prefixes covering ``networks``, IPv4 first, each family by address."""
    nets = list(networks)
    v4 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv6Network))
    return [*v4, *v6]


def _minus(networks: list[_Network], taken: list[_Network]) -> list[_Network]:
    """``networks`` without the addresses in ``taken`` (prefixes overlap only by containment)."""
    left = networks
    for other in taken:
        kept: list[_Network] = []
        for net in left:
            if net.version != other.version or not net.overlaps(other):
                kept.append(net)
            elif not other.supernet_of(net):  # type: ignore[arg-type]
                kept.extend(net.address_exclude(other))  # type: ignore[arg-type]
        left = kept
    return _collapse(left)


def allowed_ips(address: str, node_addresses: Iterable[str], advertised: Iterable[str],
                taken: list[_Network]) -> list[_Network]:  # fmt: skip
    """A peer's allowed prefixes: its KubeSpan address, node addresses and advertised networks, minus
    ``taken`` (what earlier peers claimed)."""
    nets: list[_Network] = [ipaddress.ip_network(address)]
    nets += [ipaddress.ip_network(a) for a in node_addresses]
    nets += [ipaddress.ip_network(p, strict=False) for p in advertised]
    return _minus(_collapse(nets), taken)


def kubespan_peer_spec_controller() -> TransformController[KubeSpanPeerSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubeSpanPeerSpecSpec]:
        config = ctx.get_or_none(KUBESPAN_CONFIGS, KUBESPAN_CONFIG_ID)
        local = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
        if config is None or not config.spec.enabled or local is None:
            return {}
        peers: dict[str, KubeSpanPeerSpecSpec] = {}
        taken: list[_Network] = []
        for affiliate in sorted(ctx.list(AFFILIATES), key=lambda r: r.id):
            spec = affiliate.spec
            kubespan = spec.kubespan
            if affiliate.id == local.spec.node_id or kubespan is None or not kubespan.public_key:
                continue
            try:
                prefixes = allowed_ips(kubespan.address, (str(a) for a in spec.addresses),
                                       kubespan.additional_addresses, taken)  # fmt: skip
            except ValueError as err:
                ctx.logger.warning("failed building list of IP ranges for the peer",
                                   ignored_peer=kubespan.public_key, label=spec.nodename, error=str(err))  # fmt: skip
                continue
            taken += prefixes
            peers[kubespan.public_key] = KubeSpanPeerSpecSpec(
                address=kubespan.address, allowed_ips=tuple(str(p) for p in prefixes),
                endpoints=kubespan.endpoints, label=spec.nodename,
            )  # fmt: skip
        return peers

    return TransformController(
        "kubespan.PeerSpecController",
        inputs=[Input(KUBESPAN_CONFIGS), Input(IDENTITIES, id=LOCAL_IDENTITY_ID), Input(AFFILIATES)],
        output=KUBESPAN_PEER_SPECS,
        map_inputs=derive,
    )
