"""Talos 1.7 validation rules for decoded machine configs, reported all at once with YAML paths.

Messages are Talos's texts (``v1alpha1_validation.go`` and each document kind's ``Validate``), each
prefixed with the YAML path it is about: ``machine.install: install instructions are required in
"metal" mode``. Documents other than v1alpha1 are prefixed with Talos's document id
(``KmsgLogConfig/remote-log: url: url is required``). Validation is local (``talosctl validate``): it
never looks at disks or the network, and it never changes the config.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from ichor.machinery import goduration, goquote
from ichor.machinery.errors import ConfigValidationError, DurationError

from . import _models as m
from ._document import Container, Document
from ._paths import PathElem, format_path


class Mode(StrEnum):
    """Where the machine runs; decides which rules apply (``talosctl validate --mode``)."""

    METAL = "metal"
    CLOUD = "cloud"
    CONTAINER = "container"

    @property
    def requires_install(self) -> bool:
        return self is Mode.METAL

    @property
    def in_container(self) -> bool:
        return self is Mode.CONTAINER


@dataclass
class ValidationResult:
    """Every error and warning found; ``ok`` when there are no errors."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# --- Go helpers, re-expressed -------------------------------------------------------------------

_DNS_NAME = re.compile(r"^([a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})*[._]?$")
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
_BOND_MODES = (
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
)
# nethelpers *ByName: the accepted names ("" means the kernel default) and Talos's error text.
_BOND_ENUMS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "xmitHashPolicy",
        ("", "layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4"),
        "invalid xmit hash policy",
    ),
    ("lacpRate", ("", "slow", "fast"), "invalid lacp rate"),
    ("arpValidate", ("", "none", "active", "backup", "all"), "invalid arp validate mode"),
    ("arpAllTargets", ("", "any", "all"), "invalid arp all targets mode"),
    ("primaryReselect", ("", "always", "better", "failure"), "invalid primary reselect mode"),
    ("failOverMac", ("", "none", "active", "follow"), "invalid fail over mac mode"),
    ("adSelect", ("", "stable", "bandwidth", "count"), "invalid ad select mode"),
)
_DEFAULT_DISCOVERY_ENDPOINT = "https://discovery.talos.dev/"
_KUBESPAN_MIN_MTU = 1280
_KUBESPAN_DEFAULT_MTU = 1420


def is_valid_dns_name(name: str) -> bool:
    if name == "" or len(name) - name.count(".") > 255:
        return False
    return _DNS_NAME.match(name) is not None


def _parse_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


def _parse_cidr(text: str) -> bool:
    addr, sep, bits = text.partition("/")
    if not sep or not bits.isdigit() or not _parse_ip(addr):
        return False
    return int(bits) <= (32 if ":" not in addr else 128)


def _ip_or_cidr_error(text: str) -> str | None:
    if "/" in text:
        return None if _parse_cidr(text) else f"invalid CIDR address: {text}"
    return None if _parse_ip(text) else f"failed to parse IP address {_q(text)}"


def _subnet_or_address_ok(text: str) -> bool:
    return _parse_cidr(text) if "/" in text else _parse_ip(text)


def endpoint_uri_error(ep: str) -> str | None:
    """sideronet.ValidateEndpointURI: a URL with a host, bracketed IPv6 and a sane port."""
    try:
        parts = urllib.parse.urlsplit(ep)
    except ValueError as exc:
        return f"parse {_q(ep)}: {exc}"
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.count(":") > 2 and ("[" not in netloc or "]" not in netloc):
        return "IPv6 addresses MUST be enclosed by square brackets"
    host, port = netloc, ""
    if netloc.startswith("["):
        host, _, rest = netloc.partition("]")
        host = host[1:]
        port = rest[1:] if rest.startswith(":") else ""
    elif ":" in netloc:
        host, _, port = netloc.rpartition(":")
    if host == "":
        return "hostname must not be blank"
    if port != "":
        if not port.isdigit():
            return f"parse {_q(ep)}: invalid port {_q(':' + port)} after host"
        if not 1 <= int(port) <= 65535:
            return "port number must be between 1 and 65535"
    return None


def _q(text: object) -> str:
    """Go's %q of ``text``'s string form, as Talos's validation messages print it."""
    return goquote.quote(str(text))


