"""The node's resource types, declared as Talos 1.7 declares them.

Each type keeps Talos's canonical name, default namespace, explicit aliases, print columns and
sensitivity, so ``talosctl get <alias>`` resolves and renders exactly as against a Talos node. Spec
dataclasses render to Talos's YAML keys (``talosctl get -o yaml``); specs may also offer

* ``raw_yaml() -> str``: the spec's YAML verbatim, for specs that are not a mapping (the machine
  config text, the machine type word);
* ``proto_spec() -> bytes``: Talos's typed protobuf encoding, for clients that unmarshal specs.

:func:`register_node_types` registers every type (cluster membership and etcd included) and the Talos namespaces in a
:class:`~ichor.machined.cosi.Registry`. This package declares types only: it never creates
resources (controllers do) and never talks to the network.
"""

from __future__ import annotations

from typing import Any

from ichor.machined.cosi import Registry, ResourceType
from ichor.machined.resources._cluster import (
    AFFILIATES,
    CLUSTER_NAMESPACE,
    CLUSTER_TYPES,
    CONTROLPLANE_NAMESPACE,
    DISCOVERED_ENDPOINTS_ID,
    DISCOVERY_CONFIG_ID,
    DISCOVERY_CONFIGS,
    DISCOVERY_STATUS_ID,
    DISCOVERY_STATUSES,
    ENDPOINTS,
    IDENTITIES,
    INFO_ID,
    INFOS,
    LOCAL_IDENTITY_ID,
    MEMBERS,
    RAW_NAMESPACE,
    AffiliateSpec,
    ControlPlaneSpec,
    DiscoveryConfigSpec,
    DiscoveryStatusSpec,
    EndpointSpec,
    IdentitySpec,
    InfoSpec,
    KubeSpanAffiliateSpec,
    MemberSpec,
)
from ichor.machined.resources._config import (
    ACTIVE_CONFIG_ID,
    CONFIG_NAMESPACE,
    MACHINE_CONFIGS,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    MAINTENANCE_CONFIG_ID,
    MachineConfigSpec,
    MachineTypeSpec,
)
from ichor.machined.resources._etcd import (
    ETCD_CONFIGS,
    ETCD_ID,
    ETCD_NAMESPACE,
    ETCD_ROOT_ID,
    ETCD_ROOT_SECRETS,
    ETCD_SPECS,
    EtcdConfigSpec,
    EtcdRootSpec,
    EtcdSpecSpec,
)
from ichor.machined.resources._network import (
    ADDRESS_STATUSES,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NETWORK_NAMESPACE,
    NODE_ADDRESS_ACCUMULATIVE_ID,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESS_DEFAULT_ID,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    AddressFamily,
    AddressScope,
    AddressStatusSpec,
    HostnameStatusSpec,
    IPPrefix,
    NodeAddressSpec,
)
from ichor.machined.resources._runtime import (
    ACQUIRE_CONFIG_STATUS_ID,
    ACQUIRE_CONFIG_STATUSES,
    MACHINE_RESET_SIGNAL_ID,
    MACHINE_RESET_SIGNALS,
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    RUNTIME_NAMESPACE,
    SERVICES,
    TIME_STATUS_ID,
    TIME_STATUSES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    ServiceSpec,
    TimeStatusSpec,
    UnmetCondition,
)
from ichor.machined.resources._secrets import (
    API_CERTIFICATES,
    API_CERTIFICATES_ID,
    CERT_SAN_API_ID,
    CERT_SANS,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
    SECRETS_NAMESPACE,
    ApiCertificatesSpec,
    CertSANSpec,
    IPAddress,
    OSRootSpec,
    PEMCertificate,
    PEMCertificateAndKey,
)

