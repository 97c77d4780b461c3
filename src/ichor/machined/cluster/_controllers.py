"""Cluster membership controllers: identity -> local affiliate -> discovery service -> members -> endpoints.

* ``cluster.NodeIdentityController``: a random node id, kept in STATE (``node-identity.yaml``).
* ``cluster.ConfigController``: ``cluster.discovery`` of the machine config -> ``DiscoveryConfig``.
* ``cluster.InfoController``: ``cluster.id`` / ``cluster.clusterName`` -> ``Info``.
* ``cluster.LocalAffiliateController``: identity, hostname, addresses, machine type -> this node's
  ``Affiliate`` (namespace ``cluster``, id = node id) while discovery is enabled.
* ``cluster.DiscoveryServiceController``: publishes the local affiliate through a
  :class:`~ichor.discovery.DiscoveryClient` and mirrors the other nodes into ``cluster-raw`` as
  ``service/<node id>``; when the machine is resetting it deletes the local affiliate instead.
* ``cluster.AffiliateMergeController``: raw affiliates merged per node id -> ``cluster`` Affiliates.
* ``cluster.MemberController``: affiliates with a node name -> ``Member`` (id = node name).
* ``cluster.EndpointController``: control plane members' addresses -> ``Endpoints`` ``discovery``.

These controllers only read and write resources (and the identity file); they never touch the
node's services, and the node decides when they run.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import ipaddress
import logging
import os
import string
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ichor.api.gen.discovery import affiliate_pb2
from ichor.discovery import DiscoveryClient, RemoteAffiliate
from ichor.machined.cluster._types import (
    AFFILIATES,
    DISCOVERED_ENDPOINTS_ID,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    ENDPOINTS,
    IDENTITIES,
    INFO_ID,
    INFOS,
    LOCAL_IDENTITY_ID,
    MEMBERS,
    RAW_NAMESPACE,
    AffiliateSpec,
    ControlPlaneSpec,
    DiscoveryConfigSpec,
    EndpointSpec,
    IdentitySpec,
    InfoSpec,
    IPAddress,
    KubeSpanAffiliateSpec,
    MemberSpec,
)
from ichor.machined.controllers import active_v1alpha1
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    OutputKind,
    TransformController,
    WaitingFor,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_STATUSES,
    MACHINE_TYPES,
    NODE_ADDRESSES,
    MachineStage,
)
from ichor.machinery.constants import TALOS_VERSION
from ichor.machinery.errors import YAMLError
from ichor.machinery.files import write_atomic
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = [
    "DEFAULT_DISCOVERY_ENDPOINT",
    "OPERATING_SYSTEM",
    "ClientFactory",
    "DiscoveryServiceController",
    "affiliate_from_pb",
    "affiliate_merge_controller",
    "affiliate_to_pb",
    "cluster_controllers",
    "discovery_config_controller",
    "discovery_config_of",
    "endpoint_controller",
    "info_controller",
    "local_affiliate_controller",
    "member_controller",
    "new_node_id",
    "node_identity_controller",
]

log = logging.getLogger("ichor.machined.cluster")

ACTIVE_CONFIG = "v1alpha1"
DEFAULT_DISCOVERY_ENDPOINT = "https://discovery.talos.dev/"
DEFAULT_API_SERVER_PORT = 6443
OPERATING_SYSTEM = f"Ichor ({TALOS_VERSION})"
"""What this node reports as its OS (Talos reports ``Talos (v1.7.6)``)."""

_MACHINE_TYPES = ("init", "controlplane", "worker")
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def new_node_id() -> str:
    """32 random bytes in base62 (43 characters)."""
    value = int.from_bytes(os.urandom(32), "big")
    digits = []
    for _ in range(43):
        value, digit = divmod(value, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits))


def _section(data: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


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


def discovery_config_of(v1alpha1: dict[str, Any]) -> DiscoveryConfigSpec:
    """``cluster.discovery`` as Talos reads it; raises :class:`WaitingFor` naming a bad key."""
    discovery = _section(v1alpha1, "cluster", "discovery")
    if not discovery.get("enabled"):
        return DiscoveryConfigSpec()
    kubernetes = _section(discovery, "registries", "kubernetes")
    service = _section(discovery, "registries", "service")
    spec = DiscoveryConfigSpec(
        discovery_enabled=True,
        registry_kubernetes_enabled=not kubernetes.get("disabled", False),
        registry_service_enabled=not service.get("disabled", False),
    )
    if not spec.registry_service_enabled:
        return spec
    endpoint = str(service.get("endpoint") or DEFAULT_DISCOVERY_ENDPOINT)
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
    secret = str(_section(v1alpha1, "cluster").get("secret") or "")
    try:
        key = base64.b64decode(secret, validate=True)
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
        service_cluster_id=str(_section(v1alpha1, "cluster").get("id") or ""),
    )


def discovery_config_controller() -> TransformController[DiscoveryConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, DiscoveryConfigSpec]:
        return {DISCOVERY_CONFIG_ID: discovery_config_of(active_v1alpha1(ctx))}

    return TransformController(
        "cluster.ConfigController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE_CONFIG)],
        output=DISCOVERY_CONFIGS, map_inputs=derive,
    )  # fmt: skip


def info_controller() -> TransformController[InfoSpec]:
    def derive(ctx: ControllerContext) -> dict[str, InfoSpec]:
        cluster = _section(active_v1alpha1(ctx), "cluster")
        return {INFO_ID: InfoSpec(str(cluster.get("id") or ""), str(cluster.get("clusterName") or ""))}

    return TransformController(
        "cluster.InfoController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE_CONFIG)], output=INFOS,
        map_inputs=derive,
    )  # fmt: skip


# -- local affiliate --------------------------------------------------------------------------


def local_affiliate_controller(layout: Layout) -> TransformController[AffiliateSpec]:
    """This node as an affiliate; addresses from NodeAddresses ``routed`` (else ``current``, else the
    node's own address)."""

    def derive(ctx: ControllerContext) -> dict[str, AffiliateSpec]:
        config = ctx.get_or_none(DISCOVERY_CONFIGS, DISCOVERY_CONFIG_ID)
        if config is None or not config.spec.discovery_enabled:
            return {}
        identity = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
        if identity is None:
            raise WaitingFor("the node identity", "cluster.NodeIdentityController has not published it")
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, "hostname")
        if hostname is None:
            raise WaitingFor("the hostname", "no HostnameStatus yet")
        machine_type = ctx.get_or_none(MACHINE_TYPES, "machine-type")
        if machine_type is None:
            raise WaitingFor("the machine type", "no MachineType yet")
        addresses: tuple[IPAddress, ...] = ()
        for id in ("routed", "current"):
            found = ctx.get_or_none(NODE_ADDRESSES, id)
            if found is not None and found.spec.addresses:
                addresses = tuple(dict.fromkeys(p.ip for p in found.spec.addresses))
                break
        else:
            addresses = (ipaddress.ip_address(layout.address),)
        kind = str(machine_type.spec)
        control_plane = None
        if kind in ("init", "controlplane"):
            plane = _section(active_v1alpha1(ctx), "cluster", "controlPlane")
            control_plane = ControlPlaneSpec(int(plane.get("localAPIServerPort") or DEFAULT_API_SERVER_PORT))
        node_id = identity.spec.node_id
        return {
            node_id: AffiliateSpec(
                node_id=node_id,
                addresses=addresses,
                hostname=hostname.spec.fqdn,
                nodename=hostname.spec.hostname,
                operating_system=OPERATING_SYSTEM,
                machine_type=kind,
                control_plane=control_plane,
            )
        }

    return TransformController(
        "cluster.LocalAffiliateController",
        inputs=[
            Input(DISCOVERY_CONFIGS, id=DISCOVERY_CONFIG_ID),
            Input(IDENTITIES, id=LOCAL_IDENTITY_ID),
            Input(HOSTNAME_STATUSES, id="hostname"),
            Input(NODE_ADDRESSES),
            Input(MACHINE_TYPES, id="machine-type"),
            Input(MACHINE_CONFIGS, id=ACTIVE_CONFIG),
        ],
        output=AFFILIATES,
        output_kind=OutputKind.SHARED,
        map_inputs=derive,
    )


