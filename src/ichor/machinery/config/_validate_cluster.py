"""Talos's rules for the ``cluster`` section of a v1alpha1 config: control-plane endpoint, network,
etcd, CAs, inline manifests, discovery, component resources and the CNI.
"""

from __future__ import annotations

import urllib.parse

from . import _models as m
from ._paths import PathElem
from ._validate_base import (
    _parse_cidr,
    _parse_request_uri_error,
    _q,
    _Report,
    _subnet_or_address_ok,
    endpoint_uri_error,
    is_valid_dns_name,
)

_DEFAULT_DISCOVERY_ENDPOINT = "https://discovery.talos.dev/"


def _validate_cluster(cluster: m.ClusterConfig | None, is_cp: bool, r: _Report) -> None:
    if cluster is None:
        r.error(["cluster"], "cluster instructions are required")
        return
    if cluster.control_plane is None or cluster.control_plane.endpoint is None:
        r.error(["cluster", "controlPlane", "endpoint"], "cluster controlplane endpoint is required")
        return
    err = endpoint_uri_error(cluster.control_plane.endpoint)
    if err:
        r.error(["cluster", "controlPlane", "endpoint"], f"invalid controlplane endpoint: {err}")

    network = cluster.network
    if network is not None and network.dns_domain and not is_valid_dns_name(network.dns_domain):
        r.error(["cluster", "network", "dnsDomain"], f"{_q(network.dns_domain)} is not a valid DNS name")
    if network is not None:
        # Not in Talos's Validate (Talos fails later, at boot); a wrong subnet is never usable.
        for attr, key in (("pod_subnets", "podSubnets"), ("service_subnets", "serviceSubnets")):
            for i, subnet in enumerate(getattr(network, attr) or []):
                if not _parse_cidr(subnet):
                    r.error(["cluster", "network", key, i], f"{_q(subnet)} is not a valid CIDR")

    ecp = cluster.external_cloud_provider
    if ecp is not None:
        manifests = ecp.manifests or []
        if not ecp.enabled and manifests:
            r.error(
                ["cluster", "externalCloudProvider", "manifests"],
                "external cloud provider is disabled, but manifests are provided",
            )
        else:
            for i, url in enumerate(manifests):
                err = endpoint_uri_error(url)
                if err:
                    r.error(
                        ["cluster", "externalCloudProvider", "manifests", i],
                        f"invalid external cloud provider manifest url {_q(url)}: {err}",
                    )

    etcd = cluster.etcd
    if etcd is not None:
        if not is_cp:
            r.error(["cluster", "etcd"], "etcd config is only allowed on control plane machines")
        else:
            if etcd.ca is None:
                r.error(["cluster", "etcd", "ca"], "key/cert combination should not be empty")
            if etcd.subnet and etcd.advertised_subnets:
                r.error(
                    ["cluster", "etcd", "subnet"], "etcd subnet can't be set when advertised subnets are set"
                )
            advertised = etcd.advertised_subnets or ([etcd.subnet] if etcd.subnet else [])
            for i, cidr in enumerate(advertised):
                if not _subnet_or_address_ok(cidr.removeprefix("!")):
                    r.error(
                        ["cluster", "etcd", "advertisedSubnets", i],
                        f"etcd advertised subnet is not valid: {_q(cidr.removeprefix('!'))}",
                    )
            for i, cidr in enumerate(etcd.listen_subnets or []):
                if not _subnet_or_address_ok(cidr.removeprefix("!")):
                    r.error(
                        ["cluster", "etcd", "listenSubnets", i],
                        f"etcd listen subnet is not valid: {_q(cidr.removeprefix('!'))}",
                    )

    if cluster.ca is not None and not is_cp and cluster.ca.key:
        r.error(
            ["cluster", "ca", "key"], "cluster CA key is not allowed on non-controlplane nodes (.cluster.ca)"
        )

    names: set[str] = set()
    for i, manifest in enumerate(cluster.inline_manifests or []):
        name = manifest.name or ""
        if name.strip() == "":
            r.error(["cluster", "inlineManifests", i, "name"], "inline manifest name can't be empty")
        if name in names:
            r.error(
                ["cluster", "inlineManifests", i, "name"], f"inline manifest name {_q(name)} is duplicate"
            )
        names.add(name)

    discovery = cluster.discovery
    if discovery is not None and discovery.enabled:
        registries = discovery.registries
        service = registries.service if registries is not None else None
        if service is None or not service.disabled:
            endpoint = (service.endpoint if service is not None else None) or _DEFAULT_DISCOVERY_ENDPOINT
            err = _parse_request_uri_error(endpoint)
            path: list[PathElem] = ["cluster", "discovery", "registries", "service", "endpoint"]
            if err:
                r.error(path, f"cluster discovery service registry endpoint is invalid: {err}")
            elif urllib.parse.urlsplit(endpoint).path not in ("", "/"):
                r.error(path, "cluster discovery service path should be empty")
            if not cluster.id:
                r.error(["cluster", "id"], "cluster discovery service requires .cluster.id")
            if not cluster.secret:
                r.error(["cluster", "secret"], "cluster discovery service requires .cluster.secret")

    for key, name, comp in (
        ("apiServer", "apiserver", cluster.api_server),
        ("controllerManager", "controller-manager", cluster.controller_manager),
        ("scheduler", "scheduler", cluster.scheduler),
    ):
        resources = comp.resources if comp is not None else None
        if not resources:
            continue
        for section in ("requests", "limits"):
            values = resources.get(section) or {}
            if not isinstance(values, dict):
                continue
            bad = [k for k in values if k not in ("cpu", "memory")]
            if bad:
                r.error(
                    ["cluster", key, "resources", section, str(bad[0])],
                    f"{name} resource validation failed: unsupported pod resource {_q(bad[0])}",
                )
                break


def _validate_cni(cni: m.CNIConfig | None, r: _Report) -> None:
    if cni is None:
        return  # flannel by default
    name = cni.name or ""
    urls = cni.urls or []
    flannel_args = cni.flannel.extra_args if cni.flannel is not None else None
    base: list[PathElem] = ["cluster", "network", "cni"]
    if name in ("flannel", "none"):
        if urls:
            r.error([*base, "urls"], f'"urls" field should be empty for {_q(name)} CNI')
        if name == "none" and flannel_args:
            r.error(
                [*base, "flannel", "extraArgs"],
                f'"flanneldExtraArgs" field should be empty for {_q(name)} CNI',
            )
    elif name == "custom":
        if not urls:
            r.warn([*base, "urls"], f'"urls" field should not be empty for {_q(name)} CNI')
        if flannel_args:
            r.error(
                [*base, "flannel", "extraArgs"],
                f'"flanneldExtraArgs" field should be empty for {_q(name)} CNI',
            )
        for i, url in enumerate(urls):
            err = endpoint_uri_error(url)
            if err:
                r.error([*base, "urls", i], err)
    else:
        r.error([*base, "name"], 'cni name should be one of ["flannel", "custom", "none"]')