def _parse_request_uri_error(text: str) -> str | None:
    """net/url.ParseRequestURI's main refusals."""
    if text == "":
        return 'parse "": empty url'
    parts = urllib.parse.urlsplit(text)
    if not parts.scheme and not text.startswith("/"):
        return f"parse {_q(text)}: invalid URI for request"
    return None


def machine_type(value: str | None) -> str:
    """machine.ParseType: ``init``/``controlplane``/``worker`` (``join`` and ``""`` are worker)."""
    text = value or ""
    if text in ("init", "controlplane"):
        return text
    if text in ("worker", "join", ""):
        return "worker"
    return "unknown"


# --- the checker ---------------------------------------------------------------------------------


class _Report:
    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def _fmt(self, path: Sequence[PathElem], message: str) -> str:
        where = format_path(path) if path else ""
        text = f"{where}: {message}" if where else message
        return f"{self.prefix}: {text}" if self.prefix else text

    def error(self, path: Sequence[PathElem], message: str) -> None:
        self.errors.append(self._fmt(path, message))

    def warn(self, path: Sequence[PathElem], message: str) -> None:
        self.warnings.append(self._fmt(path, message))


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


def _disk_size(size: int | str | None) -> int:
    if size is None:
        return 0
    if isinstance(size, int):
        return size
    digits = re.match(r"^\s*([0-9.]+)", size)
    return 0 if digits is None or float(digits.group(1)) == 0 else 1


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


def _validate_network(network: m.NetworkConfig, r: _Report) -> None:
    devices = network.interfaces or []
    secondary: dict[str, str] = {}
    for i, dev in enumerate(devices):
        name = dev.interface or ""
        base: list[PathElem] = ["machine", "network", "interfaces", i]
        if dev.bond is not None and dev.bridge is not None:
            r.error(
                base,
                f"interface has both bridge and bond sections set {_q(name)}: config sections are mutually exclusive",
            )
        members: list[str] = []
        if dev.bond is not None:
            members = dev.bond.interfaces or []
            if members and dev.bond.device_selectors:
                r.error(
                    [*base, "bond"],
                    f"interface {_q(name)} has both interfaces and selectors set: config sections are mutually exclusive",
                )
        if dev.bridge is not None:
            members = dev.bridge.interfaces or []
        for member in members:
            other = secondary.get(member)
            if other is not None and other != name:
                r.error(
                    base,
                    f"interface {_q(member)} is declared as part of two separate links: {_q(other)} and {_q(name)}",
                )
            secondary[member] = name

    for i, dev in enumerate(devices):
        if dev.ignore:
            continue
        _check_device(dev, ["machine", "network", "interfaces", i], secondary, r)

    kubespan = network.kubespan
    if kubespan is not None and kubespan.enabled:
        mtu = kubespan.mtu if kubespan.mtu is not None else _KUBESPAN_DEFAULT_MTU
        if mtu < _KUBESPAN_MIN_MTU:
            r.error(
                ["machine", "network", "kubespan", "mtu"],
                f"kubespan link MTU must be at least {_KUBESPAN_MIN_MTU}",
            )