# -- discovery service ------------------------------------------------------------------------


def affiliate_to_pb(spec: AffiliateSpec) -> affiliate_pb2.Affiliate:
    message = affiliate_pb2.Affiliate(
        node_id=spec.node_id,
        addresses=[a.packed for a in spec.addresses],
        hostname=spec.hostname,
        nodename=spec.nodename,
        machine_type=spec.machine_type,
        operating_system=spec.operating_system,
    )
    if spec.control_plane is not None:
        message.control_plane.api_server_port = spec.control_plane.api_server_port
    if spec.kubespan is not None and spec.kubespan.public_key:
        message.kubespan.public_key = spec.kubespan.public_key
        if spec.kubespan.address:
            message.kubespan.address = ipaddress.ip_address(spec.kubespan.address).packed
    return message


def _ip(raw: bytes) -> IPAddress | None:
    return ipaddress.ip_address(raw) if len(raw) in (4, 16) else None


def affiliate_from_pb(remote: RemoteAffiliate) -> AffiliateSpec:
    """A decrypted remote affiliate as a spec; unparseable addresses are skipped, as Talos does."""
    message = remote.affiliate
    kubespan = None
    if message.HasField("kubespan"):
        address = _ip(message.kubespan.address)
        endpoints = []
        for endpoint in remote.endpoints:
            ip = _ip(endpoint.ip)
            if ip is not None:
                endpoints.append(f"[{ip}]:{endpoint.port}" if ip.version == 6 else f"{ip}:{endpoint.port}")
        kubespan = KubeSpanAffiliateSpec(
            public_key=message.kubespan.public_key,
            address=str(address) if address else "",
            additional_addresses=tuple(
                f"{ip}/{p.bits}" for p in message.kubespan.additional_addresses if (ip := _ip(p.ip))
            ),
            endpoints=tuple(endpoints),
        )
    return AffiliateSpec(
        node_id=message.node_id or remote.id,
        addresses=tuple(ip for raw in message.addresses if (ip := _ip(raw)) is not None),
        hostname=message.hostname,
        nodename=message.nodename,
        operating_system=message.operating_system,
        machine_type=message.machine_type if message.machine_type in _MACHINE_TYPES else "unknown",
        kubespan=kubespan,
        control_plane=(
            ControlPlaneSpec(message.control_plane.api_server_port)
            if message.HasField("control_plane")
            else None
        ),
    )


