"""Talos's rules for the ``machine`` section of a v1alpha1 config, and the entry point that checks a
whole v1alpha1 document (it calls the cluster and network rules from here, in Talos's order).
"""

from __future__ import annotations

import re
import urllib.parse

from . import _models as m
from ._paths import PathElem
from ._validate_base import Mode, _q, _Report, _subnet_or_address_ok, machine_type
from ._validate_cluster import _validate_cluster, _validate_cni
from ._validate_labels import validate_node_metadata
from ._validate_network import _validate_network

_ROLES = ("os:admin", "os:operator", "os:reader", "os:etcd:backup", "os:impersonator")
_KUBELET_PROTECTED = (
    "apiVersion",
    "authentication",
    "authorization",
    "cgroupRoot",
    "kind",
    "kubeletCgroups",
    "port",
    "protectKernelDefaults",
    "resolvConf",
    "rotateCertificates",
    "systemCgroups",
    "staticPodPath",
    "seccompDefault",
)


def _validate_v1alpha1(cfg: m.Config, mode: Mode, r: _Report) -> None:
    machine = cfg.machine
    if machine is None:
        r.error(["machine"], "machine instructions are required")
        return
    mtype = machine_type(machine.type)
    is_cp = mtype in ("init", "controlplane")

    _validate_cluster(cfg.cluster, is_cp, r)

    if mode.requires_install:
        install = machine.install
        if install is None:
            r.error(["machine", "install"], f"install instructions are required in {_q(mode.value)} mode")
        else:
            selector = install.disk_selector
            has_matchers = selector is not None and any(
                v not in (None, "") for v in selector.model_dump(by_alias=True).values()
            )
            if not install.disk and not has_matchers:
                r.error(["machine", "install"], "either install disk or diskSelector should be defined")

    features = machine.features
    host_dns = features.host_dns if features is not None else None
    if mode.in_container:
        if host_dns is None or not host_dns.enabled:
            r.error(
                ["machine", "features", "hostDNS", "enabled"],
                "feature HostDNS should be enabled in container mode (.machine.features.hostDNS.enabled)",
            )
        if host_dns is None or not host_dns.forward_kube_dns_to_host:
            r.error(
                ["machine", "features", "hostDNS", "forwardKubeDNSToHost"],
                "feature HostDNS should forward kube-dns to host in container mode "
                "(.machine.features.hostDNS.forwardKubeDNSToHost)",
            )

    given_type = machine.type or ""
    if mtype != "unknown" and mtype != given_type:
        r.warn(["machine", "type"], f"use {_q(mtype)} instead of {_q(given_type)} for machine type")

    ca = machine.ca
    accepted = machine.accepted_cas or []
    if ca is None and not accepted:
        r.error(
            ["machine", "ca"],
            "issuing CA or some accepted CAs are required (.machine.ca, machine.acceptedCAs)",
        )

    devices = (machine.network.interfaces or []) if machine.network is not None else []
    if is_cp:
        network = cfg.cluster.network if cfg.cluster is not None else None
        _validate_cni(network.cni if network is not None else None, r)
        if ca is None:
            r.error(["machine", "ca"], "issuing CA is required (.machine.ca)")
        elif not ca.key:
            r.error(
                ["machine", "ca", "key"],
                "issuing CA key is required for controlplane nodes (.machine.ca.key)",
            )
    elif mtype == "worker":
        for i, dev in enumerate(devices):
            if dev.vip is not None:
                r.error(
                    ["machine", "network", "interfaces", i, "vip"],
                    "virtual (shared) IP is not allowed on non-controlplane nodes",
                )
            for j, vlan in enumerate(dev.vlans or []):
                if vlan.vip is not None:
                    r.error(
                        ["machine", "network", "interfaces", i, "vlans", j, "vip"],
                        "virtual (shared) IP is not allowed on non-controlplane nodes",
                    )
        if ca is not None:
            if ca.key:
                r.error(
                    ["machine", "ca", "key"],
                    "issuing Talos API CA key is not allowed on non-controlplane nodes (.machine.ca)",
                )
            if not ca.crt and not accepted:
                r.error(
                    ["machine", "ca", "crt"],
                    "trusted CA certificates are required on non-controlplane nodes "
                    "(.machine.ca.crt, .machine.acceptedCAs)",
                )
        if cfg.cluster is not None and cfg.cluster.ca is not None and cfg.cluster.ca.key:
            r.error(
                ["cluster", "ca", "key"],
                "issuing Kubernetes API CA key is not allowed on non-controlplane nodes (.cluster.ca)",
            )
    else:
        r.error(["machine", "type"], f"unknown machine type {_q(given_type)}")

    if machine.network is not None:
        _validate_network(machine.network, r)

    for i, disk in enumerate(machine.disks or []):
        parts = disk.partitions or []
        for j, part in enumerate(parts):
            if _disk_size(part.size) == 0 and j != len(parts) - 1:
                r.error(
                    ["machine", "disks", i, "partitions", j, "size"],
                    f"partition for disk {_q(disk.device or '')} is set to occupy full disk, "
                    "but it's not the last partition in the list",
                )

    if machine.kubelet is not None:
        _validate_kubelet(machine.kubelet, r)

    encryption = machine.system_disk_encryption
    if encryption is not None:
        for label, attr in (("EPHEMERAL", "ephemeral"), ("STATE", "state")):
            enc = getattr(encryption, attr)
            if enc is None:
                continue
            base: list[PathElem] = ["machine", "systemDiskEncryption", attr]
            keys = enc.keys or []
            if not keys:
                r.error([*base, "keys"], f"partition {_q(label)}: no encryption keys provided")
            slots: set[int] = set()
            for k, key in enumerate(keys):
                slot = key.slot or 0
                if slot in slots:
                    r.error(
                        [*base, "keys", k, "slot"],
                        f"partition {_q(label)}: encryption key slot {slot} is already in use",
                    )
                slots.add(slot)
                if key.node_id is None and key.static is None and key.kms is None and key.tpm is None:
                    r.error(
                        [*base, "keys", k],
                        f"partition {_q(label)}: encryption key at slot {slot} doesn't have the configuration parameters",
                    )

    kubespan = machine.network.kubespan if machine.network is not None else None
    if kubespan is not None and kubespan.enabled:
        cluster = cfg.cluster
        discovery = cluster.discovery if cluster is not None else None
        if discovery is None or not discovery.enabled:
            r.error(
                ["cluster", "discovery", "enabled"],
                ".cluster.discovery should be enabled when .machine.network.kubespan is enabled",
            )
        if cluster is None or not cluster.id:
            r.error(["cluster", "id"], ".cluster.id should be set when .machine.network.kubespan is enabled")
        if cluster is None or not cluster.secret:
            r.error(
                ["cluster", "secret"],
                ".cluster.secret should be set when .machine.network.kubespan is enabled",
            )
        filters = kubespan.filters.endpoints if kubespan.filters is not None else None
        for i, cidr in enumerate(filters or []):
            if not _subnet_or_address_ok(cidr.removeprefix("!")):
                r.error(
                    ["machine", "network", "kubespan", "filters", "endpoints", i],
                    f"KubeSpan endpoint filer is not valid: {_q(cidr.removeprefix('!'))}",
                )

    if machine.logging is not None:
        for i, dest in enumerate(machine.logging.destinations or []):
            _validate_logging_destination(dest, ["machine", "logging", "destinations", i], r)

    if machine.install is not None:
        images: set[str] = set()
        for i, ext in enumerate(machine.install.extensions or []):
            image = ext.image or ""
            if image in images:
                r.error(
                    ["machine", "install", "extensions", i, "image"],
                    f"duplicate system extension {_q(image)}",
                )
            images.add(image)
        if images:
            r.warn(
                ["machine", "install", "extensions"],
                ".machine.install.extensions is deprecated, please see "
                "https://www.talos.dev/latest/talos-guides/install/boot-assets/",
            )

    access = features.kubernetes_talos_api_access if features is not None else None
    if access is not None and access.enabled:
        if not (features is not None and features.rbac):
            r.error(
                ["machine", "features", "rbac"],
                "feature API RBAC should be enabled when Kubernetes Talos API Access feature is enabled",
            )
        if not is_cp:
            r.error(
                ["machine", "features", "kubernetesTalosAPIAccess"],
                "feature Kubernetes Talos API Access can only be enabled on control plane machines",
            )
        for i, role in enumerate(access.allowed_roles or []):
            if role not in _ROLES:
                r.error(
                    ["machine", "features", "kubernetesTalosAPIAccess", "allowedRoles", i],
                    f"invalid role {_q(role)} in allowed roles for Kubernetes Talos API Access",
                )

    validate_node_metadata(machine.node_labels, machine.node_taints, r)

    if cfg.persist is False:
        r.error(["persist"], ".persist should be enabled")

    # The models type these maps as dict[str, Model]; a YAML `null` value arrives as None.
    registries = machine.registries
    if registries is not None:
        for key, val in (registries.config or {}).items():
            if val is None:
                r.error(["machine", "registries", "config", key], f"registries.config[{_q(key)}] is null")
        for key, mirror in (registries.mirrors or {}).items():
            if mirror is None:
                r.error(["machine", "registries", "mirrors", key], f"registries.mirrors[{_q(key)}] is null")
                continue
            for i, endpoint in enumerate(mirror.endpoints or []):
                endpoint_url = urllib.parse.urlsplit(str(endpoint))
                if endpoint_url.scheme not in ("http", "https") or not endpoint_url.hostname:
                    r.error(
                        ["machine", "registries", "mirrors", key, "endpoints", i],
                        f"invalid mirror endpoint {_q(endpoint)}: an http:// or https:// URL is expected",
                    )


