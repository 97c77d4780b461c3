"""Control-plane component configs from the machine config (namespace ``controlplane``).

* ``k8s.ControlPlaneAPIServerController`` -> APIServerConfig ``kube-apiserver``;
* ``k8s.ControlPlaneControllerManagerController`` -> ControllerManagerConfig ``kube-controller-manager``;
* ``k8s.ControlPlaneSchedulerController`` -> SchedulerConfig ``kube-scheduler``;
* ``k8s.ControlPlaneAdmissionControlController`` -> AdmissionControlConfig ``admission-control``;
* ``k8s.ControlPlaneAuditPolicyController`` -> AuditPolicyConfig ``audit-policy``.

Each reads MachineConfig + MachineType and produces nothing on a worker. A value that cannot be
used (an unknown Kubernetes version in an image tag) is a wait naming the key.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any, TypeVar

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import (
    ControllerContext,
    Input,
    ResourceType,
    SkipReconcile,
    TransformController,
    WaitingFor,
)
from ichor.machined.resources import MACHINE_TYPE_ID, MACHINE_TYPES, MachineTypeSpec
from ichor.machined.resources._k8s import (
    ADMISSION_CONTROL_CONFIGS,
    ADMISSION_CONTROL_ID,
    APISERVER_CONFIGS,
    APISERVER_ID,
    AUDIT_POLICY_CONFIGS,
    AUDIT_POLICY_ID,
    CONTROLLER_MANAGER_CONFIGS,
    CONTROLLER_MANAGER_ID,
    SCHEDULER_CONFIGS,
    SCHEDULER_ID,
    AdmissionControlConfigSpec,
    AdmissionPluginSpec,
    APIServerConfigSpec,
    AuditPolicyConfigSpec,
    ControllerManagerConfigSpec,
    ExtraVolume,
    ResourcesSpec,
    SchedulerConfigSpec,
)
from ichor.machinery.config._models import ClusterConfig, Config, VolumeMountConfig
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION, DEFAULT_POD_SUBNET, DEFAULT_SERVICE_SUBNET

__all__ = [
    "DEFAULT_AUDIT_POLICY",
    "control_plane_config_controllers",
    "kubernetes_version",
]

S = TypeVar("S")

DEFAULT_AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "rules": [{"level": "Metadata"}],
}
"""Talos's audit policy when ``cluster.apiServer.auditPolicy`` is empty."""

_VERSION_TAG = re.compile(r":v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][\w.-]*)?(?:@sha256:[0-9a-f]+)?$")


def kubernetes_version(image: str, key: str) -> tuple[int, int]:
    """``registry.k8s.io/kube-apiserver:v1.30.3`` -> ``(1, 30)``; an image without a version tag
    is a wait naming ``key``."""
    match = _VERSION_TAG.search(image)
    if match is None or match.group(1) != "1":
        raise WaitingFor(
            "control plane configuration",
            f"{key} {image!r} has no Kubernetes version tag: use <image>:v{DEFAULT_KUBERNETES_VERSION}",
        )
    return int(match.group(1)), int(match.group(2))


def _image(configured: str | None, name: str, key: str) -> str:
    image = configured or f"registry.k8s.io/{name}:v{DEFAULT_KUBERNETES_VERSION}"
    kubernetes_version(image, key)
    return image


def _volumes(volumes: list[VolumeMountConfig] | None, key: str) -> tuple[ExtraVolume, ...]:
    out = []
    for index, volume in enumerate(volumes or []):
        if not volume.host_path or not volume.mount_path:
            raise WaitingFor(
                "control plane configuration", f"{key}[{index}] needs both hostPath and mountPath"
            )
        # Talos names extra volumes after their mount path.
        name = volume.mount_path.strip("/").replace("/", "-").replace(".", "-") or "root"
        out.append(ExtraVolume(name=name, host_path=volume.host_path, mount_path=volume.mount_path,
                               read_only=bool(volume.readonly)))  # fmt: skip
    return tuple(out)


def _resources(value: dict[str, Any] | None, key: str) -> ResourcesSpec:
    value = value or {}
    parts: dict[str, dict[str, str]] = {}
    for part in ("requests", "limits"):
        entries = value.get(part) or {}
        if not isinstance(entries, dict):
            raise WaitingFor("control plane configuration", f"{key}.{part} must be a map of cpu/memory")
        parts[part] = {str(k): str(v) for k, v in entries.items()}
    return ResourcesSpec(requests=parts["requests"], limits=parts["limits"])