def _check_device(dev: m.Device, base: list[PathElem], secondary: dict[str, str], r: _Report) -> None:
    name = dev.interface or ""
    iface, sel = "networking.os.device.interface", "networking.os.device.deviceSelector"
    if not name and dev.device_selector is None:
        r.error(base, f"[{iface}], [{sel}]: required either config section to be set")
    elif name and dev.device_selector is not None:
        r.error(base, f"[{iface}], [{sel}]: config sections are mutually exclusive")
    if dev.device_selector is not None and not any(
        v is not None for v in dev.device_selector.model_dump().values()
    ):
        r.error([*base, "deviceSelector"], f"[{sel}]: config section should contain at least one field")
    if dev.bond is not None:
        _check_bond(dev.bond, [*base, "bond"], r)
    if dev.wireguard is not None:
        _check_wireguard(dev.wireguard, [*base, "wireguard"], r)
    for j, vlan in enumerate(dev.vlans or []):
        vbase = [*base, "vlans", j]
        label = f"{name}.{vlan.vlan_id or 0}"
        if vlan.addresses and vlan.cidr:
            r.error(
                vbase, f"[networking.os.device.vlan] {label}: vlan can't have both .cidr and .addresses set"
            )
        if vlan.cidr:
            err = _ip_or_cidr_error(vlan.cidr)
            if err:
                r.error([*vbase, "cidr"], f"[networking.os.device.vlan.CIDR] {label}: {err}")
        for k, address in enumerate(vlan.addresses or []):
            err = _ip_or_cidr_error(address)
            if err:
                r.error([*vbase, "addresses", k], f"[networking.os.device.vlan.addresses] {label}: {err}")

    # CheckDeviceAddressing
    if name in secondary and (dev.dhcp or dev.cidr or dev.addresses or dev.vip is not None):
        r.error(
            base,
            f"[networking.os.device] {_q(name)}: bonded/bridged interface shouldn't have any addressing methods configured",
        )
    if dev.addresses and dev.cidr:
        r.error(
            base, f"[networking.os.device] {_q(name)}: interface can't have both .cidr and .addresses set"
        )
    if dev.cidr:
        err = _ip_or_cidr_error(dev.cidr)
        if err:
            r.error([*base, "cidr"], f"[networking.os.device.CIDR] {_q(name)}: {err}")
        r.warn(
            [*base, "cidr"],
            f"{_q(name)}: machine.network.interface.cidr is deprecated, please use machine.network.interface.addresses",
        )
    for k, address in enumerate(dev.addresses or []):
        err = _ip_or_cidr_error(address)
        if err:
            r.error([*base, "addresses", k], f"[networking.os.device.addresses] {_q(name)}: {err}")
    if dev.vip is not None and not _parse_ip(dev.vip.ip or ""):
        r.error(
            [*base, "vip", "ip"],
            f"[networking.os.device.vip] failed to parse {_q(dev.vip.ip or '')} as IP address",
        )

    # CheckDeviceRoutes
    for k, route in enumerate(dev.routes or []):
        rbase = [*base, "routes", k]
        label = f"networking.os.device.route[{k}]"
        if route.network and not _parse_cidr(route.network):
            r.error([*rbase, "network"], f"[{label}.network] {_q(route.network)}: invalid network address")
        if route.gateway and not _parse_ip(route.gateway):
            r.error([*rbase, "gateway"], f"[{label}.gateway] {_q(route.gateway)}: invalid network address")
        if not route.gateway and not route.network:
            r.error(rbase, f"[{label}]: either network or gateway should be set")
        if route.source and not _parse_ip(route.source):
            r.error([*rbase, "source"], f"[{label}.source] {_q(route.source)}: invalid network address")


def _check_bond(bond: m.Bond, base: list[PathElem], r: _Report) -> None:
    raw = bond.model_dump(by_alias=True)
    mode = bond.mode or ""
    mode_name = mode
    if mode not in _BOND_MODES:
        r.error([*base, "mode"], f"invalid bond type {mode}")
        mode_name = "balance-rr"  # Go falls back to the zero value
    for key, allowed, text in _BOND_ENUMS:
        value = raw.get(key) or ""
        if value not in allowed:
            r.error([*base, key], f"{text} {value}")
    miimon = bond.miimon or 0
    updelay, downdelay = bond.updelay or 0, bond.downdelay or 0
    if miimon == 0:
        if updelay != 0:
            r.error([*base, "updelay"], "bond.upDelay can't be set if miiMon is zero")
        if downdelay != 0:
            r.error([*base, "downdelay"], "bond.downDelay can't be set if miiMon is zero")
    else:
        if updelay % miimon != 0:
            r.error([*base, "updelay"], "bond.upDelay should be a multiple of miiMon")
        if downdelay % miimon != 0:
            r.error([*base, "downdelay"], "bond.downDelay should be a multiple of miiMon")
    if bond.arp_ip_target:
        r.error([*base, "arpIPTarget"], "bond.arpIPTarget is not supported")
    if bond.lacp_rate and mode_name != "802.3ad":
        r.error([*base, "lacpRate"], "bond.lacpRate is only available in 802.3ad mode")
    if bond.ad_actor_system:
        r.error([*base, "adActorSystem"], "bond.adActorSystem is not supported")
    if mode_name in ("802.3ad", "balance-alb", "balance-tlb") and bond.arp_validate:
        r.error([*base, "arpValidate"], f"bond.arpValidate is not available in {mode_name} mode")
    if mode_name not in ("active-backup", "balance-alb", "balance-tlb") and bond.primary:
        r.error([*base, "primary"], f"bond.primary is not available in {mode_name} mode")
    if mode_name in ("802.3ad", "balance-alb", "balance-tlb") and (bond.arp_interval or 0) > 0:
        r.error([*base, "arpInterval"], f"bond.arpInterval is not available in {mode_name} mode")
    if mode_name != "balance-rr" and (bond.packets_per_slave or 0) > 1:
        r.error([*base, "packetsPerSlave"], f"bond.packetsPerSlave is not available in {mode_name} mode")
    if mode_name not in ("balance-alb", "balance-tlb") and (bond.tlb_dynamic_lb or 0) > 0:
        r.error([*base, "tlbDynamicLb"], f"bond.tlbDynamicTLB is not available in {mode_name} mode")
    if mode_name != "802.3ad" and (bond.ad_actor_sys_prio or 0) > 0:
        r.error([*base, "adActorSysPrio"], "bond.adActorSysPrio is only available in 802.3ad mode")
    if mode_name != "802.3ad" and (bond.ad_user_port_key or 0) > 0:
        r.error([*base, "adUserPortKey"], "bond.adUserPortKey is only available in 802.3ad mode")


