"""Resources of the Kubernetes bootstrap manifests (Talos 1.7, namespace ``controlplane``).

* ``BootstrapManifestsConfigs`` (id ``manifests``): what the bootstrap manifests are rendered from
  (images, CIDRs, which of flannel/kube-proxy/CoreDNS are on), from the machine config;
* ``ExtraManifestsConfigs`` (id ``extra-manifests``): ``cluster.extraManifests`` URLs (with
  ``extraManifestHeaders``), custom CNI URLs and ``cluster.inlineManifests``;
* ``Manifests``: one per manifest id (``00-kubelet-bootstrapping-token`` ... ``99-<name>``), the
  Kubernetes objects it holds; ``get manifests -o yaml`` prints them as Talos does (the spec is the
  list of objects);
* ``ManifestStatuses`` (id ``manifests``): the manifest ids applied to the cluster so far.

This module declares types only; controllers create the resources.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import ResourceType
from ichor.machined.resources._cluster import CONTROLPLANE_NAMESPACE
from ichor.machinery.yamlio import dump_documents, from_plain

__all__ = [
    "BOOTSTRAP_MANIFESTS_CONFIGS",
    "BOOTSTRAP_MANIFESTS_CONFIG_ID",
    "EXTRA_MANIFESTS_CONFIGS",
    "EXTRA_MANIFESTS_CONFIG_ID",
    "K8S_MANIFEST_TYPES",
    "MANIFESTS",
    "MANIFEST_STATUSES",
    "MANIFEST_STATUS_ID",
    "BootstrapManifestsConfigSpec",
    "ExtraManifest",
    "ExtraManifestsConfigSpec",
    "ManifestSpec",
    "ManifestStatusSpec",
]

BOOTSTRAP_MANIFESTS_CONFIG_ID = "manifests"
EXTRA_MANIFESTS_CONFIG_ID = "extra-manifests"
MANIFEST_STATUS_ID = "manifests"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BootstrapManifestsConfigSpec:
    # Talos 1.7 tags the server field `yaml:"string"`; `get -o yaml` shows that key.
    server: str = dataclasses.field(default="", metadata={"yaml": "string"})
    cluster_domain: str = ""
    pod_cidrs: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "podCIDRs"})
    proxy_enabled: bool = False
    proxy_image: str = ""
    proxy_args: tuple[str, ...] = ()
    core_dns_enabled: bool = dataclasses.field(default=False, metadata={"yaml": "coreDNSEnabled"})
    core_dns_image: str = dataclasses.field(default="", metadata={"yaml": "coreDNSImage"})
    dns_service_ip: str = dataclasses.field(default="", metadata={"yaml": "dnsServiceIP"})
    dns_service_ipv6: str = dataclasses.field(default="", metadata={"yaml": "dnsServiceIPv6"})
    flannel_enabled: bool = False
    flannel_image: str = ""
    flannel_extra_args: tuple[str, ...] = ()
    flannel_kube_service_host: str = ""
    flannel_kube_service_port: str = ""
    pod_security_policy_enabled: bool = False
    talos_api_service_enabled: bool = dataclasses.field(
        default=False, metadata={"yaml": "talosAPIServiceEnabled"}
    )
    service_host_dns_address: str = dataclasses.field(default="", metadata={"yaml": "serviceHostDNSAddress"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtraManifest:
    name: str
    url: str = dataclasses.field(default="", metadata={"yaml": "url"})
    priority: str = "99"
    extra_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    inline_manifest: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtraManifestsConfigSpec:
    extra_manifests: tuple[ExtraManifest, ...] = ()


@dataclasses.dataclass(frozen=True)
class ManifestSpec:
    """The Kubernetes objects of one manifest, in apply order (plain JSON-able dicts)."""

    items: tuple[dict[str, Any], ...] = ()

    def raw_yaml(self) -> str:
        if not self.items:
            return "[]\n"
        # Talos prints the spec as a YAML list of the objects.
        return "".join(
            "- " + doc.replace("\n", "\n  ").rstrip(" ")
            for doc in dump_documents([from_plain(i) for i in self.items]).split("---\n")
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ManifestStatusSpec:
    manifests_applied: tuple[str, ...] = ()


BOOTSTRAP_MANIFESTS_CONFIGS: ResourceType[BootstrapManifestsConfigSpec] = ResourceType(
    type="BootstrapManifestsConfigs.kubernetes.talos.dev",
    default_namespace=CONTROLPLANE_NAMESPACE,
    spec_class=BootstrapManifestsConfigSpec,
)
EXTRA_MANIFESTS_CONFIGS: ResourceType[ExtraManifestsConfigSpec] = ResourceType(
    type="ExtraManifestsConfigs.kubernetes.talos.dev",
    default_namespace=CONTROLPLANE_NAMESPACE,
    spec_class=ExtraManifestsConfigSpec,
)
MANIFESTS: ResourceType[ManifestSpec] = ResourceType(
    type="Manifests.kubernetes.talos.dev",
    default_namespace=CONTROLPLANE_NAMESPACE,
    spec_class=ManifestSpec,
    sensitive=True,
)
MANIFEST_STATUSES: ResourceType[ManifestStatusSpec] = ResourceType(
    type="ManifestStatuses.kubernetes.talos.dev",
    default_namespace=CONTROLPLANE_NAMESPACE,
    spec_class=ManifestStatusSpec,
)
K8S_MANIFEST_TYPES: tuple[ResourceType[Any], ...] = (
    BOOTSTRAP_MANIFESTS_CONFIGS,
    EXTRA_MANIFESTS_CONFIGS,
    MANIFESTS,
    MANIFEST_STATUSES,
)