def _strings(values: dict[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


def _subnets(values: list[str] | None, default: str, key: str) -> tuple[str, ...]:
    subnets = tuple(values or [default])
    for index, subnet in enumerate(subnets):
        try:
            ipaddress.ip_network(subnet, strict=False)
        except ValueError:
            raise WaitingFor(
                "control plane configuration", f"{key}[{index}] {subnet!r} is not a CIDR"
            ) from None
    return subnets


def _api_server(cluster: ClusterConfig) -> APIServerConfigSpec:
    api = cluster.api_server
    plane = cluster.control_plane
    network = cluster.network
    return APIServerConfigSpec(
        image=_image(api.image if api else None, "kube-apiserver", "cluster.apiServer.image"),
        control_plane_endpoint=plane.endpoint or "" if plane is not None else "",
        etcd_servers=("https://localhost:2379",),
        local_port=(plane.local_api_server_port if plane is not None else None) or 6443,
        service_cidrs=_subnets(network.service_subnets if network else None, DEFAULT_SERVICE_SUBNET,
                               "cluster.network.serviceSubnets"),
        extra_args=_strings(api.extra_args if api else None),
        extra_volumes=_volumes(api.extra_volumes if api else None, "cluster.apiServer.extraVolumes"),
        environment_variables=_strings(api.env if api else None),
        pod_security_policy_enabled=not (api and api.disable_pod_security_policy),
        resources=_resources(api.resources if api else None, "cluster.apiServer.resources"),
    )  # fmt: skip


def _controller_manager(cluster: ClusterConfig) -> ControllerManagerConfigSpec:
    cm = cluster.controller_manager
    network = cluster.network
    return ControllerManagerConfigSpec(
        image=_image(cm.image if cm else None, "kube-controller-manager", "cluster.controllerManager.image"),
        pod_cidrs=_subnets(network.pod_subnets if network else None, DEFAULT_POD_SUBNET, "cluster.network.podSubnets"),
        service_cidrs=_subnets(network.service_subnets if network else None, DEFAULT_SERVICE_SUBNET,
                               "cluster.network.serviceSubnets"),
        extra_args=_strings(cm.extra_args if cm else None),
        extra_volumes=_volumes(cm.extra_volumes if cm else None, "cluster.controllerManager.extraVolumes"),
        environment_variables=_strings(cm.env if cm else None),
        resources=_resources(cm.resources if cm else None, "cluster.controllerManager.resources"),
    )  # fmt: skip


def _scheduler(cluster: ClusterConfig) -> SchedulerConfigSpec:
    s = cluster.scheduler
    return SchedulerConfigSpec(
        image=_image(s.image if s else None, "kube-scheduler", "cluster.scheduler.image"),
        extra_args=_strings(s.extra_args if s else None),
        extra_volumes=_volumes(s.extra_volumes if s else None, "cluster.scheduler.extraVolumes"),
        environment_variables=_strings(s.env if s else None),
        resources=_resources(s.resources if s else None, "cluster.scheduler.resources"),
        config=dict(s.config or {}) if s else {},
    )  # fmt: skip


def _admission(cluster: ClusterConfig) -> AdmissionControlConfigSpec:
    plugins = cluster.api_server.admission_control if cluster.api_server else None
    out = []
    for index, plugin in enumerate(plugins or []):
        if not plugin.name:
            raise WaitingFor(
                "control plane configuration", f"cluster.apiServer.admissionControl[{index}].name is empty"
            )
        out.append(AdmissionPluginSpec(name=plugin.name, configuration=dict(plugin.configuration or {})))
    return AdmissionControlConfigSpec(config=tuple(out))


def _audit(cluster: ClusterConfig) -> AuditPolicyConfigSpec:
    policy = cluster.api_server.audit_policy if cluster.api_server else None
    return AuditPolicyConfigSpec(config=dict(policy) if policy else dict(DEFAULT_AUDIT_POLICY))


def _controller(
    name: str, output: ResourceType[S], id: str, build: Callable[[ClusterConfig], S]
) -> TransformController[S]:
    def derive(ctx: ControllerContext) -> dict[str, S]:
        config: Config = active_config(ctx)
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if machine_type is None:
            raise SkipReconcile
        if machine_type.spec is MachineTypeSpec.WORKER or config.cluster is None:
            return {}
        return {id: build(config.cluster)}

    return TransformController(
        name,
        inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=output,
        map_inputs=derive,
    )


def control_plane_config_controllers() -> list[TransformController[Any]]:
    return [
        _controller("k8s.ControlPlaneAPIServerController", APISERVER_CONFIGS, APISERVER_ID, _api_server),
        _controller("k8s.ControlPlaneControllerManagerController", CONTROLLER_MANAGER_CONFIGS,
                    CONTROLLER_MANAGER_ID, _controller_manager),
        _controller("k8s.ControlPlaneSchedulerController", SCHEDULER_CONFIGS, SCHEDULER_ID, _scheduler),
        _controller("k8s.ControlPlaneAdmissionControlController", ADMISSION_CONTROL_CONFIGS,
                    ADMISSION_CONTROL_ID, _admission),
        _controller("k8s.ControlPlaneAuditPolicyController", AUDIT_POLICY_CONFIGS, AUDIT_POLICY_ID, _audit),
    ]  # fmt: skip
