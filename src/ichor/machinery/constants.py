"""Talos 1.7 facts that Ichor reproduces: versions, images, ports, defaults.

This module is data only. It must not read files, environment or the clock.
"""

from __future__ import annotations

__all__ = [
    "APID_PORT",
    "DEFAULT_DNS_DOMAIN",
    "DEFAULT_INSTALL_DISK",
    "DEFAULT_KUBERNETES_VERSION",
    "DEFAULT_POD_SUBNET",
    "DEFAULT_SERVICE_SUBNET",
    "DISCOVERY_SERVICE_ENDPOINT",
    "ETCD_VERSION",
    "KUBEPRISM_PORT",
    "OS_RELEASE",
    "TALOS_VERSION",
    "TRUSTD_PORT",
    "Images",
]

from dataclasses import dataclass

from ichor.machinery import TALOS_VERSION

DEFAULT_KUBERNETES_VERSION = "1.30.3"
ETCD_VERSION = "v3.5.13"
COREDNS_VERSION = "v1.11.1"
FLANNEL_VERSION = "v0.25.3"
PAUSE_VERSION = "3.8"

APID_PORT = 50000
TRUSTD_PORT = 50001
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
KUBE_APISERVER_PORT = 6443
KUBEPRISM_PORT = 7445

DEFAULT_DNS_DOMAIN = "cluster.local"
DEFAULT_POD_SUBNET = "10.244.0.0/16"
DEFAULT_SERVICE_SUBNET = "10.96.0.0/12"
DEFAULT_INSTALL_DISK = "/dev/sda"
DISCOVERY_SERVICE_ENDPOINT = "https://discovery.talos.dev/"

KUBELET_IMAGE = "ghcr.io/siderolabs/kubelet"
INSTALLER_IMAGE = "ghcr.io/siderolabs/installer"
KUBE_APISERVER_IMAGE = "registry.k8s.io/kube-apiserver"
KUBE_CONTROLLER_MANAGER_IMAGE = "registry.k8s.io/kube-controller-manager"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler"
KUBE_PROXY_IMAGE = "registry.k8s.io/kube-proxy"
ETCD_IMAGE = "gcr.io/etcd-development/etcd"
COREDNS_IMAGE = "registry.k8s.io/coredns/coredns"
FLANNEL_IMAGE = "ghcr.io/siderolabs/flannel"
PAUSE_IMAGE = "registry.k8s.io/pause"


@dataclass(frozen=True)
class Images:
    """The container images a cluster of one Kubernetes version uses (``talosctl image default``)."""

    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    talos_version: str = TALOS_VERSION

    def _k8s_tag(self) -> str:
        version = self.kubernetes_version
        return version if version.startswith("v") else f"v{version}"

    @property
    def kubelet(self) -> str:
        return f"{KUBELET_IMAGE}:{self._k8s_tag()}"

    @property
    def kube_apiserver(self) -> str:
        return f"{KUBE_APISERVER_IMAGE}:{self._k8s_tag()}"

    @property
    def kube_controller_manager(self) -> str:
        return f"{KUBE_CONTROLLER_MANAGER_IMAGE}:{self._k8s_tag()}"

    @property
    def kube_scheduler(self) -> str:
        return f"{KUBE_SCHEDULER_IMAGE}:{self._k8s_tag()}"

    @property
    def kube_proxy(self) -> str:
        return f"{KUBE_PROXY_IMAGE}:{self._k8s_tag()}"

    @property
    def installer(self) -> str:
        return f"{INSTALLER_IMAGE}:{self.talos_version}"

    @property
    def etcd(self) -> str:
        return f"{ETCD_IMAGE}:{ETCD_VERSION}"

    @property
    def coredns(self) -> str:
        return f"{COREDNS_IMAGE}:{COREDNS_VERSION}"

    @property
    def flannel(self) -> str:
        return f"{FLANNEL_IMAGE}:{FLANNEL_VERSION}"

    @property
    def pause(self) -> str:
        return f"{PAUSE_IMAGE}:{PAUSE_VERSION}"

    def default_list(self) -> list[str]:
        """The images ``talosctl image default`` prints, in Talos's order."""
        return [
            self.flannel,
            self.coredns,
            self.etcd,
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.kube_proxy,
            self.kubelet,
            self.installer,
            self.pause,
        ]


OS_RELEASE = (
    'NAME="Talos"\n'
    "ID=talos\n"
    f"VERSION_ID={TALOS_VERSION}\n"
    f'PRETTY_NAME="Talos ({TALOS_VERSION})"\n'
    'HOME_URL="https://www.talos.dev/"\n'
    'BUG_REPORT_URL="https://github.com/siderolabs/talos/issues"\n'
    'VENDOR_NAME="Sidero Labs"\n'
    'VENDOR_URL="https://www.siderolabs.com/"\n'
)
"""A node's ``/etc/os-release``, as Talos writes it: the kubelet reports ``PRETTY_NAME`` as the Node's
OS image (``kubectl get nodes -o wide`` shows ``Talos (v1.7.6)``)."""

MAINTENANCE_CN = "maintenance-service.talos.dev"
"""The subject of the self-signed certificate a node serves in maintenance mode (Talos's)."""

NO_FORWARDING = "no request forwarding"
"""apid's PermissionDenied text when a node without forwarding (a worker) is asked to route a call to
other nodes (Talos's wording); the client recognises it to say what to do instead."""
