"""Area ``k8s``, bootstrap manifests: from the machine config to ``Manifests`` (control planes only).

* ``k8s.BootstrapManifestsConfigController``: MachineConfig + MachineType + HostDNSConfig ->
  BootstrapManifestsConfig ``manifests`` (images, pod CIDRs, DNS service IP = service CIDR + 10,
  the API server URL pods use: KubePrism's ``https://127.0.0.1:<port>`` when it is on);
* ``k8s.ExtraManifestsConfigController``: MachineConfig + MachineType -> ExtraManifestsConfig
  ``extra-manifests`` (custom CNI URLs at priority ``05``, ``extraManifests`` URLs and
  ``inlineManifests`` at ``99``);
* ``k8s.ManifestController``: BootstrapManifestsConfig + the bootstrap token -> Manifests with
  Talos 1.7's ids, whose sort order is the apply order.

The extra manifests' download is :mod:`.extra_manifests`; the apply is :mod:`.manifest_apply`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.controllers.k8s import _bootstrap_objects as objects
from ichor.machined.cosi import (
    ControllerContext,
    Input,
    OutputKind,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.resources import (
    BOOTSTRAP_MANIFESTS_CONFIG_ID,
    BOOTSTRAP_MANIFESTS_CONFIGS,
    EXTRA_MANIFESTS_CONFIG_ID,
    EXTRA_MANIFESTS_CONFIGS,
    HOST_DNS_CONFIG_ID,
    HOST_DNS_CONFIGS,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    MANIFESTS,
    BootstrapManifestsConfigSpec,
    ExtraManifest,
    ExtraManifestsConfigSpec,
    ManifestSpec,
)
from ichor.machinery import constants
from ichor.machinery.config import Config

__all__ = [
    "DEFAULT_KUBEPRISM_PORT",
    "bootstrap_manifests_config_controller",
    "extra_manifests_config_controller",
    "manifest_controller",
    "render_bootstrap_manifests",
]

DEFAULT_KUBEPRISM_PORT = 7445
_DNS_SERVICE_INDEX = 10


def _control_plane_config(ctx: ControllerContext) -> Config | None:
    """The config on a control plane, None on a worker; skips the pass until both are known."""
    config = active_config(ctx)
    machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
    if machine_type is None:
        raise SkipReconcile
    return config if machine_type.spec.is_control_plane else None


def _nth(subnet: str, index: int, key: str) -> str:
    try:
        network = ipaddress.ip_network(subnet.strip(), strict=False)
    except ValueError:
        raise WaitingFor("manifests config", f"{key}: {subnet!r} is not a CIDR (fix {key})") from None
    return str(network.network_address + index)


def _kube_prism_port(config: Config) -> int | None:
    features = config.machine.features if config.machine is not None else None
    prism = features.kube_prism if features is not None else None
    if prism is None or not prism.enabled:
        return None
    return prism.port or DEFAULT_KUBEPRISM_PORT


def _bootstrap_config(config: Config, host_dns_address: str) -> BootstrapManifestsConfigSpec:
    cluster = config.cluster
    assert cluster is not None
    network = cluster.network
    pod_cidrs = (
        tuple(network.pod_subnets or [])
        if network and network.pod_subnets
        else (constants.DEFAULT_POD_SUBNET,)
    )
    services = (
        list(network.service_subnets or [])
        if network and network.service_subnets
        else [constants.DEFAULT_SERVICE_SUBNET]
    )
    dns_v4 = next(
        (_nth(s, _DNS_SERVICE_INDEX, "cluster.network.serviceSubnets") for s in services if ":" not in s), ""
    )
    dns_v6 = next(
        (_nth(s, _DNS_SERVICE_INDEX, "cluster.network.serviceSubnets") for s in services if ":" in s), ""
    )
    cni = network.cni if network is not None else None
    cni_name = (cni.name if cni is not None else None) or "flannel"
    proxy, core_dns = cluster.proxy, cluster.core_dns
    images = constants.Images()
    proxy_args = {
        "cluster-cidr": ",".join(pod_cidrs), "conntrack-max-per-core": "0", "hostname-override": "$(NODE_NAME)",
        "kubeconfig": "/etc/kubernetes/kubeconfig", "proxy-mode": (proxy.mode if proxy else None) or "iptables",
    }  # fmt: skip
    proxy_args.update({str(k): str(v) for k, v in ((proxy.extra_args if proxy else None) or {}).items()})
    prism_port = _kube_prism_port(config)
    endpoint = (cluster.control_plane.endpoint if cluster.control_plane else None) or ""
    features = config.machine.features if config.machine is not None else None
    api_access = features.kubernetes_talos_api_access if features is not None else None
    return BootstrapManifestsConfigSpec(
        server=f"https://127.0.0.1:{prism_port}" if prism_port else endpoint,
        cluster_domain=(network.dns_domain if network else None) or constants.DEFAULT_DNS_DOMAIN,
        pod_cidrs=pod_cidrs,
        proxy_enabled=not (proxy is not None and proxy.disabled),
        proxy_image=(proxy.image if proxy else None) or images.kube_proxy,
        proxy_args=tuple(f"--{k}={v}" for k, v in sorted(proxy_args.items())),
        core_dns_enabled=not (core_dns is not None and core_dns.disabled),
        core_dns_image=(core_dns.image if core_dns else None) or images.coredns,
        dns_service_ip=dns_v4, dns_service_ipv6=dns_v6,
        flannel_enabled=cni_name == "flannel",
        flannel_image=images.flannel,
        flannel_extra_args=tuple((cni.flannel.extra_args or []) if cni and cni.flannel else ()),
        flannel_kube_service_host="127.0.0.1" if prism_port else "",
        flannel_kube_service_port=str(prism_port) if prism_port else "",
        talos_api_service_enabled=bool(api_access is not None and api_access.enabled),
        service_host_dns_address=host_dns_address,
    )  # fmt: skip


def bootstrap_manifests_config_controller() -> TransformController[BootstrapManifestsConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, BootstrapManifestsConfigSpec]:
        config = _control_plane_config(ctx)
        if config is None or config.cluster is None:
            return {}
        host_dns = ctx.get_or_none(HOST_DNS_CONFIGS, HOST_DNS_CONFIG_ID)
        address = host_dns.spec.service_host_dns_address if host_dns is not None else ""
        return {BOOTSTRAP_MANIFESTS_CONFIG_ID: _bootstrap_config(config, address)}

    return TransformController(
        "k8s.BootstrapManifestsConfigController",
        inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID), Input(HOST_DNS_CONFIGS, id=HOST_DNS_CONFIG_ID)],
        output=BOOTSTRAP_MANIFESTS_CONFIGS, map_inputs=derive,
    )  # fmt: skip


def extra_manifests_config_controller() -> TransformController[ExtraManifestsConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, ExtraManifestsConfigSpec]:
        config = _control_plane_config(ctx)
        cluster = config.cluster if config is not None else None
        if cluster is None:
            return {}
        headers = {str(k): str(v) for k, v in (cluster.extra_manifest_headers or {}).items()}
        cni = cluster.network.cni if cluster.network is not None else None
        found: list[ExtraManifest] = []
        if cni is not None and cni.name == "custom":
            found += [
                ExtraManifest(name=str(u), url=str(u), priority="05", extra_headers=headers)
                for u in cni.urls or []
            ]
        found += [
            ExtraManifest(name=str(u), url=str(u), extra_headers=headers)
            for u in cluster.extra_manifests or []
        ]
        found += [
            ExtraManifest(name=str(m.name or ""), inline_manifest=str(m.contents or ""))
            for m in cluster.inline_manifests or []
        ]
        return {EXTRA_MANIFESTS_CONFIG_ID: ExtraManifestsConfigSpec(extra_manifests=tuple(found))}

    return TransformController(
        "k8s.ExtraManifestsConfigController", inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=EXTRA_MANIFESTS_CONFIGS, map_inputs=derive,
    )  # fmt: skip


Render = Callable[[], list[dict[str, Any]]]


def render_bootstrap_manifests(spec: BootstrapManifestsConfigSpec, token: str) -> dict[str, ManifestSpec]:
    """Talos 1.7's bootstrap manifests by id (sorted ids = apply order); ``token`` is ``id.secret``."""
    token_id, _, token_secret = token.partition(".")
    wanted: list[tuple[str, Render]] = [
        (
            "00-kubelet-bootstrapping-token",
            lambda: objects.kubelet_bootstrapping_token(token_id, token_secret),
        ),
        ("01-csr-node-bootstrap", objects.csr_node_bootstrap),
        ("01-csr-approver-role-binding", objects.csr_approver_role_binding),
        ("01-csr-renewal-role-binding", objects.csr_renewal_role_binding),
        ("11-kube-config-in-cluster", lambda: objects.kubeconfig_in_cluster(spec.server)),
    ]
    if spec.core_dns_enabled:
        wanted += [
            ("11-core-dns", lambda: objects.coredns(spec)),
            ("11-core-dns-svc", lambda: objects.coredns_service(spec)),
        ]
    if spec.flannel_enabled:
        wanted.append(("05-flannel", lambda: objects.flannel(spec)))
    if spec.proxy_enabled:
        wanted.append(("10-kube-proxy", lambda: objects.kube_proxy(spec)))
    if spec.talos_api_service_enabled:
        wanted += [
            ("12-talos-api-service", objects.talos_api_service),
            ("13-talos-service-account-crd", objects.talos_service_account_crd),
        ]
    if spec.service_host_dns_address:
        wanted.append(
            ("15-host-dns-service", lambda: objects.host_dns_service(spec.service_host_dns_address))
        )
    return {name: ManifestSpec(items=tuple(render())) for name, render in sorted(wanted)}


def manifest_controller() -> TransformController[ManifestSpec]:
    def derive(ctx: ControllerContext) -> dict[str, ManifestSpec]:
        spec = ctx.get_or_none(BOOTSTRAP_MANIFESTS_CONFIGS, BOOTSTRAP_MANIFESTS_CONFIG_ID)
        if spec is None:
            return {}
        config = active_config(ctx)
        token = str(config.cluster.token or "") if config.cluster is not None else ""
        if "." not in token:
            raise WaitingFor("bootstrap token", "cluster.token is not <id>.<secret> (fix cluster.token)")
        return render_bootstrap_manifests(spec.spec, token)

    return TransformController(
        "k8s.ManifestController",
        inputs=[ACTIVE_CONFIG, Input(BOOTSTRAP_MANIFESTS_CONFIGS, id=BOOTSTRAP_MANIFESTS_CONFIG_ID)],
        output=MANIFESTS, map_inputs=derive, output_kind=OutputKind.SHARED,
    )  # fmt: skip