def _wireguard_key_error(key: str) -> str | None:
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return "illegal base64 data"
    if len(raw) != 32:
        return f"wrong key {_q(key)} length: {len(raw)}"
    return None


def _check_wireguard(wg: m.DeviceWireguardConfig, base: list[PathElem], r: _Report) -> None:
    err = _wireguard_key_error(wg.private_key or "")
    if err:
        r.error([*base, "privateKey"], f"private key is invalid: {err}")
    for i, peer in enumerate(wg.peers or []):
        pbase = [*base, "peers", i]
        err = _wireguard_key_error(peer.public_key or "")
        if err:
            r.error([*pbase, "publicKey"], f"public key invalid: {err}")
        if peer.endpoint and not re.search(r":\d+$", peer.endpoint):
            r.error([*pbase, "endpoint"], f"peer endpoint {_q(peer.endpoint)} is invalid")
        for j, allowed in enumerate(peer.allowed_ips or []):
            if not _parse_cidr(allowed):
                r.error(
                    [*pbase, "allowedIPs", j],
                    f"peer allowed IP {_q(allowed)} is invalid: invalid CIDR address: {allowed}",
                )


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


# --- other document kinds (each stops at its first problem, as in Talos) --------------------------


def _validate_extension_service(doc: m.ExtensionServiceConfigV1Alpha1, r: _Report) -> None:
    name = doc.name or ""
    if not name:
        r.error(["name"], "name is required")
        return
    files = doc.config_files or []
    if not files and not doc.environment:
        r.error(["configFiles"], f"no config files found for extension {_q(name)}")
        return
    for i, cf in enumerate(files):
        if not cf.content:
            r.error(["configFiles", i, "content"], f"extension content is required for extension {_q(name)}")
            return
        if not cf.mount_path:
            r.error(
                ["configFiles", i, "mountPath"], f"extension mount path is required for extension {_q(name)}"
            )
            return


def _validate_kmsg_log(doc: m.KmsgLogConfigV1Alpha1, r: _Report) -> None:
    if not doc.name:
        r.error(["name"], "name is required")
        return
    if not doc.url:
        r.error(["url"], "url is required")
        return
    url = urllib.parse.urlsplit(doc.url)
    if url.scheme not in ("tcp", "udp"):
        r.error(["url"], "url scheme must be tcp:// or udp://")
    elif url.path not in ("", "/"):
        r.error(["url"], "url path must be empty")
    elif not re.search(r":\d+$", url.netloc):
        r.error(["url"], "url port is required")


def _validate_watchdog(doc: m.WatchdogTimerConfigV1Alpha1, r: _Report) -> None:
    if not doc.device:
        r.error(["device"], "watchdog device: empty value")
        return
    if doc.timeout:
        try:
            timeout = goduration.parse(doc.timeout, what="watchdog timeout")
        except DurationError as err:  # the schema's pattern lets a few non-Go spellings through
            r.error(["timeout"], str(err))
            return
        if timeout and timeout < timedelta(seconds=10):
            r.error(["timeout"], "watchdog timeout: minimum value is 10s")


def _validate_event_sink(doc: m.EventSinkConfigV1Alpha1, r: _Report) -> None:
    endpoint = doc.endpoint or ""
    if endpoint.startswith("["):
        ok = re.match(r"^\[[^\]]*\]:[^:]*$", endpoint) is not None
        reason = "missing port in address"
    else:
        colons = endpoint.count(":")
        ok = colons == 1
        reason = "missing port in address" if colons == 0 else "too many colons in address"
    if not ok:
        r.error(["endpoint"], f"event sink endpoint: address {endpoint}: {reason}")


