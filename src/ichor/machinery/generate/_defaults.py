"""The documents ``talosctl gen config`` produces before any patch, as plain Python data.

Key order here is irrelevant: the renderer puts fields in Talos's struct order. What matters is
which fields exist for a given version contract and options, and their values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ichor.machinery.constants import (
    DEFAULT_DNS_DOMAIN,
    DEFAULT_INSTALL_DISK,
    DEFAULT_KUBERNETES_VERSION,
    DEFAULT_POD_SUBNET,
    DEFAULT_SERVICE_SUBNET,
    KUBEPRISM_PORT,
    TALOS_VERSION,
    Images,
)
from ichor.machinery.contract import CURRENT_CONTRACT, VersionContract
from ichor.machinery.secrets import SecretsBundle

# Paths Talos leaves out when comments are off and the value is empty (they are kept with docs so
# their examples have somewhere to hang).
EMPTY_WHEN_DOCUMENTED = (
    ("machine", "registries"),
    ("cluster", "extraManifests"),
    ("cluster", "inlineManifests"),
)


@dataclass(frozen=True)
class GenOptions:
    """Everything ``gen config`` flags can change in the generated documents."""

    cluster_name: str
    endpoint: str
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    talos_version: str = TALOS_VERSION
    contract: VersionContract = CURRENT_CONTRACT
    install_disk: str = DEFAULT_INSTALL_DISK
    install_image: str | None = None
    additional_sans: tuple[str, ...] = ()
    dns_domain: str = DEFAULT_DNS_DOMAIN
    registry_mirrors: tuple[tuple[str, str], ...] = ()
    discovery_enabled: bool = True
    kubespan: bool = False
    debug: bool = False
    persist: bool = True
    pod_subnets: tuple[str, ...] = field(default=(DEFAULT_POD_SUBNET,))
    service_subnets: tuple[str, ...] = field(default=(DEFAULT_SERVICE_SUBNET,))
    kube_prism_port: int | None = None
    """Talos's ``WithKubePrismPort``: None keeps the contract's default (7445 from v1.6); 0 leaves
    KubePrism out."""
    host_dns_forward_kube_dns_to_host: bool | None = None
    """Talos's ``WithHostDNSForwardKubeDNSToHost`` (its docker provisioner sets it: container mode
    requires it); None leaves the key out."""

    @property
    def images(self) -> Images:
        return Images(kubernetes_version=self.kubernetes_version, talos_version=self.talos_version)

    @property
    def endpoint_host(self) -> str:
        return urlsplit(self.endpoint).hostname or ""

    def api_server_sans(self) -> list[str]:
        sans: list[str] = []
        for name in (self.endpoint_host, *self.additional_sans):
            if name and name not in sans:
                sans.append(name)
        return sans


def _pod_security_admission() -> dict[str, Any]:
    return {
        "name": "PodSecurity",
        "configuration": {
            "apiVersion": "pod-security.admission.config.k8s.io/v1alpha1",
            "defaults": {
                "audit": "restricted",
                "audit-version": "latest",
                "enforce": "baseline",
                "enforce-version": "latest",
                "warn": "restricted",
                "warn-version": "latest",
            },
            "exemptions": {"namespaces": ["kube-system"], "runtimeClasses": [], "usernames": []},
            "kind": "PodSecurityConfiguration",
        },
    }


def _machine(bundle: SecretsBundle, opts: GenOptions, *, controlplane: bool) -> dict[str, Any]:
    contract = opts.contract
    kubelet: dict[str, Any] = {"image": opts.images.kubelet}
    if contract.kubelet_default_runtime_seccomp_profile_enabled:
        kubelet["defaultRuntimeSeccompProfileEnabled"] = True
    if contract.kubelet_manifests_directory_disabled:
        kubelet["disableManifestsDirectory"] = True

    network: dict[str, Any] = {}
    if opts.kubespan:
        network["kubespan"] = {"enabled": True}

    features: dict[str, Any] = {"rbac": True}
    if contract.stable_hostname_enabled:
        features["stableHostname"] = True
    if contract.apid_ext_key_usage_check_enabled:
        features["apidCheckExtKeyUsage"] = True
    if contract.disk_quota_support_enabled:
        features["diskQuotaSupport"] = True
    if opts.kube_prism_port is not None:  # set explicitly: 0 disables it, whatever the contract
        if opts.kube_prism_port > 0:
            features["kubePrism"] = {"enabled": True, "port": opts.kube_prism_port}
    elif contract.kube_prism_enabled:
        features["kubePrism"] = {"enabled": True, "port": KUBEPRISM_PORT}
    if contract.host_dns_enabled:
        features["hostDNS"] = {"enabled": True}
        if opts.host_dns_forward_kube_dns_to_host is not None:
            features["hostDNS"]["forwardKubeDNSToHost"] = opts.host_dns_forward_kube_dns_to_host

    registries: dict[str, Any] = {}
    for host, endpoint in opts.registry_mirrors:
        mirrors = registries.setdefault("mirrors", {})
        mirrors.setdefault(host, {"endpoints": []})["endpoints"].append(endpoint)

    return {
        "type": "controlplane" if controlplane else "worker",
        "token": bundle.trustd_token,
        "ca": {"crt": bundle.os.crt_b64(), "key": bundle.os.key_b64() if controlplane else ""},
        "certSANs": list(opts.additional_sans),
        "kubelet": kubelet,
        "network": network,
        "install": {
            "disk": opts.install_disk,
            "image": opts.install_image or opts.images.installer,
            "wipe": False,
        },
        "registries": registries,
        "features": features,
    }


def _discovery(opts: GenOptions) -> dict[str, Any]:
    discovery: dict[str, Any] = {"enabled": opts.discovery_enabled}
    registries: dict[str, Any] = {"service": {}}
    if opts.contract.kubernetes_discovery_backend_disabled:
        registries["kubernetes"] = {"disabled": True}
    discovery["registries"] = registries
    return discovery


def _cluster_network(opts: GenOptions) -> dict[str, Any]:
    return {
        "dnsDomain": opts.dns_domain,
        "podSubnets": list(opts.pod_subnets),
        "serviceSubnets": list(opts.service_subnets),
    }


def controlplane_document(bundle: SecretsBundle, opts: GenOptions) -> dict[str, Any]:
    """The v1alpha1 document of ``controlplane.yaml``."""
    contract = opts.contract
    api_server: dict[str, Any] = {
        "image": opts.images.kube_apiserver,
        "certSANs": opts.api_server_sans(),
        "disablePodSecurityPolicy": True,
    }
    if contract.pod_security_admission_enabled:
        api_server["admissionControl"] = [_pod_security_admission()]
    if contract.api_server_audit_policy_supported:
        api_server["auditPolicy"] = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "rules": [{"level": "Metadata"}],
        }
    cluster: dict[str, Any] = {
        "id": bundle.cluster_id,
        "secret": bundle.cluster_secret,
        "controlPlane": {"endpoint": opts.endpoint},
        "clusterName": opts.cluster_name,
        "network": _cluster_network(opts),
        "token": bundle.bootstrap_token,
        "ca": {"crt": bundle.k8s.crt_b64(), "key": bundle.k8s.key_b64()},
        "aggregatorCA": {"crt": bundle.k8s_aggregator.crt_b64(), "key": bundle.k8s_aggregator.key_b64()},
        "serviceAccount": {"key": _b64(bundle.k8s_service_account_key)},
        "apiServer": api_server,
        "controllerManager": {"image": opts.images.kube_controller_manager},
        "proxy": {"image": opts.images.kube_proxy},
        "scheduler": {"image": opts.images.kube_scheduler},
        "etcd": {"ca": {"crt": bundle.etcd.crt_b64(), "key": bundle.etcd.key_b64()}},
        "extraManifests": [],
        "inlineManifests": [],
    }
    if contract.secretbox_encryption_supported:
        cluster["secretboxEncryptionSecret"] = bundle.secretbox_encryption_secret
    else:
        cluster["aescbcEncryptionSecret"] = bundle.aescbc_encryption_secret or ""
    if contract.cluster_discovery_enabled:
        cluster["discovery"] = _discovery(opts)
    return {
        "version": "v1alpha1",
        "debug": opts.debug,
        "persist": opts.persist,
        "machine": _machine(bundle, opts, controlplane=True),
        "cluster": cluster,
    }


def worker_document(bundle: SecretsBundle, opts: GenOptions) -> dict[str, Any]:
    """The v1alpha1 document of ``worker.yaml``: no cluster CA keys, no control-plane sections."""
    cluster: dict[str, Any] = {
        "id": bundle.cluster_id,
        "secret": bundle.cluster_secret,
        "controlPlane": {"endpoint": opts.endpoint},
        "network": _cluster_network(opts),
        "token": bundle.bootstrap_token,
        "ca": {"crt": bundle.k8s.crt_b64(), "key": ""},
    }
    if opts.contract.cluster_discovery_enabled:
        cluster["discovery"] = _discovery(opts)
    return {
        "version": "v1alpha1",
        "debug": opts.debug,
        "persist": opts.persist,
        "machine": _machine(bundle, opts, controlplane=False),
        "cluster": cluster,
    }


def _b64(pem: bytes) -> str:
    import base64

    return base64.b64encode(pem).decode("ascii")
