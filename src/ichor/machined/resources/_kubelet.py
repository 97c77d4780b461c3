"""Resources of the kubelet, with Talos 1.7's type names, namespace (``k8s``) and YAML keys.

* ``KubeletConfigs/kubelet``: ``machine.kubelet`` plus what the cluster network implies (cluster DNS,
  domain) and the static pod server's URL;
* ``NodeIPConfigs/kubelet``: the subnets the node IP is picked from (``nodeIP.validSubnets`` split into
  valid and excluded, pod/service subnets and shared IPs excluded);
* ``NodeIPs/kubelet``: the picked address(es), one per IP family;
* ``Nodenames/nodename``: the name the node registers with (hostname, or FQDN with ``registerWithFQDN``);
* ``KubeletSpecs/kubelet``: what the ``kubelet`` service runs: image, args, extra mounts, the expected
  node name, the ``KubeletConfiguration`` that becomes ``/etc/kubernetes/kubelet.yaml`` and the
  ``CredentialProviderConfig`` that becomes ``/etc/kubernetes/kubelet-credentialproviderconfig.yaml``.

Types only; the controllers in :mod:`ichor.machined.controllers.k8s.kubelet` create them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machinery.extensions import Mount

__all__ = [
    "K8S_NAMESPACE",
    "KUBELET_CONFIGS",
    "KUBELET_ID",
    "KUBELET_SPECS",
    "KUBELET_TYPES",
    "NODENAMES",
    "NODENAME_ID",
    "NODE_IPS",
    "NODE_IP_CONFIGS",
    "KubeletConfigSpec",
    "KubeletMount",
    "KubeletSpecSpec",
    "NodeIPConfigSpec",
    "NodeIPSpec",
    "NodenameSpec",
]

K8S_NAMESPACE = "k8s"
KUBELET_ID = "kubelet"
NODENAME_ID = "nodename"


KubeletMount = Mount
"""An OCI mount (a ``machine.kubelet.extraMounts`` entry), as extension services declare theirs."""


@dataclasses.dataclass(frozen=True)
class KubeletConfigSpec:
    image: str = ""
    cluster_dns: tuple[str, ...] = dataclasses.field(default=(), metadata={"yaml": "clusterDNS"})
    cluster_domain: str = ""
    extra_args: dict[str, str] = dataclasses.field(default_factory=dict)
    extra_mounts: tuple[KubeletMount, ...] = ()
    extra_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    cloud_provider_external: bool = False
    default_runtime_seccomp_profile_enabled: bool = dataclasses.field(
        default=False, metadata={"yaml": "defaultRuntimeSeccompEnabled"}
    )
    skip_node_registration: bool = False
    static_pod_list_url: str = dataclasses.field(default="", metadata={"yaml": "staticPodListURL"})
    disable_manifests_directory: bool = False
    enable_fs_quota_monitoring: bool = dataclasses.field(
        default=False, metadata={"yaml": "enableFSQuotaMonitoring"}
    )
    allow_scheduling_on_control_planes: bool = False
    credential_provider_config: dict[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"omitempty": True}
    )
    """``machine.kubelet.credentialProviderConfig`` as given (empty: none)."""


@dataclasses.dataclass(frozen=True)
class NodeIPConfigSpec:
    valid_subnets: tuple[str, ...] = ()
    exclude_subnets: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class NodeIPSpec:
    addresses: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class NodenameSpec:
    nodename: str = ""
    hostname_version: str = ""
    skip_node_registration: bool = False


@dataclasses.dataclass(frozen=True)
class KubeletSpecSpec:
    image: str = ""
    args: tuple[str, ...] = ()
    extra_mounts: tuple[KubeletMount, ...] = ()
    expected_nodename: str = ""
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    credential_provider_config: dict[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"omitempty": True}
    )
    """Written to ``/etc/kubernetes/kubelet-credentialproviderconfig.yaml`` when not empty."""


def _k8s(plural: str, spec: type[Any], *columns: PrintColumn) -> ResourceType[Any]:
    return ResourceType(
        type=f"{plural}.kubernetes.talos.dev", default_namespace=K8S_NAMESPACE, spec_class=spec,
        print_columns=columns,
    )  # fmt: skip


KUBELET_CONFIGS: ResourceType[KubeletConfigSpec] = _k8s("KubeletConfigs", KubeletConfigSpec)
NODE_IP_CONFIGS: ResourceType[NodeIPConfigSpec] = _k8s("NodeIPConfigs", NodeIPConfigSpec)
NODE_IPS: ResourceType[NodeIPSpec] = _k8s("NodeIPs", NodeIPSpec)
NODENAMES: ResourceType[NodenameSpec] = _k8s(
    "Nodenames", NodenameSpec, PrintColumn("Nodename", "{.nodename}")
)
KUBELET_SPECS: ResourceType[KubeletSpecSpec] = _k8s("KubeletSpecs", KubeletSpecSpec)

KUBELET_TYPES: tuple[ResourceType[Any], ...] = (
    KUBELET_CONFIGS,
    NODE_IP_CONFIGS,
    NODE_IPS,
    NODENAMES,
    KUBELET_SPECS,
)