ClientFactory = Callable[[DiscoveryConfigSpec, str], DiscoveryClient]
"""Builds the client for (discovery config, node id); tests inject one with a short TTL."""


def _default_client(config: DiscoveryConfigSpec, node_id: str) -> DiscoveryClient:
    return DiscoveryClient(
        config.service_endpoint,
        cluster_id=config.service_cluster_id,
        key=config.service_encryption_key,
        affiliate_id=node_id,
        insecure=config.service_endpoint_insecure,
    )


class DiscoveryServiceController(Controller):
    """Keeps this node published on the discovery service and the others in ``cluster-raw``.

    :attr:`left` is set once the service confirmed the deletion of this node's affiliate, which
    happens when ``MachineStatus`` reaches stage ``resetting``: a resetting node waits for it (with
    a timeout) before wiping STATE, so the other nodes drop it at once instead of after the TTL.
    """

    name = "cluster.DiscoveryServiceController"

    def __init__(self, client_factory: ClientFactory | None = None) -> None:
        self.inputs = (
            Input(DISCOVERY_CONFIGS, id=DISCOVERY_CONFIG_ID),
            Input(IDENTITIES, id=LOCAL_IDENTITY_ID),
            Input(AFFILIATES),
            Input(MACHINE_STATUSES, id="machine"),
        )
        self.outputs = (Output(AFFILIATES, OutputKind.SHARED, RAW_NAMESPACE),)
        self._client_factory = client_factory or _default_client
        self.left = asyncio.Event()

    async def run(self, ctx: ControllerContext) -> None:
        news = asyncio.Event()
        client: DiscoveryClient | None = None
        client_task: asyncio.Task[None] | None = None
        current: tuple[DiscoveryConfigSpec, str] | None = None
        changed: asyncio.Future[Any] | None = None

        async def stop_client() -> None:
            nonlocal client, client_task, current
            if client_task is not None:
                client_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await client_task
            if client is not None:
                client.close()
            client, client_task, current = None, None, None

        try:
            while True:
                if changed is None:
                    changed = asyncio.ensure_future(ctx.changed())
                waiter: asyncio.Future[Any] = asyncio.ensure_future(news.wait())
                try:
                    await asyncio.wait({changed, waiter}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                if changed.done():
                    changed.result()
                    changed = None
                news.clear()
                if client_task is not None and client_task.done():
                    client_task.result()  # the client loop only ends on a bug: restart with backoff

                config = ctx.get_or_none(DISCOVERY_CONFIGS, DISCOVERY_CONFIG_ID)
                identity = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
                if config is None or identity is None or not config.spec.registry_service_enabled:
                    await stop_client()
                    ctx.clean_up_outputs(AFFILIATES, set(), namespace=RAW_NAMESPACE)
                    continue
                wanted = (config.spec, identity.spec.node_id)
                if wanted != current:
                    await stop_client()
                    client = self._client_factory(*wanted)
                    client_task = asyncio.ensure_future(client.run(news.set))
                    current = wanted
                assert client is not None
                status = ctx.get_or_none(MACHINE_STATUSES, "machine")
                if status is not None and status.spec.stage is MachineStage.RESETTING:
                    client.delete_local()
                    if client.deleted.is_set():
                        self.left.set()
                else:
                    local = ctx.get_or_none(AFFILIATES, identity.spec.node_id)
                    if local is not None:
                        client.set_local(affiliate_to_pb(local.spec))
                touched: set[str] = set()
                for remote in client.affiliates.values():
                    spec = affiliate_from_pb(remote)
                    id = f"service/{spec.node_id}"
                    ctx.modify(AFFILIATES, id, spec, namespace=RAW_NAMESPACE)
                    touched.add(id)
                ctx.clean_up_outputs(AFFILIATES, touched, namespace=RAW_NAMESPACE)
        finally:
            if changed is not None:
                changed.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await changed
            await stop_client()


# -- merge, members, endpoints ----------------------------------------------------------------


def affiliate_merge_controller() -> TransformController[AffiliateSpec]:
    def derive(ctx: ControllerContext) -> dict[str, AffiliateSpec]:
        identity = ctx.get_or_none(IDENTITIES, LOCAL_IDENTITY_ID)
        local_id = identity.spec.node_id if identity is not None else None
        merged: dict[str, AffiliateSpec] = {}
        for raw in sorted(ctx.list(AFFILIATES, namespace=RAW_NAMESPACE), key=lambda r: r.id):
            node_id = raw.spec.node_id
            if node_id == local_id:
                continue  # the local affiliate has its own controller
            merged[node_id] = merged[node_id].merge(raw.spec) if node_id in merged else raw.spec
        return merged

    return TransformController(
        "cluster.AffiliateMergeController",
        inputs=[Input(AFFILIATES, namespace=RAW_NAMESPACE), Input(IDENTITIES, id=LOCAL_IDENTITY_ID)],
        output=AFFILIATES,
        output_kind=OutputKind.SHARED,
        map_inputs=derive,
    )


def member_controller() -> TransformController[MemberSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MemberSpec]:
        members: dict[str, MemberSpec] = {}
        for affiliate in ctx.list(AFFILIATES):
            spec = affiliate.spec
            if not spec.nodename:
                continue  # not a cluster member (yet)
            members[spec.nodename] = MemberSpec(
                node_id=spec.node_id,
                addresses=spec.addresses,
                hostname=spec.hostname,
                machine_type=spec.machine_type,
                operating_system=spec.operating_system,
                control_plane=spec.control_plane,
            )
        return members

    return TransformController(
        "cluster.MemberController", inputs=[Input(AFFILIATES)], output=MEMBERS, map_inputs=derive
    )


def endpoint_controller() -> TransformController[EndpointSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EndpointSpec]:
        addresses: set[IPAddress] = set()
        for member in ctx.list(MEMBERS):
            if member.spec.machine_type in ("init", "controlplane"):
                addresses.update(member.spec.addresses)
        ordered = sorted(addresses, key=lambda a: (a.version, a))
        return {DISCOVERED_ENDPOINTS_ID: EndpointSpec(tuple(ordered))}

    return TransformController(
        "cluster.EndpointController", inputs=[Input(MEMBERS)], output=ENDPOINTS, map_inputs=derive,
        output_kind=OutputKind.SHARED,
    )  # fmt: skip


def cluster_controllers(layout: Layout, *, client_factory: ClientFactory | None = None) -> list[Controller]:
    """Every membership controller, for the node to register in its runtime."""
    return [
        node_identity_controller(layout),
        discovery_config_controller(),
        info_controller(),
        local_affiliate_controller(layout),
        DiscoveryServiceController(client_factory),
        affiliate_merge_controller(),
        member_controller(),
        endpoint_controller(),
    ]
