"""Area ``k8s``: Talos's Kubernetes layer on a node (Talos's ``controllers/k8s`` and the Kubernetes
parts of ``controllers/secrets``).

Control planes: MachineConfig -> KubernetesRootSecrets -> CertSANs ``k8s`` -> KubernetesDynamicCerts,
KubernetesSecrets (:mod:`.secrets`); MachineConfig -> APIServer/ControllerManager/Scheduler/
AdmissionControl/AuditPolicy configs (:mod:`.control_plane`); those -> files under
``/system/secrets/kubernetes`` and ``/system/config/kubernetes`` + SecretsStatus/ConfigStatus
(:mod:`.render`); configs + statuses + a healthy etcd -> StaticPods (:mod:`.static_pods`).
Every node: MachineConfig -> NodeAddressFilters ``no-k8s``/``only-k8s`` (:mod:`.address_filter`);
``machine.pods`` -> StaticPods; StaticPods -> the PodList server the kubelet polls
(:mod:`.static_pod_server`); MachineConfig -> NodeLabelSpecs, NodeTaintSpecs -> the ``Node`` object
(:mod:`.nodes`), cordoned while the machine shuts down, upgrades or resets (MachineStatus ->
NodeCordonedSpec, :mod:`.node_cordoned`); the ``Node`` -> NodeStatus (:mod:`.node_status`); the
kubelet service -> KubeletLifecycle (:mod:`.kubelet_lifecycle`); the kubelet's pods ->
StaticPodStatuses (:mod:`.static_pod_status`).
"""

from __future__ import annotations

from collections.abc import Callable

from ichor.machined.controllers.k8s import (
    address_filter,
    control_plane,
    kubelet_lifecycle,
    manifest_apply,
    node_cordoned,
    node_status,
    nodes,
    render,
    secrets,
    static_pod_server,
    static_pod_status,
    static_pods,
)
from ichor.machined.cosi import Controller
from ichor.machined.platform import Layout

__all__ = ["k8s_controllers"]


def k8s_controllers(
    layout: Layout, *, say: Callable[[str], None] | None = None,
    api_client: manifest_apply.ClientFactory = manifest_apply.admin_client,
) -> list[Controller]:  # fmt: skip
    """The controllers of this area, in registration order (``api_client``: how the control-plane
    static pods probe the local kube-apiserver's ``/readyz``)."""
    return [
        address_filter.node_address_filter_controller(),
        secrets.k8s_root_controller(),
        secrets.k8s_cert_san_controller(),
        secrets.k8s_dynamic_certs_controller(),
        secrets.k8s_secrets_controller(),
        *control_plane.control_plane_config_controllers(),
        render.render_secrets_controller(layout),
        render.render_configs_controller(layout),
        static_pods.control_plane_static_pod_controller(api_client),
        static_pods.static_pod_config_controller(),
        static_pod_server.StaticPodServerController(layout, say=say),
        nodes.node_label_spec_controller(),
        nodes.node_taint_spec_controller(),
        node_cordoned.node_cordoned_spec_controller(),
        nodes.NodeApplyController(layout),
        node_status.NodeStatusController(layout),
        kubelet_lifecycle.kubelet_lifecycle_controller(),
        static_pod_status.KubeletStaticPodController(layout),
    ]