def _validate_siderolink(doc: m.SideroLinkConfigV1Alpha1, r: _Report) -> None:
    if not doc.api_url:
        r.error(["apiUrl"], "apiUrl is required")
        return
    url = urllib.parse.urlsplit(doc.api_url)
    if url.scheme not in ("https", "grpc"):
        r.error(["apiUrl"], "apiUrl scheme must be https:// or grpc://")
    elif url.path not in ("", "/"):
        r.error(["apiUrl"], "apiUrl path must be empty")


def _port_range(value: int | str) -> tuple[int, int] | None:
    if isinstance(value, int):
        return (value, value) if 0 <= value <= 65535 else None
    lo, sep, hi = value.partition("-")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) > 65535 or int(hi) > 65535:
        return None
    return int(lo), int(hi)


def _validate_network_rule(doc: m.NetworkRuleConfigV1Alpha1, r: _Report) -> None:
    if not doc.name:
        r.error(["name"], "name is required")
        return
    ports = doc.port_selector.ports if doc.port_selector is not None else None
    if not ports:
        r.error(["portSelector", "ports"], "portSelector.ports is required")
        return
    ranges: list[tuple[int, int]] = []
    for i, port in enumerate(ports):
        parsed = _port_range(port)
        if parsed is None:
            r.error(["portSelector", "ports", i], f"invalid port range: {_q(port)}")
            return
        ranges.append(parsed)
    ranges.sort(key=lambda pr: pr[0])
    for i, (lo, hi) in enumerate(ranges):
        if lo > hi:
            r.error(["portSelector", "ports"], f"invalid port range: {lo}-{hi}")
            return
        if i > 0 and lo <= ranges[i - 1][1]:
            plo, phi = ranges[i - 1]
            r.error(["portSelector", "ports"], f"invalid port range: {lo}-{hi}, overlaps with {plo}-{phi}")
            return
    for i, rule in enumerate(doc.ingress or []):
        if not rule.subnet or not _parse_cidr(rule.subnet):
            r.error(["ingress", i, "subnet"], f"invalid subnet: {rule.subnet or 'invalid Prefix'}")
            return
        if rule.except_ and not _parse_cidr(rule.except_):
            r.error(["ingress", i, "except"], f"invalid except: {rule.except_}")
            return


_KIND_VALIDATORS: dict[str, Any] = {
    "ExtensionServiceConfig": _validate_extension_service,
    "KmsgLogConfig": _validate_kmsg_log,
    "WatchdogTimerConfig": _validate_watchdog,
    "EventSinkConfig": _validate_event_sink,
    "SideroLinkConfig": _validate_siderolink,
    "NetworkRuleConfig": _validate_network_rule,
}


def validate_document(doc: Document, mode: Mode) -> ValidationResult:
    """Validate one document (errors unprefixed for v1alpha1, ``Kind/name:`` for the others)."""
    if doc.identity.is_v1alpha1:
        report = _Report()
        model = doc.model
        assert isinstance(model, m.Config)
        _validate_v1alpha1(model, mode, report)
    else:
        report = _Report(doc.talos_id)
        checker = _KIND_VALIDATORS.get(doc.identity.kind)
        if checker is not None:
            checker(doc.model, report)
    return ValidationResult(report.errors, report.warnings)


def validate(container: Container, mode: Mode | str, *, strict: bool = False) -> ValidationResult:
    """Check every document against Talos 1.7's rules for ``mode``; returns all errors and warnings.

    With ``strict`` every warning becomes an error prefixed ``warning:`` (as Talos does).
    """
    mode = Mode(mode)
    result = ValidationResult()
    for doc in container:
        found = validate_document(doc, mode)
        result.errors.extend(found.errors)
        result.warnings.extend(found.warnings)
    if strict:
        result.errors.extend(f"warning: {w}" for w in result.warnings)
        result.warnings = []
    return result


def validate_or_raise(container: Container, mode: Mode | str, *, strict: bool = False) -> list[str]:
    """Like :func:`validate`, but raise :class:`ConfigValidationError` on errors; returns the warnings."""
    result = validate(container, mode, strict=strict)
    if result.errors:
        count = len(result.errors)
        raise ConfigValidationError(
            f"{container.source}: {count} error{'s' if count != 1 else ''} occurred:",
            result.errors,
            hint=f"fix the listed YAML paths in {container.source} (they are checked for {Mode(mode).value} mode)",
        )
    return result.warnings
