"""Cluster area, from the node and its config: identity, discovery settings, cluster info.

* ``cluster.NodeIdentityController``: a random node id, kept in STATE (``node-identity.yaml``);
* ``cluster.ConfigController``: ``cluster.discovery`` of the machine config -> ``DiscoveryConfig``;
* ``cluster.InfoController``: ``cluster.id`` / ``cluster.clusterName`` -> ``Info``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import string
from urllib.parse import urlsplit

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, OutputKind, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    IDENTITIES,
    INFO_ID,
    INFOS,
    LOCAL_IDENTITY_ID,
    DiscoveryConfigSpec,
    IdentitySpec,
    InfoSpec,
)
from ichor.machinery.config import Config
from ichor.machinery.errors import YAMLError
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = [
    "DEFAULT_DISCOVERY_ENDPOINT",
    "discovery_config_controller",
    "discovery_config_of",
    "info_controller",
    "new_node_id",
    "node_identity_controller",
]

log = logging.getLogger("ichor.machined.cluster")

DEFAULT_DISCOVERY_ENDPOINT = "https://discovery.talos.dev/"
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def new_node_id() -> str:
    """32 random bytes in base62 (43 characters)."""
    value = int.from_bytes(os.urandom(32), "big")
    digits = []
    for _ in range(43):
        value, digit = divmod(value, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits))


# -- node identity ----------------------------------------------------------------------------


def _load_identity(layout: Layout) -> str | None:
    path = layout.node_identity_file
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        docs = load_documents(text, source=str(path))
    except YAMLError as exc:
        log.warning("node identity %s is not YAML (%s); generating a new one", path, exc)
        return None
    node_id = to_plain(docs[0]).get("nodeId") if docs and isinstance(docs[0], dict) else None
    if not isinstance(node_id, str) or not node_id or set(node_id) - set(_BASE62):
        log.warning("node identity %s has no valid nodeId; generating a new one", path)
        return None
    return node_id


def node_identity_controller(layout: Layout) -> TransformController[IdentitySpec]:
    """The node id: read from STATE, or generated once and written there (0600)."""

    def derive(ctx: ControllerContext) -> dict[str, IdentitySpec]:
        node_id = _load_identity(layout)
        if node_id is None:
            node_id = new_node_id()
            write_atomic(layout.node_identity_file, f"nodeId: {node_id}\n", mode=0o600)
            log.info("node identity established: %s", node_id)
        return {LOCAL_IDENTITY_ID: IdentitySpec(node_id)}

    return TransformController(
        "cluster.NodeIdentityController", inputs=[], output=IDENTITIES, map_inputs=derive,
        output_kind=OutputKind.SHARED,
    )  # fmt: skip


# -- discovery config and info ----------------------------------------------------------------


def discovery_config_of(config: Config) -> DiscoveryConfigSpec:
    """``cluster.discovery`` as Talos reads it; raises :class:`WaitingFor` naming a bad key."""
    cluster = config.cluster
    discovery = cluster.discovery if cluster is not None else None
    if cluster is None or discovery is None or not discovery.enabled:
        return DiscoveryConfigSpec()
    registries = discovery.registries
    kubernetes = registries.kubernetes if registries is not None else None
    service = registries.service if registries is not None else None
    spec = DiscoveryConfigSpec(
        discovery_enabled=True,
        registry_kubernetes_enabled=not (kubernetes is not None and kubernetes.disabled),
        registry_service_enabled=not (service is not None and service.disabled),
    )
    if not spec.registry_service_enabled:
        return spec
    endpoint = (service.endpoint if service is not None else None) or DEFAULT_DISCOVERY_ENDPOINT
    url = urlsplit(endpoint)
    try:
        port = url.port
    except ValueError:
        port = -1
    if not url.scheme or not url.hostname or port == -1:
        raise WaitingFor(
            "a usable discovery service endpoint",
            f"cluster.discovery.registries.service.endpoint {endpoint!r} is not a URL like https://host:port/",
        )
    if port is None:
        port = 80 if url.scheme == "http" else 443
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    try:
        key = base64.b64decode(cluster.secret or "", validate=True)
    except binascii.Error:
        raise WaitingFor("a usable cluster secret", "cluster.secret is not valid base64") from None
    if len(key) not in (16, 24, 32):
        raise WaitingFor(
            "a usable cluster secret", f"cluster.secret decodes to {len(key)} bytes; it must be 32"
        )
    return DiscoveryConfigSpec(
        discovery_enabled=True,
        registry_kubernetes_enabled=spec.registry_kubernetes_enabled,
        registry_service_enabled=True,
        service_endpoint=f"{host}:{port}",
        service_endpoint_insecure=url.scheme == "http",
        service_encryption_key=key,
        service_cluster_id=cluster.id or "",
    )


def discovery_config_controller() -> TransformController[DiscoveryConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, DiscoveryConfigSpec]:
        return {DISCOVERY_CONFIG_ID: discovery_config_of(active_config(ctx))}

    return TransformController(
        "cluster.ConfigController", inputs=[ACTIVE_CONFIG],
        output=DISCOVERY_CONFIGS, map_inputs=derive,
    )  # fmt: skip


def info_controller() -> TransformController[InfoSpec]:
    def derive(ctx: ControllerContext) -> dict[str, InfoSpec]:
        cluster = active_config(ctx).cluster
        if cluster is None:
            return {INFO_ID: InfoSpec("", "")}
        return {INFO_ID: InfoSpec(cluster.id or "", cluster.cluster_name or "")}

    return TransformController(
        "cluster.InfoController", inputs=[ACTIVE_CONFIG], output=INFOS,
        map_inputs=derive,
    )  # fmt: skip
