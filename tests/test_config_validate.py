"""Talos 1.7 validation rules: every error and warning text is triggered by a config that breaks it."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from ichor.machinery import yamlio
from ichor.machinery.config import Container, Mode, ValidationResult, load_config, validate, validate_or_raise
from ichor.machinery.errors import ConfigValidationError

STABILITY = Path(__file__).parent / "data" / "config" / "stability-v1.7"
DELETE = object()
Path_ = tuple[str | int, ...]


def _base(name: str) -> dict[str, Any]:
    text = (STABILITY / f"{name}.yaml").read_text()
    # the 1.7 release spells the pre-release `localDNS` as `hostDNS`; forwarding makes container mode valid
    text = text.replace(
        "        localDNS: true\n",
        "        hostDNS:\n            enabled: true\n            forwardKubeDNSToHost: true\n",
    )
    plain: dict[str, Any] = yamlio.to_plain(yamlio.load_documents(text)[0])
    return plain


CONTROLPLANE = _base("overrides-controlplane")  # valid in every mode
WORKER = _base("overrides-worker")


def _set(doc: dict[str, Any], path: Path_, value: Any) -> None:
    node: Any = doc
    for elem in path[:-1]:
        if isinstance(node, dict) and elem not in node:
            node[elem] = {}
        node = node[elem]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def build(
    base: dict[str, Any], edits: list[tuple[Path_, Any]], extra: list[dict[str, Any]] | None = None
) -> Container:
    doc = copy.deepcopy(base)
    for path, value in edits:
        _set(doc, path, value)
    docs = [doc, *(extra or [])]
    return load_config(yamlio.dump_documents([yamlio.from_plain(d) for d in docs]), source="test.yaml")


def iface(**fields: Any) -> dict[str, Any]:
    return {"interface": "eth0", **fields}


def net(*devices: dict[str, Any]) -> tuple[Path_, Any]:
    return (("machine", "network"), {"interfaces": list(devices)})


WG_KEY = "GDGs3nz7Wfn1G1yQ5Jz8lOTGyTsGPhTsRN9lM5AqQ0o="  # 32 bytes, base64

# (id, base, mode, edits, expected error text) -- the text must appear in exactly one error.
ERRORS: list[tuple[str, dict[str, Any], Mode, list[tuple[Path_, Any]], str]] = [
    (
        "no-machine",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine",), DELETE)],
        "machine: machine instructions are required",
    ),
    (
        "no-cluster",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster",), DELETE)],
        "cluster: cluster instructions are required",
    ),
    (
        "no-endpoint",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "controlPlane"), DELETE)],
        "cluster.controlPlane.endpoint: cluster controlplane endpoint is required",
    ),
    (
        "endpoint-no-host",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "controlPlane", "endpoint"), "https://:6443")],
        "invalid controlplane endpoint: hostname must not be blank",
    ),
    (
        "endpoint-ipv6",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "controlPlane", "endpoint"), "https://fd00::1:2:6443")],
        "invalid controlplane endpoint: IPv6 addresses MUST be enclosed by square brackets",
    ),
    (
        "endpoint-port",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "controlPlane", "endpoint"), "https://cp:99999")],
        "invalid controlplane endpoint: port number must be between 1 and 65535",
    ),
    (
        "metal-no-install",
        CONTROLPLANE,
        Mode.METAL,
        [(("machine", "install"), DELETE)],
        'machine.install: install instructions are required in "metal" mode',
    ),
    (
        "metal-no-disk",
        CONTROLPLANE,
        Mode.METAL,
        [(("machine", "install", "disk"), DELETE)],
        "machine.install: either install disk or diskSelector should be defined",
    ),
    (
        "container-hostdns",
        CONTROLPLANE,
        Mode.CONTAINER,
        [(("machine", "features", "hostDNS"), DELETE)],
        "feature HostDNS should be enabled in container mode (.machine.features.hostDNS.enabled)",
    ),
    (
        "container-forward",
        CONTROLPLANE,
        Mode.CONTAINER,
        [(("machine", "features", "hostDNS", "forwardKubeDNSToHost"), False)],
        "feature HostDNS should forward kube-dns to host in container mode "
        "(.machine.features.hostDNS.forwardKubeDNSToHost)",
    ),
    (
        "unknown-type",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "type"), "bogus")],
        'unknown machine type "bogus"',
    ),
    (
        "no-ca",
        WORKER,
        Mode.CLOUD,
        [(("machine", "ca"), DELETE)],
        "issuing CA or some accepted CAs are required (.machine.ca, machine.acceptedCAs)",
    ),
    (
        "cp-no-ca",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "ca"), DELETE)],
        "issuing CA is required (.machine.ca)",
    ),
    (
        "cp-no-ca-key",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "ca", "key"), "")],
        "machine.ca.key: issuing CA key is required for controlplane nodes (.machine.ca.key)",
    ),
    (
        "worker-vip",
        WORKER,
        Mode.CLOUD,
        [net(iface(dhcp=True, vip={"ip": "10.0.0.9"}))],
        "machine.network.interfaces[0].vip: virtual (shared) IP is not allowed on non-controlplane nodes",
    ),
    (
        "worker-vlan-vip",
        WORKER,
        Mode.CLOUD,
        [net(iface(vlans=[{"vlanId": 5, "vip": {"ip": "10.0.0.9"}}]))],
        "machine.network.interfaces[0].vlans[0].vip: virtual (shared) IP is not allowed on non-controlplane nodes",
    ),
    (
        "worker-ca-key",
        WORKER,
        Mode.CLOUD,
        [(("machine", "ca", "key"), "a2V5")],
        "machine.ca.key: issuing Talos API CA key is not allowed on non-controlplane nodes (.machine.ca)",
    ),
    (
        "worker-no-trusted-ca",
        WORKER,
        Mode.CLOUD,
        [(("machine", "ca", "crt"), "")],
        "trusted CA certificates are required on non-controlplane nodes (.machine.ca.crt, .machine.acceptedCAs)",
    ),
    (
        "worker-k8s-ca-key",
        WORKER,
        Mode.CLOUD,
        [(("cluster", "ca", "key"), "a2V5")],
        "issuing Kubernetes API CA key is not allowed on non-controlplane nodes (.cluster.ca)",
    ),
    (
        "worker-cluster-ca-key",
        WORKER,
        Mode.CLOUD,
        [(("cluster", "ca", "key"), "a2V5")],
        "cluster CA key is not allowed on non-controlplane nodes (.cluster.ca)",
    ),
    (
        "worker-etcd",
        WORKER,
        Mode.CLOUD,
        [(("cluster", "etcd"), {"advertisedSubnets": ["10.0.0.0/8"]})],
        "cluster.etcd: etcd config is only allowed on control plane machines",
    ),
    (
        "etcd-no-ca",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "etcd", "ca"), DELETE)],
        "cluster.etcd.ca: key/cert combination should not be empty",
    ),
    (
        "etcd-subnet-and-advertised",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (("cluster", "etcd", "subnet"), "10.0.0.0/8"),
            (("cluster", "etcd", "advertisedSubnets"), ["10.0.0.0/8"]),
        ],
        "etcd subnet can't be set when advertised subnets are set",
    ),
    (
        "etcd-advertised",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "etcd", "advertisedSubnets"), ["!10.0.0.0/8", "!nope"])],
        'cluster.etcd.advertisedSubnets[1]: etcd advertised subnet is not valid: "nope"',
    ),
    (
        "etcd-listen",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "etcd", "listenSubnets"), ["10.0.0.0/99"])],
        'etcd listen subnet is not valid: "10.0.0.0/99"',
    ),
    (
        "dns-domain",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "dnsDomain"), "bad domain!")],
        'cluster.network.dnsDomain: "bad domain!" is not a valid DNS name',
    ),
    (
        "pod-subnet",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "podSubnets"), ["10.244.0.0/33"])],
        'cluster.network.podSubnets[0]: "10.244.0.0/33" is not a valid CIDR',
    ),
    (
        "service-subnet",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "serviceSubnets"), ["10.96.0.0/12", "ten"])],
        'cluster.network.serviceSubnets[1]: "ten" is not a valid CIDR',
    ),
    (
        "cni-name",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "cni"), {"name": "cilium"})],
        'cluster.network.cni.name: cni name should be one of ["flannel", "custom", "none"]',
    ),
    (
        "cni-flannel-urls",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "cni", "name"), "flannel")],
        '"urls" field should be empty for "flannel" CNI',
    ),
    (
        "cni-none-flannel-args",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "cni"), {"name": "none", "flannel": {"extraArgs": ["--x"]}})],
        '"flanneldExtraArgs" field should be empty for "none" CNI',
    ),
    (
        "cni-custom-flannel-args",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "cni", "flannel"), {"extraArgs": ["--x"]})],
        '"flanneldExtraArgs" field should be empty for "custom" CNI',
    ),
    (
        "cni-custom-bad-url",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "network", "cni", "urls"), ["https:///cni.yaml"])],
        "cluster.network.cni.urls[0]: hostname must not be blank",
    ),
    (
        "ecp-disabled",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "externalCloudProvider"), {"enabled": False, "manifests": ["https://x/y.yaml"]})],
        "external cloud provider is disabled, but manifests are provided",
    ),
    (
        "ecp-url",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "externalCloudProvider"), {"enabled": True, "manifests": ["https:///y.yaml"]})],
        'invalid external cloud provider manifest url "https:///y.yaml": hostname must not be blank',
    ),
    (
        "inline-manifest-empty-name",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "inlineManifests"), [{"name": " ", "contents": "x"}])],
        "inline manifest name can't be empty",
    ),
    (
        "inline-manifest-duplicate",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "inlineManifests"), [{"name": "a", "contents": "x"}, {"name": "a", "contents": "y"}])],
        'cluster.inlineManifests[1].name: inline manifest name "a" is duplicate',
    ),
    (
        "discovery-id",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "id"), DELETE)],
        "cluster.id: cluster discovery service requires .cluster.id",
    ),
    (
        "discovery-secret",
        WORKER,
        Mode.CLOUD,
        [(("cluster", "secret"), "")],
        "cluster.secret: cluster discovery service requires .cluster.secret",
    ),
    (
        "discovery-path",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "discovery", "registries", "service", "endpoint"), "https://d.example.com/v1")],
        "cluster discovery service path should be empty",
    ),
    (
        "discovery-endpoint",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "discovery", "registries", "service", "endpoint"), "discovery")],
        "cluster discovery service registry endpoint is invalid",
    ),
    (
        "apiserver-resources",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "apiServer", "resources"), {"requests": {"cpu": "1", "gpu": "1"}})],
        'apiserver resource validation failed: unsupported pod resource "gpu"',
    ),
    (
        "controller-manager-resources",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "controllerManager", "resources"), {"limits": {"disk": "1"}})],
        'controller-manager resource validation failed: unsupported pod resource "disk"',
    ),
    (
        "scheduler-resources",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("cluster", "scheduler", "resources"), {"limits": {"disk": "1"}})],
        'scheduler resource validation failed: unsupported pod resource "disk"',
    ),
    (
        "bond-and-bridge",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad"}, bridge={"interfaces": ["eth1"]}))],
        'interface has both bridge and bond sections set "bond0": config sections are mutually exclusive',
    ),
    (
        "bond-interfaces-and-selectors",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            net(
                iface(
                    interface="bond0",
                    bond={
                        "mode": "802.3ad",
                        "interfaces": ["eth0"],
                        "deviceSelectors": [{"driver": "virtio"}],
                    },
                )
            )
        ],
        'interface "bond0" has both interfaces and selectors set: config sections are mutually exclusive',
    ),
    (
        "two-links",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            net(
                iface(interface="bond0", bond={"mode": "802.3ad", "interfaces": ["eth1"]}),
                iface(interface="br0", bridge={"interfaces": ["eth1"]}),
            )
        ],
        'interface "eth1" is declared as part of two separate links: "bond0" and "br0"',
    ),
    (
        "device-no-interface",
        CONTROLPLANE,
        Mode.CLOUD,
        [net({"dhcp": True})],
        "[networking.os.device.interface], [networking.os.device.deviceSelector]: "
        "required either config section to be set",
    ),
    (
        "device-both",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(deviceSelector={"driver": "virtio"}))],
        "[networking.os.device.interface], [networking.os.device.deviceSelector]: "
        "config sections are mutually exclusive",
    ),
    (
        "device-empty-selector",
        CONTROLPLANE,
        Mode.CLOUD,
        [net({"deviceSelector": {}})],
        "[networking.os.device.deviceSelector]: config section should contain at least one field",
    ),
    (
        "bond-mode",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "fastest"}))],
        "machine.network.interfaces[0].bond.mode: invalid bond type fastest",
    ),
    (
        "bond-xmit",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "xmitHashPolicy": "layer9"}))],
        "invalid xmit hash policy layer9",
    ),
    (
        "bond-updelay-no-miimon",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "updelay": 200}))],
        "bond.upDelay can't be set if miiMon is zero",
    ),
    (
        "bond-downdelay-no-miimon",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "downdelay": 200}))],
        "bond.downDelay can't be set if miiMon is zero",
    ),
    (
        "bond-updelay-multiple",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "miimon": 100, "updelay": 150}))],
        "bond.upDelay should be a multiple of miiMon",
    ),
    (
        "bond-downdelay-multiple",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "miimon": 100, "downdelay": 150}))],
        "bond.downDelay should be a multiple of miiMon",
    ),
    (
        "bond-arp-ip-target",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "active-backup", "arpIPTarget": ["10.0.0.1"]}))],
        "bond.arpIPTarget is not supported",
    ),
    (
        "bond-lacp-rate",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "active-backup", "lacpRate": "fast"}))],
        "bond.lacpRate is only available in 802.3ad mode",
    ),
    (
        "bond-ad-actor-system",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "adActorSystem": "00:11:22:33:44:55"}))],
        "bond.adActorSystem is not supported",
    ),
    (
        "bond-arp-validate",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "802.3ad", "arpValidate": "all"}))],
        "bond.arpValidate is not available in 802.3ad mode",
    ),
    (
        "bond-primary",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "balance-rr", "primary": "eth1"}))],
        "bond.primary is not available in balance-rr mode",
    ),
    (
        "bond-arp-interval",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "balance-tlb", "arpInterval": 100}))],
        "bond.arpInterval is not available in balance-tlb mode",
    ),
    (
        "bond-packets-per-slave",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "active-backup", "packetsPerSlave": 2}))],
        "bond.packetsPerSlave is not available in active-backup mode",
    ),
    (
        "bond-tlb-dynamic-lb",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "balance-rr", "tlbDynamicLb": 1}))],
        "bond.tlbDynamicTLB is not available in balance-rr mode",
    ),
    (
        "bond-ad-actor-sys-prio",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "balance-rr", "adActorSysPrio": 5}))],
        "bond.adActorSysPrio is only available in 802.3ad mode",
    ),
    (
        "bond-ad-user-port-key",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="bond0", bond={"mode": "balance-rr", "adUserPortKey": 5}))],
        "bond.adUserPortKey is only available in 802.3ad mode",
    ),
    (
        "wireguard-private-key",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="wg0", wireguard={"privateKey": "c2hvcnQ="}))],
        'private key is invalid: wrong key "c2hvcnQ=" length: 5',
    ),
    (
        "wireguard-public-key",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(interface="wg0", wireguard={"privateKey": WG_KEY, "peers": [{"publicKey": "!!"}]}))],
        "public key invalid: illegal base64 data",
    ),
    (
        "wireguard-endpoint",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            net(
                iface(
                    interface="wg0",
                    wireguard={"privateKey": WG_KEY, "peers": [{"publicKey": WG_KEY, "endpoint": "1.2.3.4"}]},
                )
            )
        ],
        'peer endpoint "1.2.3.4" is invalid',
    ),
    (
        "wireguard-allowed-ip",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            net(
                iface(
                    interface="wg0",
                    wireguard={
                        "privateKey": WG_KEY,
                        "peers": [{"publicKey": WG_KEY, "allowedIPs": ["10.0.0.0"]}],
                    },
                )
            )
        ],
        'peer allowed IP "10.0.0.0" is invalid',
    ),
    (
        "vlan-cidr-and-addresses",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(vlans=[{"vlanId": 5, "cidr": "10.0.0.2/24", "addresses": ["10.0.0.3/24"]}]))],
        "[networking.os.device.vlan] eth0.5: vlan can't have both .cidr and .addresses set",
    ),
    (
        "vlan-cidr",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(vlans=[{"vlanId": 5, "cidr": "10.0.0.2/40"}]))],
        "[networking.os.device.vlan.CIDR] eth0.5: invalid CIDR address: 10.0.0.2/40",
    ),
    (
        "vlan-address",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(vlans=[{"vlanId": 5, "addresses": ["ten"]}]))],
        '[networking.os.device.vlan.addresses] eth0.5: failed to parse IP address "ten"',
    ),
    (
        "bonded-member-addressing",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            net(
                iface(interface="bond0", bond={"mode": "802.3ad", "interfaces": ["eth1"]}),
                iface(interface="eth1", dhcp=True),
            )
        ],
        '[networking.os.device] "eth1": bonded/bridged interface shouldn\'t have any addressing methods configured',
    ),
    (
        "cidr-and-addresses",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(cidr="10.0.0.2/24", addresses=["10.0.0.3/24"]))],
        '[networking.os.device] "eth0": interface can\'t have both .cidr and .addresses set',
    ),
    (
        "cidr-invalid",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(cidr="10.0.0.2/99"))],
        '[networking.os.device.CIDR] "eth0": invalid CIDR address: 10.0.0.2/99',
    ),
    (
        "address-invalid",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(addresses=["10.0.0.2/24", "fe80::zz"]))],
        'machine.network.interfaces[0].addresses[1]: [networking.os.device.addresses] "eth0": '
        'failed to parse IP address "fe80::zz"',
    ),
    (
        "vip-invalid",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(dhcp=True, vip={"ip": "10.0.0.300"}))],
        '[networking.os.device.vip] failed to parse "10.0.0.300" as IP address',
    ),
    (
        "route-network",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(routes=[{"network": "0.0.0.0", "gateway": "10.0.0.1"}]))],
        '[networking.os.device.route[0].network] "0.0.0.0": invalid network address',
    ),
    (
        "route-gateway",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(routes=[{"network": "0.0.0.0/0", "gateway": "router"}]))],
        '[networking.os.device.route[0].gateway] "router": invalid network address',
    ),
    (
        "route-empty",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(routes=[{"metric": 10}]))],
        "[networking.os.device.route[0]]: either network or gateway should be set",
    ),
    (
        "route-source",
        CONTROLPLANE,
        Mode.CLOUD,
        [net(iface(routes=[{"gateway": "10.0.0.1", "source": "me"}]))],
        '[networking.os.device.route[0].source] "me": invalid network address',
    ),
    (
        "kubespan-mtu",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "network"), {"kubespan": {"enabled": True, "mtu": 576}})],
        "machine.network.kubespan.mtu: kubespan link MTU must be at least 1280",
    ),
    (
        "kubespan-discovery",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (("machine", "network"), {"kubespan": {"enabled": True}}),
            (("cluster", "discovery", "enabled"), False),
        ],
        ".cluster.discovery should be enabled when .machine.network.kubespan is enabled",
    ),
    (
        "kubespan-id",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "network"), {"kubespan": {"enabled": True}}), (("cluster", "id"), "")],
        ".cluster.id should be set when .machine.network.kubespan is enabled",
    ),
    (
        "kubespan-secret",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "network"), {"kubespan": {"enabled": True}}), (("cluster", "secret"), "")],
        ".cluster.secret should be set when .machine.network.kubespan is enabled",
    ),
    (
        "kubespan-filter",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (
                ("machine", "network"),
                {"kubespan": {"enabled": True, "filters": {"endpoints": ["0.0.0.0/0", "!x"]}}},
            )
        ],
        'KubeSpan endpoint filer is not valid: "x"',
    ),
    (
        "partition-not-last",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (
                ("machine", "disks"),
                [{"device": "/dev/sdb", "partitions": [{"mountpoint": "/var/a"}, {"size": "10 GB"}]}],
            )
        ],
        'partition for disk "/dev/sdb" is set to occupy full disk, but it\'s not the last partition in the list',
    ),
    (
        "kubelet-node-ip",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "kubelet", "nodeIP"), {"validSubnets": ["10.0.0.0/8", "!bad"]})],
        'machine.kubelet.nodeIP.validSubnets[1]: kubelet nodeIP subnet is not valid: "bad"',
    ),
    (
        "kubelet-protected",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "kubelet", "extraConfig"), {"port": 1234, "serverTLSBootstrap": True})],
        'machine.kubelet.extraConfig.port: kubelet configuration field "port" can\'t be overridden',
    ),
    (
        "encryption-no-keys",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "systemDiskEncryption"), {"ephemeral": {"provider": "luks2"}})],
        'partition "EPHEMERAL": no encryption keys provided',
    ),
    (
        "encryption-slot",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (
                ("machine", "systemDiskEncryption"),
                {"state": {"keys": [{"nodeID": {}}, {"slot": 0, "tpm": {}}]}},
            )
        ],
        'partition "STATE": encryption key slot 0 is already in use',
    ),
    (
        "encryption-key-params",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "systemDiskEncryption"), {"state": {"keys": [{"slot": 1}]}})],
        'partition "STATE": encryption key at slot 1 doesn\'t have the configuration parameters',
    ),
    (
        "logging-endpoint-empty",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "logging"), {"destinations": [{"format": "json_lines"}]})],
        "machine.logging.destinations[0].endpoint: empty logging endpoint",
    ),
    (
        "logging-host",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "logging"), {"destinations": [{"endpoint": "udp:///x", "format": "json_lines"}]})],
        "empty logging endpoint's host",
    ),
    (
        "logging-scheme",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (
                ("machine", "logging"),
                {"destinations": [{"endpoint": "http://1.2.3.4:5", "format": "json_lines"}]},
            )
        ],
        'unexpected logging endpoint scheme "http"',
    ),
    (
        "logging-format",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "logging"), {"destinations": [{"endpoint": "udp://1.2.3.4:5", "format": "text"}]})],
        'machine.logging.destinations[0].format: unknown logging format "text"',
    ),
    (
        "duplicate-extension",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "install", "extensions"), [{"image": "ghcr.io/x:1"}, {"image": "ghcr.io/x:1"}])],
        'duplicate system extension "ghcr.io/x:1"',
    ),
    (
        "api-access-rbac",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (("machine", "features", "rbac"), False),
            (("machine", "features", "kubernetesTalosAPIAccess"), {"enabled": True}),
        ],
        "feature API RBAC should be enabled when Kubernetes Talos API Access feature is enabled",
    ),
    (
        "api-access-worker",
        WORKER,
        Mode.CLOUD,
        [(("machine", "features", "kubernetesTalosAPIAccess"), {"enabled": True})],
        "feature Kubernetes Talos API Access can only be enabled on control plane machines",
    ),
    (
        "api-access-role",
        CONTROLPLANE,
        Mode.CLOUD,
        [
            (
                ("machine", "features", "kubernetesTalosAPIAccess"),
                {"enabled": True, "allowedRoles": ["os:god"]},
            )
        ],
        'invalid role "os:god" in allowed roles for Kubernetes Talos API Access',
    ),
    ("persist", CONTROLPLANE, Mode.CLOUD, [(("persist",), False)], "persist: .persist should be enabled"),
    (
        "registry-mirror-null",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "registries", "mirrors", "docker.io"), None)],
        'machine.registries.mirrors["docker.io"]: registries.mirrors["docker.io"] is null',
    ),
    (
        "registry-config-null",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "registries", "config"), {"ghcr.io": None})],
        'registries.config["ghcr.io"] is null',
    ),
    (
        "node-label-key",
        WORKER,
        Mode.CLOUD,
        [(("machine", "nodeLabels"), {"bad key!": "x", "topology.kubernetes.io/zone": "rack-1"})],
        'machine.nodeLabels["bad key!"]: invalid machine node labels: name "bad key!" is invalid',
    ),
    (
        "node-label-value",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "nodeLabels"), {"example.com/tier": "-front"})],
        'machine.nodeLabels["example.com/tier"]: invalid machine node labels: label value "-front" is invalid',
    ),
    (
        "node-label-prefix",
        WORKER,
        Mode.CLOUD,
        [(("machine", "nodeLabels"), {"Example.com/tier": "a"})],
        'machine.nodeLabels["Example.com/tier"]: invalid machine node labels: prefix "Example.com" is invalid',
    ),
    (
        "node-taint-effect",
        WORKER,
        Mode.CLOUD,
        [(("machine", "nodeTaints"), {"dedicated": "storage:NoScheduled", "ok": "NoExecute"})],
        'machine.nodeTaints.dedicated: invalid machine node taints: invalid taint effect: "NoScheduled"',
    ),
    (
        "node-taint-value",
        CONTROLPLANE,
        Mode.CLOUD,
        [(("machine", "nodeTaints"), {"dedicated": "st orage:NoSchedule"})],
        'machine.nodeTaints.dedicated: invalid machine node taints: label value "st orage" is invalid',
    ),
    (
        "node-taint-key",
        WORKER,
        Mode.CLOUD,
        [(("machine", "nodeTaints"), {"a/b/c": "NoSchedule"})],
        'invalid machine node taints: invalid format: too many slashes: "a/b/c"',
    ),
]


@pytest.mark.parametrize("base", [CONTROLPLANE, WORKER], ids=["controlplane", "worker"])
@pytest.mark.parametrize("mode", list(Mode))
def test_base_configs_are_valid(base: dict[str, Any], mode: Mode) -> None:
    assert validate(build(base, []), mode) == ValidationResult([], [])


@functools.cache
def _clean_errors(base_id: int, mode: Mode) -> str:
    """The errors of an unedited base config in ``mode``, validated once per base and mode."""
    base = next(b for b in (CONTROLPLANE, WORKER) if id(b) == base_id)
    return "\n".join(validate(build(base, []), mode).errors)


@pytest.mark.parametrize(
    ("base", "mode", "edits", "expected"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_validation_error(
    base: dict[str, Any], mode: Mode, edits: list[tuple[Path_, Any]], expected: str
) -> None:
    assert expected not in _clean_errors(id(base), mode)
    result = validate(build(base, edits), mode)
    matching = [e for e in result.errors if expected in e]
    assert len(matching) == 1, result.errors


OTHER_KINDS: list[tuple[str, dict[str, Any], str]] = [
    (
        "ext-name",
        {"kind": "ExtensionServiceConfig", "environment": ["A=b"]},
        "ExtensionServiceConfig/: name: name is required",
    ),
    (
        "ext-empty",
        {"kind": "ExtensionServiceConfig", "name": "nut"},
        'no config files found for extension "nut"',
    ),
    (
        "ext-content",
        {"kind": "ExtensionServiceConfig", "name": "nut", "configFiles": [{"mountPath": "/x"}]},
        'ExtensionServiceConfig/nut: configFiles[0].content: extension content is required for extension "nut"',
    ),
    (
        "ext-mount-path",
        {"kind": "ExtensionServiceConfig", "name": "nut", "configFiles": [{"content": "x"}]},
        'extension mount path is required for extension "nut"',
    ),
    (
        "kmsg-name",
        {"kind": "KmsgLogConfig", "url": "tcp://1.2.3.4:5"},
        "KmsgLogConfig/: name: name is required",
    ),
    ("kmsg-url", {"kind": "KmsgLogConfig", "name": "k"}, "KmsgLogConfig/k: url: url is required"),
    (
        "kmsg-scheme",
        {"kind": "KmsgLogConfig", "name": "k", "url": "http://1.2.3.4:5"},
        "url scheme must be tcp:// or udp://",
    ),
    (
        "kmsg-path",
        {"kind": "KmsgLogConfig", "name": "k", "url": "udp://1.2.3.4:5/logs"},
        "url path must be empty",
    ),
    ("kmsg-port", {"kind": "KmsgLogConfig", "name": "k", "url": "udp://1.2.3.4"}, "url port is required"),
    (
        "watchdog-device",
        {"kind": "WatchdogTimerConfig", "timeout": "1m"},
        "WatchdogTimerConfig/: device: watchdog device: empty value",
    ),
    (
        "watchdog-timeout",
        {"kind": "WatchdogTimerConfig", "device": "/dev/watchdog0", "timeout": "5s"},
        "timeout: watchdog timeout: minimum value is 10s",
    ),
    (
        "watchdog-timeout-not-go",  # passes the schema's pattern, not Go's parser
        {"kind": "WatchdogTimerConfig", "device": "/dev/watchdog0", "timeout": "1m0"},
        "timeout: watchdog timeout: invalid duration '1m0': missing unit",
    ),
    (
        "event-sink-port",
        {"kind": "EventSinkConfig", "endpoint": "10.0.0.1"},
        "event sink endpoint: address 10.0.0.1: missing port in address",
    ),
    ("event-sink-colons", {"kind": "EventSinkConfig", "endpoint": "fd00::1:2"}, "too many colons in address"),
    ("siderolink-url", {"kind": "SideroLinkConfig"}, "SideroLinkConfig/: apiUrl: apiUrl is required"),
    (
        "siderolink-scheme",
        {"kind": "SideroLinkConfig", "apiUrl": "http://omni"},
        "apiUrl scheme must be https:// or grpc://",
    ),
    (
        "siderolink-path",
        {"kind": "SideroLinkConfig", "apiUrl": "https://omni/join"},
        "apiUrl path must be empty",
    ),
    (
        "rule-name",
        {"kind": "NetworkRuleConfig", "portSelector": {"ports": [22]}},
        "NetworkRuleConfig/: name: name is required",
    ),
    (
        "rule-ports",
        {"kind": "NetworkRuleConfig", "name": "r"},
        "portSelector.ports: portSelector.ports is required",
    ),
    (
        "rule-port-text",
        {"kind": "NetworkRuleConfig", "name": "r", "portSelector": {"ports": ["ssh"]}},
        'invalid port range: "ssh"',
    ),
    (
        "rule-port-order",
        {"kind": "NetworkRuleConfig", "name": "r", "portSelector": {"ports": ["90-80"]}},
        "invalid port range: 90-80",
    ),
    (
        "rule-port-overlap",
        {"kind": "NetworkRuleConfig", "name": "r", "portSelector": {"ports": [80, "70-85"]}},
        "invalid port range: 80-80, overlaps with 70-85",
    ),
    (
        "rule-subnet",
        {
            "kind": "NetworkRuleConfig",
            "name": "r",
            "portSelector": {"ports": [22]},
            "ingress": [{"subnet": "10.0.0.0"}],
        },
        "ingress[0].subnet: invalid subnet: 10.0.0.0",
    ),
    (
        "rule-except",
        {
            "kind": "NetworkRuleConfig",
            "name": "r",
            "portSelector": {"ports": [22]},
            "ingress": [{"subnet": "10.0.0.0/8", "except": "10.1.0.0/99"}],
        },
        "invalid except: 10.1.0.0/99",
    ),
]


@pytest.mark.parametrize(("doc", "expected"), [c[1:] for c in OTHER_KINDS], ids=[c[0] for c in OTHER_KINDS])
def test_other_kind_validation_error(doc: dict[str, Any], expected: str) -> None:
    result = validate(build(CONTROLPLANE, [], [{"apiVersion": "v1alpha1", **doc}]), Mode.CLOUD)
    assert [e for e in result.errors if expected in e], result.errors
    assert len(result.errors) == 1


WARNINGS: list[tuple[str, dict[str, Any], list[tuple[Path_, Any]], str]] = [
    (
        "join",
        WORKER,
        [(("machine", "type"), "join")],
        'machine.type: use "worker" instead of "join" for machine type',
    ),
    ("empty-type", WORKER, [(("machine", "type"), "")], 'use "worker" instead of "" for machine type'),
    (
        "custom-cni-no-urls",
        CONTROLPLANE,
        [(("cluster", "network", "cni", "urls"), DELETE)],
        'cluster.network.cni.urls: "urls" field should not be empty for "custom" CNI',
    ),
    (
        "cidr-deprecated",
        CONTROLPLANE,
        [net(iface(cidr="10.0.0.2/24"))],
        '"eth0": machine.network.interface.cidr is deprecated, please use machine.network.interface.addresses',
    ),
    (
        "extensions-deprecated",
        CONTROLPLANE,
        [(("machine", "install", "extensions"), [{"image": "ghcr.io/x:1"}])],
        ".machine.install.extensions is deprecated, please see https://www.talos.dev/latest/talos-guides/install/boot-assets/",
    ),
]


@pytest.mark.parametrize(
    ("base", "edits", "expected"), [c[1:] for c in WARNINGS], ids=[c[0] for c in WARNINGS]
)
def test_warning_and_strict(base: dict[str, Any], edits: list[tuple[Path_, Any]], expected: str) -> None:
    container = build(base, edits)
    result = validate(container, Mode.CLOUD)
    assert result.errors == []
    assert [w for w in result.warnings if expected in w] and len(result.warnings) == 1
    strict = validate(container, Mode.CLOUD, strict=True)
    assert strict.warnings == []
    assert strict.errors == [f"warning: {result.warnings[0]}"]


def test_init_type_is_a_control_plane_without_warning() -> None:
    # Talos's machine.ParseType keeps "init" as its own type, so `use "..." instead of` does not fire.
    result = validate(build(CONTROLPLANE, [(("machine", "type"), "init")]), Mode.CLOUD)
    assert result.errors == [] and result.warnings == []
    worker_init = validate(build(WORKER, [(("machine", "type"), "init")]), Mode.CLOUD)
    assert "issuing CA key is required for controlplane nodes (.machine.ca.key)" in worker_init.errors[0]


def test_all_problems_are_reported_at_once() -> None:
    container = build(
        CONTROLPLANE,
        [
            (("persist",), False),
            (("cluster", "network", "dnsDomain"), "-bad-"),
            (("machine", "install"), DELETE),
            net(iface(cidr="10.0.0.2/24", addresses=["10.0.0.3/24"])),
        ],
    )
    errors = validate(container, Mode.METAL).errors
    assert len(errors) == 4
    assert errors == sorted(errors, key=errors.index)
    with pytest.raises(ConfigValidationError) as exc:
        validate_or_raise(container, Mode.METAL)
    assert str(exc.value) == "test.yaml: 4 errors occurred:"
    assert exc.value.problems == errors
    assert exc.value.hint and "metal" in exc.value.hint


def test_validate_or_raise_returns_warnings_when_valid() -> None:
    container = build(WORKER, [(("machine", "type"), "join")])
    assert validate_or_raise(container, "cloud") == [
        'machine.type: use "worker" instead of "join" for machine type'
    ]


def test_mode_is_a_closed_set() -> None:
    assert [m.value for m in Mode] == ["metal", "cloud", "container"]
    with pytest.raises(ValueError):
        validate(build(CONTROLPLANE, []), "vm")
