"""Cluster area, the discovery service: publish this node, mirror the others.

* ``cluster.DiscoveryServiceController``: publishes the local affiliate through a
  :class:`~ichor.discovery.DiscoveryClient` and mirrors the other nodes into ``cluster-raw`` as
  ``service/<node id>``; once a reset is requested (``MachineResetSignal``) it deletes the local
  affiliate from the service instead. ``DiscoveryStatus`` ``local`` says which (a reset waits,
  bounded, for ``left``, so the other nodes drop this one at once instead of after the TTL).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable
from typing import Any

from ichor.api.gen.discovery import affiliate_pb2
from ichor.discovery import DiscoveryClient, RemoteAffiliate
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, OutputKind
from ichor.machined.resources import (
    AFFILIATES,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    DISCOVERY_STATUS_ID,
    DISCOVERY_STATUSES,
    IDENTITIES,
    LOCAL_IDENTITY_ID,
    MACHINE_RESET_SIGNAL_ID,
    MACHINE_RESET_SIGNALS,
    RAW_NAMESPACE,
    AffiliateSpec,
    ControlPlaneSpec,
    DiscoveryConfigSpec,
    DiscoveryStatusSpec,
    IPAddress,
    KubeSpanAffiliateSpec,
)
from ichor.machinery.hostport import join_host_port, split_host_port

__all__ = [
    "ClientFactory",
    "DiscoveryServiceController",
    "affiliate_endpoints",
    "affiliate_from_pb",
    "affiliate_to_pb",
]

_MACHINE_TYPES = ("init", "controlplane", "worker")


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
        for prefix in spec.kubespan.additional_addresses:
            network = ipaddress.ip_interface(prefix)
            message.kubespan.additional_addresses.add(ip=network.ip.packed, bits=network.network.prefixlen)
    return message


def affiliate_endpoints(spec: AffiliateSpec) -> list[affiliate_pb2.Endpoint]:
    """The KubeSpan endpoints the discovery service keeps beside the affiliate (``ip:port`` each)."""
    endpoints = []
    for text in spec.kubespan.endpoints if spec.kubespan is not None else ():
        host, port = split_host_port(text)
        endpoints.append(affiliate_pb2.Endpoint(ip=ipaddress.ip_address(host).packed, port=port))
    return endpoints


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
                endpoints.append(join_host_port(ip, endpoint.port))
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

    ``DiscoveryStatus.left`` is set once the service confirmed the deletion of this node's
    affiliate, which it asks for once a ``MachineResetSignal`` exists.
    """

    name = "cluster.DiscoveryServiceController"

    def __init__(self, client_factory: ClientFactory | None = None) -> None:
        self.inputs = (
            Input(DISCOVERY_CONFIGS, id=DISCOVERY_CONFIG_ID),
            Input(IDENTITIES, id=LOCAL_IDENTITY_ID),
            Input(AFFILIATES),
            Input(MACHINE_RESET_SIGNALS, id=MACHINE_RESET_SIGNAL_ID),
        )
        self.outputs = (Output(AFFILIATES, OutputKind.SHARED, RAW_NAMESPACE), Output(DISCOVERY_STATUSES))
        self._client_factory = client_factory or _default_client

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
                    ctx.clean_up_outputs(DISCOVERY_STATUSES, set())
                    continue
                wanted = (config.spec, identity.spec.node_id)
                if wanted != current:
                    await stop_client()
                    client = self._client_factory(*wanted)
                    client_task = asyncio.ensure_future(client.run(news.set))
                    current = wanted
                assert client is not None
                if ctx.get_or_none(MACHINE_RESET_SIGNALS, MACHINE_RESET_SIGNAL_ID) is not None:
                    client.delete_local()
                    status = DiscoveryStatusSpec(published=False, left=client.deleted.is_set())
                else:
                    local = ctx.get_or_none(AFFILIATES, identity.spec.node_id)
                    if local is not None:
                        client.set_local(affiliate_to_pb(local.spec), affiliate_endpoints(local.spec))
                    status = DiscoveryStatusSpec(published=local is not None)
                ctx.modify(DISCOVERY_STATUSES, DISCOVERY_STATUS_ID, status)
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