__all__ = [
    "ACQUIRE_CONFIG_STATUSES",
    "ACQUIRE_CONFIG_STATUS_ID",
    "ACTIVE_CONFIG_ID",
    "ADDRESS_STATUSES",
    "AFFILIATES",
    "API_CERTIFICATES",
    "API_CERTIFICATES_ID",
    "CERT_SANS",
    "CERT_SAN_API_ID",
    "CLUSTER_NAMESPACE",
    "CLUSTER_TYPES",
    "CONFIG_NAMESPACE",
    "CONTROLPLANE_NAMESPACE",
    "DISCOVERED_ENDPOINTS_ID",
    "DISCOVERY_CONFIGS",
    "DISCOVERY_CONFIG_ID",
    "DISCOVERY_STATUSES",
    "DISCOVERY_STATUS_ID",
    "ENDPOINTS",
    "ETCD_CONFIGS",
    "ETCD_ID",
    "ETCD_NAMESPACE",
    "ETCD_ROOT_ID",
    "ETCD_ROOT_SECRETS",
    "ETCD_SPECS",
    "HOSTNAME_STATUSES",
    "HOSTNAME_STATUS_ID",
    "IDENTITIES",
    "INFOS",
    "INFO_ID",
    "LOCAL_IDENTITY_ID",
    "MACHINE_CONFIGS",
    "MACHINE_RESET_SIGNALS",
    "MACHINE_RESET_SIGNAL_ID",
    "MACHINE_STATUSES",
    "MACHINE_STATUS_ID",
    "MACHINE_TYPES",
    "MACHINE_TYPE_ID",
    "MAINTENANCE_CONFIG_ID",
    "MEMBERS",
    "NETWORK_NAMESPACE",
    "NODE_ADDRESSES",
    "NODE_ADDRESS_ACCUMULATIVE_ID",
    "NODE_ADDRESS_CURRENT_ID",
    "NODE_ADDRESS_DEFAULT_ID",
    "NODE_ADDRESS_ROUTED_ID",
    "NODE_TYPES",
    "OS_ROOT_ID",
    "OS_ROOT_SECRETS",
    "RAW_NAMESPACE",
    "RUNTIME_NAMESPACE",
    "SECRETS_NAMESPACE",
    "SERVICES",
    "TALOS_NAMESPACES",
    "TIME_STATUSES",
    "TIME_STATUS_ID",
    "AddressFamily",
    "AddressScope",
    "AddressStatusSpec",
    "AffiliateSpec",
    "ApiCertificatesSpec",
    "CertSANSpec",
    "ControlPlaneSpec",
    "DiscoveryConfigSpec",
    "DiscoveryStatusSpec",
    "EndpointSpec",
    "EtcdConfigSpec",
    "EtcdRootSpec",
    "EtcdSpecSpec",
    "HostnameStatusSpec",
    "IPAddress",
    "IPPrefix",
    "IdentitySpec",
    "InfoSpec",
    "KubeSpanAffiliateSpec",
    "MachineConfigSpec",
    "MachineStage",
    "MachineStatusSpec",
    "MachineStatusStatus",
    "MachineTypeSpec",
    "MemberSpec",
    "NodeAddressSpec",
    "OSRootSpec",
    "PEMCertificate",
    "PEMCertificateAndKey",
    "ServiceSpec",
    "TimeStatusSpec",
    "UnmetCondition",
    "register_node_types",
]

TALOS_NAMESPACES: dict[str, str] = {
    RUNTIME_NAMESPACE: "Talos v1alpha1 subsystems glue resources.",
    "cluster": "Cluster configuration and discovery resources.",
    "cluster-raw": "Cluster unmerged raw resources.",
    CONFIG_NAMESPACE: "Talos node configuration.",
    "etcd": "etcd resources.",
    "files": "Files and file-like resources.",
    "hardware": "Hardware resources.",
    "k8s": "Kubernetes all node types resources.",
    "controlplane": "Kubernetes control plane resources.",
    "kubespan": "KubeSpan resources.",
    NETWORK_NAMESPACE: "Networking resources.",
    "network-config": "Networking configuration resources.",
    "cri": "CRI Seccomp resources.",
    SECRETS_NAMESPACE: "Resources with secret material.",
    "perf": "Stats resources.",
}
"""Every namespace a Talos 1.7 node registers at start, with Talos's descriptions."""

NODE_TYPES: tuple[ResourceType[Any], ...] = (
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    MACHINE_STATUSES,
    MACHINE_RESET_SIGNALS,
    SERVICES,
    TIME_STATUSES,
    ACQUIRE_CONFIG_STATUSES,
    OS_ROOT_SECRETS,
    API_CERTIFICATES,
    CERT_SANS,
    HOSTNAME_STATUSES,
    NODE_ADDRESSES,
    ADDRESS_STATUSES,
    ETCD_ROOT_SECRETS,
    ETCD_CONFIGS,
    ETCD_SPECS,
    *CLUSTER_TYPES,
)


def register_node_types(registry: Registry) -> None:
    """Register the Talos namespaces and every type in :data:`NODE_TYPES`.

    Types already registered are skipped, so this composes with callers that registered some of
    them (or the runtime's own types) first.
    """
    for name, description in TALOS_NAMESPACES.items():
        registry.register_namespace(name, description)
    for rtype in NODE_TYPES:
        if rtype.type not in registry:
            registry.register(rtype)