def _disk_size(size: int | str | None) -> int:
    if size is None:
        return 0
    if isinstance(size, int):
        return size
    digits = re.match(r"^\s*([0-9.]+)", size)
    return 0 if digits is None or float(digits.group(1)) == 0 else 1


def _validate_kubelet(kubelet: m.KubeletConfig, r: _Report) -> None:
    base: list[PathElem] = ["machine", "kubelet"]
    subnets = kubelet.node_ip.valid_subnets if kubelet.node_ip is not None else None
    for i, cidr in enumerate(subnets or []):
        if not _subnet_or_address_ok(cidr.removeprefix("!")):
            r.error(
                [*base, "nodeIP", "validSubnets", i],
                f"kubelet nodeIP subnet is not valid: {_q(cidr.removeprefix('!'))}",
            )
    extra = kubelet.extra_config or {}
    for key in _KUBELET_PROTECTED:
        if key in extra:
            r.error([*base, "extraConfig", key], f"kubelet configuration field {_q(key)} can't be overridden")


def _validate_logging_destination(dest: m.LoggingDestination, base: list[PathElem], r: _Report) -> None:
    if not dest.endpoint:
        r.error([*base, "endpoint"], "empty logging endpoint")
    else:
        url = urllib.parse.urlsplit(dest.endpoint)
        if not url.netloc.rpartition("@")[2]:
            r.error([*base, "endpoint"], "empty logging endpoint's host")
        if url.scheme not in ("tcp", "udp"):
            r.error([*base, "endpoint"], f"unexpected logging endpoint scheme {_q(url.scheme)}")
    if dest.format != "json_lines":
        r.error([*base, "format"], f"unknown logging format {_q(dest.format or '')}")
