"""The node's controllers, one module per area (as Talos's ``controllers/<area>``), and the one list
that registers them (:func:`node_controllers`).

The graph, as ``talosctl inspect dependencies`` prints it:

* config:   MachineConfig -> MachineType, AcquireConfigStatus
* network:  MachineConfig -> layered Link/Address/Route/Operator/Hostname/Resolver specs -> merged
            specs -> the kernel (own network namespace only); the kernel -> links, addresses,
            routes -> NodeAddresses -> NetworkStatus; HostnameSpec -> HostnameStatus
* secrets:  MachineConfig -> OSRootSecrets, EtcdRootSecrets; OSRoot + Hostname + NodeAddresses ->
            CertSANs; OSRoot + CertSANs -> ApiCertificates (signed here, or by trustd on workers);
            ApiCertificates (control planes) -> TrustdCertificates (what trustd serves)
* etcd:     MachineConfig + MachineType -> EtcdConfig; EtcdConfig + Hostname + NodeAddresses -> EtcdSpec;
            Services etcd (healthy) -> EtcdMember local (the id this node's etcd reports)
            (control planes, Ichor's own) EtcdBackupConfig document -> EtcdBackupConfig -> scheduled,
            leader-only snapshots -> EtcdBackupStatus
* cri:      MachineConfig -> RegistriesConfig -> /etc/cri/conf.d/hosts/<host>/hosts.toml (+ 01-registries.part)
* cluster:  identity, DiscoveryConfig, Info -> local Affiliate -> discovery service -> raw
            Affiliates -> merged Affiliates -> Members -> Endpoints
* runtime:  the sequencer's stage -> MachineStatus; the supervisor's services -> Services (+ waits);
            TimeStatus (synced by SNTP from TimeServerStatus on a node with its own network, else the host's);
            Services machined -> SecurityState; HostnameStatus -> PlatformMetadata (platform layer);
            machine.sysctls/sysfs + Talos's defaults -> KernelParamSpecs -> the kernel (what the
            platform owns) -> KernelParamStatuses; machine.kernel.modules -> KernelModuleSpecs ->
            modprobe (a node whose kernel is its own); the boot disk (metal) -> MetaKeys, BootSlots;
            the node's mount table -> MountStatuses (STATE, EPHEMERAL); EventSinkConfig document
            (talos.events.sink on metal) -> EventSinkConfig -> every event over gRPC to the sink;
            KmsgLogConfig documents (talos.logging.kernel on metal) -> KmsgLogConfig -> the kernel
            log as JSON lines (metal only: elsewhere /dev/kmsg is the host's)
* perf:     /proc/stat, /proc/meminfo -> CPUStats, MemoryStats (host-wide on a shared kernel)
* network:  LinkStatuses -> HardwareAddress first; MachineConfig + LinkStatuses -> DeviceConfigSpecs; HostDNSConfig + ResolverStatus -> DNSUpstreams
            (health-checked); ProbeSpecs -> ProbeStatuses (TCP probes)
* etcd:     EtcdRootSecrets + the etcd service's files -> EtcdSecrets -> PKIStatus etcd
* features: MachineConfig -> KubeSpanConfig, KubernetesAccessConfig, KubeletSecrets, SeccompProfiles
            (-> /var/lib/kubelet/seccomp/profiles); DevicesStatus
* kubespan: KubeSpanConfig + HardwareAddress first -> KubeSpanIdentity local (keys kept in STATE);
            KubeSpanConfig + Affiliates (their KubeSpan keys) -> KubeSpanPeerSpecs
* k8s:      MachineConfig -> KubeletConfig, NodeIPConfig; NodeIPConfig + routed NodeAddresses -> NodeIP;
            Hostname -> Nodename; KubeletConfig + Nodename + NodeIP -> KubeletSpec -> kubelet files
* k8s:      (control planes) cluster.* -> Kubernetes PKI, component configs, their files ->
            StaticPods once etcd is healthy; machine.pods -> StaticPods; StaticPods -> PodList server
* extensions: /etc/extensions.yaml -> ExtensionStatuses; ExtensionServiceConfig documents ->
            ExtensionServiceConfigs -> their files on disk -> ExtensionServiceConfigStatuses
* k8s:      MachineConfig + Members -> KubePrismEndpoints; + features.kubePrism -> KubePrismConfigs ->
            the KubePrism balancer -> KubePrismStatuses

Only controllers write derived resources; the config store writes MachineConfig and the
sequencer MachineResetSignal. Adding a controller: write it in its area's module, name it after
what it produces, declare every input and output, add it to :func:`node_controllers`, and give it
a test that seeds its inputs into a State and asserts its outputs (``assert_resource``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from ichor.machined.controllers import (
    boot,
    cluster,
    config,
    cri,
    etcd,
    etcd_backup,
    etcd_pki,
    event_sink,
    extensions,
    feature_configs,
    k8s,
    kernel_module,
    kernel_param,
    kmsg_log,
    kubespan,
    mounts,
    network,
    perf,
    runtime,
    secrets,
    secrets_trustd,
    timesync,
    watchdog,
)
from ichor.machined.controllers.k8s import extra_manifests as k8s_extra_manifests
from ichor.machined.controllers.k8s import kubelet as k8s_kubelet
from ichor.machined.controllers.k8s import kubeprism
from ichor.machined.controllers.k8s import manifest_apply as k8s_manifest_apply
from ichor.machined.controllers.k8s import manifests as k8s_manifests
from ichor.machined.controllers.network import device_configs as network_device_configs
from ichor.machined.controllers.network import platform as network_platform
from ichor.machined.controllers.network import probes as network_probes
from ichor.machined.cosi import Controller, Source
from ichor.machined.events import EventBus
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.netlink import Netlink
from ichor.machined.platform import Layout
from ichor.machined.resources import MachineStage
from ichor.machined.resources._k8s import STATIC_POD_SERVER_STATUSES
from ichor.machined.services import ServiceInfo
from ichor.machinery.bootloader import BootState, Slot

__all__ = ["node_controllers"]


def node_controllers(
    layout: Layout,
    *,
    stage: Source[MachineStage],
    services: Source[Mapping[str, ServiceInfo]],
    events: EventBus,
    discovery_client: cluster.ClientFactory | None = None,
    request_certificate: secrets.RequestCertificate | None = None,
    netlink: Netlink | None = None,
    vip_store: network.StoreFactory | None = None,
    etcd_backup_store: etcd_backup.BackupStoreFactory | None = None,
    kubelet_changed: Callable[[], Awaitable[None]] | None = None,
    say: Callable[[str], None] | None = None,
    local_etcd_member_id: etcd.LocalMemberID | None = None,
    boot_slots: Source[BootState | None] | None = None,
    meta_keys: Source[Mapping[int, bytes]] | None = None,
    booted_slot: Slot | None = None,
    kernel_args: KernelArgs | None = None,
) -> list[Controller]:
    """Every controller of a node, in registration order.

    ``etcd_backup_store``: a client of this node's own etcd member (the scheduled backups ask it who
    leads); without one, a backup slot fails saying so. ``boot_slots``/``meta_keys``: the boot disk's
    state (a node booted from its own disk); without them the node has no BootSlots or MetaKeys.
    ``kernel_args``: the node's own kernel command line (metal), for ``talos.events.sink`` and
    ``talos.logging.kernel``; a node sharing the host's kernel passes none."""
    return [
        config.machine_type_controller(),
        config.acquire_status_controller(),
        *network.network_controllers(layout, netlink, vip_store=vip_store),
        network_probes.hardware_addr_controller(),
        network_device_configs.device_config_controller(),
        network_probes.DNSUpstreamController(),
        network_probes.ProbeController(),
        secrets.os_root_controller(),
        secrets.etcd_root_controller(),
        secrets.cert_san_controller(),
        secrets.api_certificates_controller(layout, request_certificate),
        secrets_trustd.trustd_certificates_controller(),
        etcd.etcd_config_controller(),
        etcd.etcd_spec_controller(exclusive=not layout.own_netns),
        etcd_backup.etcd_backup_config_controller(),
        etcd_backup.BackupController(layout, etcd_backup_store or etcd_backup.no_store),
        etcd.etcd_member_controller(local_etcd_member_id),
        etcd_pki.EtcdSecretsController(layout),
        etcd_pki.pki_status_controller(),
        cri.registries_config_controller(),
        cri.RegistryFilesController(layout),
        *cluster.cluster_controllers(layout, client_factory=discovery_client),
        runtime.MachineStatusController(stage, events),
        runtime.ServiceController(services),
        runtime.security_state_controller(),
        mounts.MountStatusController(layout),
        perf.StatsController(),
        *feature_configs.feature_config_controllers(layout),
        kubespan.kubespan_identity_controller(layout),
        kubespan.kubespan_peer_spec_controller(),
        boot.MetaKeyController(meta_keys or Source("META keys", {})),
        boot.BootSlotController(boot_slots or Source("boot slots", None), booted_slot),
        *kernel_param.kernel_param_controllers(layout),
        *kernel_module.kernel_module_controllers(layout, say=say),
        *watchdog.watchdog_controllers(layout, say=say),
        *event_sink.event_sink_controllers(events, kernel_args),
        *kmsg_log.kmsg_log_controllers(layout, kernel_args, say=say),
        network_platform.platform_config_controller(layout),
        timesync.TimeSyncController() if layout.own_netns else runtime.time_status_controller(),
        extensions.extension_status_controller(layout),
        extensions.extension_service_config_controller(),
        extensions.ExtensionServiceConfigFilesController(layout),
        *kubeprism.kubeprism_controllers(layout),
        *k8s_kubelet.kubelet_controllers(
            layout, static_pod_status=STATIC_POD_SERVER_STATUSES, on_change=kubelet_changed
        ),
        *k8s.k8s_controllers(layout, say=say),
        # k8s: bootstrap and extra manifests (control planes only)
        k8s_manifests.bootstrap_manifests_config_controller(),
        k8s_manifests.extra_manifests_config_controller(),
        k8s_manifests.manifest_controller(),
        k8s_extra_manifests.ExtraManifestController(),
        k8s_manifest_apply.ManifestApplyController(layout, vip_store),
    ]
