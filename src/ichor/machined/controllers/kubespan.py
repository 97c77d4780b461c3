"""KubeSpan, from its config: ``kubespan.IdentityController``.

With ``machine.network.kubespan.enabled`` and the node's first hardware address known, the node's
KubeSpan identity (``KubeSpanIdentities`` ``local``): a WireGuard key pair generated once and kept in
STATE (``kubespan-identity.yaml``, 0600, Talos's file and keys), and the address KubeSpan gives the
node: its first MAC's EUI-64 /128 in the cluster's KubeSpan ULA /64 (from ``cluster.id``). Disabled,
the identity is not published (the file stays, so enabling again keeps the key).

Not here yet (issue 25): the peers from discovery, the WireGuard link, its routes and nftables marks.
"""

from __future__ import annotations

import logging

from ichor.machined.cosi import ControllerContext, Input, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import KUBESPAN_IDENTITIES, LOCAL_KUBESPAN_IDENTITY_ID, KubeSpanIdentitySpec
from ichor.machined.resources._feature_configs import KUBESPAN_CONFIG_ID, KUBESPAN_CONFIGS
from ichor.machined.resources._network_probes import FIRST_HARDWARE_ADDR_ID, HARDWARE_ADDRESSES
from ichor.machinery.errors import KubeSpanError, YAMLError
from ichor.machinery.files import write_atomic
from ichor.machinery.kubespan import ULA_KUBESPAN, eui64_address, new_private_key, public_key, ula_prefix
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = ["kubespan_identity_controller", "load_or_new_private_key"]

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
