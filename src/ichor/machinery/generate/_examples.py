"""Examples ``gen config --with-examples`` shows as comments, keyed by YAML path.

These are Ichor's own examples (values a reader can adapt), chosen for the fields people most
often need to set and ask about: networking, disks, registries, extra args and manifests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Example:
    value: Any
    note: str | None = None

    def render_items(self, schema: Mapping[str, Any] | None = None) -> Iterator[str]:
        """Lines shown under a field that is set but empty (``certSANs: []``); ``schema`` is the field's."""
        from ichor.machinery.generate._render import _Emitter

        if self.note:
            yield f"# {self.note}"
        emitter = _Emitter(docs=False, examples=False)
        if isinstance(self.value, dict):
            emitter.mapping(self.value, schema, 0, ())
        else:
            emitter._block(self.value, schema, 0, ())
        yield from emitter.lines


EXAMPLES: dict[tuple[str, ...], Example] = {
    ("machine", "certSANs"): Example(
        ["10.0.0.10", "nodes.example.internal"], "Add SANs to the Talos API certificate."
    ),
    ("machine", "kubelet", "extraArgs"): Example({"feature-gates": "ServerSideApply=true"}),
    ("machine", "kubelet", "extraMounts"): Example(
        [
            {
                "destination": "/var/lib/local-volumes",
                "type": "bind",
                "source": "/var/lib/local-volumes",
                "options": ["bind", "rshared", "rw"],
            }
        ]
    ),
    ("machine", "kubelet", "clusterDNS"): Example(["10.96.0.10"]),
    ("machine", "kubelet", "nodeIP"): Example({"validSubnets": ["192.168.10.0/24"]}),
    ("machine", "network", "hostname"): Example("worker-1"),
    ("machine", "network", "interfaces"): Example(
        [
            {
                "interface": "eth0",
                "addresses": ["192.168.10.21/24"],
                "routes": [{"network": "0.0.0.0/0", "gateway": "192.168.10.1"}],
                "mtu": 1500,
            }
        ]
    ),
    ("machine", "network", "nameservers"): Example(["192.168.10.1", "9.9.9.9"]),
    ("machine", "network", "extraHostEntries"): Example(
        [{"ip": "192.168.10.5", "aliases": ["registry.lan"]}]
    ),
    ("machine", "network", "kubespan"): Example({"enabled": True}),
    ("machine", "install", "diskSelector"): Example({"size": ">= 100GB", "type": "nvme"}),
    ("machine", "install", "extraKernelArgs"): Example(["console=ttyS0"]),
    ("machine", "install", "extensions"): Example([{"image": "ghcr.io/siderolabs/iscsi-tools:v0.1.4"}]),
    ("machine", "disks"): Example([{"device": "/dev/sdb", "partitions": [{"mountpoint": "/var/mnt/data"}]}]),
    ("machine", "files"): Example(
        [{"content": "key=value\n", "path": "/var/etc/example.conf", "op": "create"}]
    ),
    ("machine", "env"): Example({"https_proxy": "http://proxy.lan:3128"}),
    ("machine", "time"): Example({"disabled": False, "servers": ["pool.ntp.org"]}),
    ("machine", "sysctls"): Example({"net.core.somaxconn": "65535"}),
    ("machine", "sysfs"): Example({"devices.system.cpu.cpu0.cpufreq.scaling_governor": "performance"}),
    ("machine", "registries", "mirrors"): Example({"docker.io": {"endpoints": ["https://mirror.lan:5000"]}}),
    ("machine", "registries", "config"): Example(
        {"mirror.lan:5000": {"auth": {"username": "puller", "password": "secret"}}}
    ),
    ("machine", "systemDiskEncryption"): Example(
        {"ephemeral": {"provider": "luks2", "keys": [{"nodeID": {}, "slot": 0}]}}
    ),
    ("machine", "features", "kubernetesTalosAPIAccess"): Example(
        {"enabled": True, "allowedRoles": ["os:reader"], "allowedKubernetesNamespaces": ["kube-system"]}
    ),
    ("machine", "udev"): Example(
        {"rules": ['SUBSYSTEM=="drm", KERNEL=="renderD*", GROUP="44", MODE="0660"']}
    ),
    ("machine", "logging"): Example(
        {"destinations": [{"endpoint": "udp://127.0.0.1:12345/", "format": "json_lines"}]}
    ),
    ("machine", "kernel"): Example({"modules": [{"name": "br_netfilter"}]}),
    ("machine", "nodeLabels"): Example({"topology.kubernetes.io/zone": "rack-1"}),
    ("machine", "nodeTaints"): Example({"dedicated": "storage:NoSchedule"}),
    ("cluster", "network", "cni"): Example({"name": "none"}),
    ("cluster", "apiServer", "extraArgs"): Example({"oidc-issuer-url": "https://issuer.example.com"}),
    ("cluster", "controllerManager", "extraArgs"): Example({"terminated-pod-gc-threshold": "100"}),
    ("cluster", "scheduler", "extraArgs"): Example({"bind-address": "0.0.0.0"}),
    ("cluster", "proxy", "disabled"): Example(False),
    ("cluster", "etcd", "extraArgs"): Example({"election-timeout": "5000"}),
    ("cluster", "etcd", "advertisedSubnets"): Example(["10.0.0.0/8"]),
    ("cluster", "coreDNS"): Example({"disabled": False}),
    ("cluster", "externalCloudProvider"): Example(
        {"enabled": True, "manifests": ["https://example.com/cloud-controller-manager.yaml"]}
    ),
    ("cluster", "extraManifests"): Example(["https://example.com/manifests/app.yaml"]),
    ("cluster", "extraManifestHeaders"): Example({"Authorization": "Bearer example-token"}),
    ("cluster", "inlineManifests"): Example(
        [{"name": "team-namespace", "contents": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n"}]
    ),
    ("cluster", "adminKubeconfig"): Example({"certLifetime": "8h0m0s"}),
    ("cluster", "allowSchedulingOnControlPlanes"): Example(True),
}
