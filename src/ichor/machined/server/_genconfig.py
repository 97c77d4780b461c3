"""``GenerateConfiguration`` of ``machine.MachineService``: a machine config and talosconfig made on
the node from the request, as Talos's ``configuration.Generate`` makes them.

The request names the machine type (init, controlplane, worker), the cluster's name and control
plane endpoint, the Kubernetes version, and optionally the install disk and image, the DNS domain,
the CNI, scheduling on control planes, a hostname and interfaces. The secrets are the node's own
(taken from its running machine config, so the result joins this cluster), or a new bundle when
the node has no config. The config is rendered as ``gen config`` renders it (with docs and
examples, as Talos's encoder does by default); the talosconfig's one context is named after the
cluster with the endpoint's host as its endpoint. Worker nodes refuse, as Talos's do.

Errors are Talos's texts, sent with gRPC code Unknown as a plain Go error is. This module computes
bytes; it must not write the node's config or touch its state.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION
from ichor.machinery.errors import MachineryError

__all__ = ["WORKER_REFUSAL", "generate_configuration"]

WORKER_REFUSAL = "config can't be generated on worker nodes"

_TYPES = {
    machine_pb2.MachineConfig.TYPE_INIT: "init",
    machine_pb2.MachineConfig.TYPE_CONTROL_PLANE: "controlplane",
    machine_pb2.MachineConfig.TYPE_WORKER: "worker",
}


def _error(text: str) -> GRPCError:
    return GRPCError(Status.UNKNOWN, text)


def _interface(device: machine_pb2.NetworkDeviceConfig) -> dict[str, Any]:
    """One ``machine.network.interfaces`` entry; empty values are left out, as Talos's encoder does
    (``dhcp`` and ``ignore`` are pointers Talos always sets, so they are always there)."""
    entry: dict[str, Any] = {"interface": device.interface} if device.interface else {}
    if device.cidr:
        entry["cidr"] = device.cidr
    if device.mtu:
        entry["mtu"] = device.mtu
    entry["dhcp"] = device.dhcp
    entry["ignore"] = device.ignore
    routes = []
    for route in device.routes:
        item: dict[str, Any] = {"network": route.network}
        if route.gateway:
            item["gateway"] = route.gateway
        if route.metric:
            item["metric"] = route.metric
        routes.append(item)
    if routes:
        entry["routes"] = routes
    if device.HasField("dhcp_options") and device.dhcp_options.route_metric:
        entry["dhcpOptions"] = {"routeMetric": device.dhcp_options.route_metric}
    return entry


def _request_patch(request: machine_pb2.GenerateConfigurationRequest, machine_type: str) -> dict[str, Any]:
    machine: dict[str, Any] = {}
    cluster: dict[str, Any] = {}
    if machine_type == "init":
        machine["type"] = "init"
    if request.machine_config.HasField("network_config"):
        network_config = request.machine_config.network_config
        network: dict[str, Any] = {}
        if network_config.hostname:
            network["hostname"] = network_config.hostname
        if network_config.interfaces:
            network["interfaces"] = [_interface(d) for d in network_config.interfaces]
        if network:
            machine["network"] = network
    cluster_network = request.cluster_config.cluster_network
    if request.cluster_config.HasField("cluster_network") and cluster_network.HasField("cni_config"):
        cni: dict[str, Any] = {"name": cluster_network.cni_config.name}
        if cluster_network.cni_config.urls:
            cni["urls"] = list(cluster_network.cni_config.urls)
        cluster["network"] = {"cni": cni}
    if request.cluster_config.allow_scheduling_on_control_planes:
        cluster["allowSchedulingOnControlPlanes"] = True
    return {k: v for k, v in (("machine", machine), ("cluster", cluster)) if v}


def _bundle(node_config: str | None, now: datetime) -> Any:
    from ichor.machinery.docident import is_v1alpha1
    from ichor.machinery.secrets import SecretsBundle
    from ichor.machinery.yamlio import load_documents

    if node_config is None:
        return SecretsBundle.generate(now=now)
    for doc in load_documents(node_config, source="the node's machine config"):
        if isinstance(doc, dict) and is_v1alpha1(doc):
            return SecretsBundle.from_controlplane_config(doc)
    raise _error("the node's machine config has no v1alpha1 document")


def generate_configuration(
    request: machine_pb2.GenerateConfigurationRequest,
    *,
    node_type: str,
    node_config: str | None,
    now: datetime | None = None,
) -> machine_pb2.GenerateConfiguration:
    """The reply element for ``request`` on a node of ``node_type`` whose config text is ``node_config``."""
    from ichor.machinery.generate import GenOptions, OutputType, generate
    from ichor.machinery.patch import parse_patch

    if node_type == "worker":
        raise _error(WORKER_REFUSAL)
    if (
        not request.HasField("machine_config")
        or not request.HasField("cluster_config")
        or not request.cluster_config.HasField("control_plane")
    ):
        raise _error("invalid generate request")
    if request.config_version != "v1alpha1":
        raise _error(f"unsupported config version {request.config_version}")
    machine_type = _TYPES.get(request.machine_config.type)
    if machine_type is None:
        raise _error("failed to determine config type to generate")
    if request.HasField("override_time"):
        now = request.override_time.ToDatetime(tzinfo=UTC)
    now = now or datetime.now(UTC)
    endpoint = request.cluster_config.control_plane.endpoint
    install = request.machine_config.install_config
    cluster_network = request.cluster_config.cluster_network
    options: dict[str, Any] = {
        "cluster_name": request.cluster_config.name,
        "endpoint": endpoint,
        "kubernetes_version": request.machine_config.kubernetes_version.removeprefix("v")
        or DEFAULT_KUBERNETES_VERSION,
    }
    if install.install_disk:
        options["install_disk"] = install.install_disk
    if install.install_image:
        options["install_image"] = install.install_image
    if cluster_network.dns_domain:
        options["dns_domain"] = cluster_network.dns_domain
    patch = _request_patch(request, machine_type)
    output = OutputType.WORKER if machine_type == "worker" else OutputType.CONTROLPLANE
    try:
        bundle = _bundle(node_config, now)
        patches = [parse_patch(json.dumps(patch), source="GenerateConfigurationRequest")] if patch else []
        result = generate(
            bundle, GenOptions(**options), output_types=(output, OutputType.TALOSCONFIG), patches=patches,
            talosconfig_endpoints=[urlsplit(endpoint).hostname or ""], now=now,
        )  # fmt: skip
    except MachineryError as exc:
        raise _error(str(exc)) from None
    return machine_pb2.GenerateConfiguration(
        data=[result.outputs[output].encode()], talosconfig=result.outputs[OutputType.TALOSCONFIG].encode()
    )
