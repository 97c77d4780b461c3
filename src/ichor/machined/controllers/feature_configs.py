"""Talos 1.7's per-feature views of the machine config, as its controllers make them.

* ``kubespan.ConfigController``: MachineConfig -> KubeSpanConfig ``kubespan`` (config namespace):
  ``machine.network.kubespan`` with Talos's defaults, plus ``cluster.id``/``cluster.secret``;
* ``kubeaccess.ConfigController``: MachineConfig -> KubernetesAccessConfig ``config`` on control
  planes: ``machine.features.kubernetesTalosAPIAccess``;
* ``secrets.KubeletController``: MachineConfig -> KubeletSecrets ``kubelet``: the API server the
  kubelet bootstraps against (KubePrism, else the local API server on a control plane, else the
  cluster endpoint), ``cluster.ca`` then ``cluster.acceptedCAs``, the bootstrap token;
* ``cri.SeccompProfileController``: ``machine.seccompProfiles`` -> SeccompProfiles (id = name);
* ``cri.SeccompProfileFileController``: SeccompProfiles -> ``/var/lib/kubelet/seccomp/profiles/<name>``
  (each profile as JSON, as Talos writes it; files of removed profiles are deleted);
* ``runtime.DevicesStatusController``: DevicesStatus ``devices`` ready (Talos waits for udevd on a
  machine of its own; Ichor's nodes have their devices when machined starts);
* ``runtime.MaintenanceConfigController``: NodeAddresses ``current`` -> MaintenanceServiceConfig
  ``maintenance``: the maintenance API's listen address (Ichor's binds the node's address, port
  50000, where Talos without SideroLink binds ``:50000``) and the node's current addresses.

A config that lacks what a view needs (no cluster section, a bad CA) keeps the view away and says
why (``talosctl get waits``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config, machine_type_of
from ichor.machined.controllers.k8s.kubelet import kubelet_server
from ichor.machined.cosi import Controller, ControllerContext, Input, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import NODE_ADDRESS_CURRENT_ID, NODE_ADDRESSES
from ichor.machined.resources._feature_configs import (
    DEVICES_STATUS_ID,
    DEVICES_STATUSES,
    KUBELET_SECRETS,
    KUBELET_SECRETS_ID,
    KUBERNETES_ACCESS_CONFIG_ID,
    KUBERNETES_ACCESS_CONFIGS,
    KUBESPAN_CONFIG_ID,
    KUBESPAN_CONFIGS,
    MAINTENANCE_SERVICE_CONFIG_ID,
    MAINTENANCE_SERVICE_CONFIGS,
    SECCOMP_PROFILES,
    DevicesStatusSpec,
    KubeletSecretsSpec,
    KubernetesAccessConfigSpec,
    KubeSpanConfigSpec,
    MaintenanceServiceConfigSpec,
    SeccompProfileSpec,
)
from ichor.machined.resources._secrets import PEMCertificate
from ichor.machinery import constants, pki
from ichor.machinery.errors import MachineryError

__all__ = [
    "KUBESPAN_DEFAULT_MTU",
    "SECCOMP_PROFILES_DIR",
    "SeccompProfileFileController",
    "devices_status_controller",
    "feature_config_controllers",
    "kubeaccess_config_controller",
    "kubelet_secrets_controller",
    "kubespan_config_controller",
    "maintenance_config_controller",
    "seccomp_profile_controller",
]

KUBESPAN_DEFAULT_MTU = 1420
"""Talos's ``constants.KubeSpanLinkMTU``."""
SECCOMP_PROFILES_DIR = "/var/lib/kubelet/seccomp/profiles"


def kubespan_config_controller() -> TransformController[KubeSpanConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubeSpanConfigSpec]:
        config = active_config(ctx)
        if config.machine is None or config.cluster is None:
            return {}
        kubespan = config.machine.network.kubespan if config.machine.network is not None else None
        filters = kubespan.filters if kubespan is not None else None
        spec = KubeSpanConfigSpec(
            enabled=bool(kubespan is not None and kubespan.enabled),
            cluster_id=config.cluster.id or "",
            shared_secret=config.cluster.secret or "",
            force_routing=not (kubespan is not None and kubespan.allow_down_peer_bypass),
            advertise_kubernetes_networks=bool(
                kubespan is not None and kubespan.advertise_kubernetes_networks
            ),
            mtu=(kubespan.mtu if kubespan is not None else None) or KUBESPAN_DEFAULT_MTU,
            endpoint_filters=tuple(
                str(f) for f in ((filters.endpoints if filters is not None else None) or ())
            ),
            harvest_extra_endpoints=bool(kubespan is not None and kubespan.harvest_extra_endpoints),
        )
        return {KUBESPAN_CONFIG_ID: spec}

    return TransformController(
        "kubespan.ConfigController", inputs=[ACTIVE_CONFIG], output=KUBESPAN_CONFIGS, map_inputs=derive
    )


def kubeaccess_config_controller() -> TransformController[KubernetesAccessConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubernetesAccessConfigSpec]:
        config = active_config(ctx)
        if config.machine is None or not machine_type_of(config).is_control_plane:
            return {}
        features = config.machine.features
        access = features.kubernetes_talos_api_access if features is not None else None
        if access is None:
            return {KUBERNETES_ACCESS_CONFIG_ID: KubernetesAccessConfigSpec()}
        spec = KubernetesAccessConfigSpec(
            enabled=bool(access.enabled),
            allowed_api_roles=tuple(str(r) for r in access.allowed_roles or ()),
            allowed_kubernetes_namespaces=tuple(str(n) for n in access.allowed_kubernetes_namespaces or ()),
        )
        return {KUBERNETES_ACCESS_CONFIG_ID: spec}

    return TransformController(
        "kubeaccess.ConfigController", inputs=[ACTIVE_CONFIG], output=KUBERNETES_ACCESS_CONFIGS,
        map_inputs=derive,
    )  # fmt: skip


def kubelet_secrets_controller() -> TransformController[KubeletSecretsSpec]:
    def derive(ctx: ControllerContext) -> dict[str, KubeletSecretsSpec]:
        config = active_config(ctx)
        cluster = config.cluster
        if config.machine is None or cluster is None:
            return {}
        try:
            endpoint = kubelet_server(config)
            cas = (
                [pki.CertKey.from_b64(cluster.ca.crt, "", what="cluster.ca").crt]
                if cluster.ca and cluster.ca.crt
                else []
            )
            for index, accepted in enumerate(cluster.accepted_cas or []):
                if accepted.crt:
                    cas.append(
                        pki.CertKey.from_b64(accepted.crt, "", what=f"cluster.acceptedCAs[{index}]").crt
                    )
        except MachineryError as exc:
            raise WaitingFor("machine config", str(exc)) from None
        if not cas:
            raise WaitingFor(
                "machine config", "missing accepted Kubernetes CAs (cluster.ca, cluster.acceptedCAs)"
            )
        token_id, _, token_secret = (cluster.token or "").partition(".")
        spec = KubeletSecretsSpec(
            endpoint=endpoint, accepted_cas=tuple(PEMCertificate(crt) for crt in cas),
            bootstrap_token_id=token_id, bootstrap_token_secret=token_secret,
        )  # fmt: skip
        return {KUBELET_SECRETS_ID: spec}

    return TransformController(
        "secrets.KubeletController", inputs=[ACTIVE_CONFIG], output=KUBELET_SECRETS, map_inputs=derive
    )


def seccomp_profile_controller() -> TransformController[SeccompProfileSpec]:
    def derive(ctx: ControllerContext) -> dict[str, SeccompProfileSpec]:
        config = active_config(ctx)
        profiles = (config.machine.seccomp_profiles if config.machine is not None else None) or []
        return {
            str(p.name): SeccompProfileSpec(name=str(p.name), value=dict(p.value or {}))
            for p in profiles
            if p.name
        }

    return TransformController(
        "cri.SeccompProfileController", inputs=[ACTIVE_CONFIG], output=SECCOMP_PROFILES, map_inputs=derive
    )


class SeccompProfileFileController(Controller):
    name = "cri.SeccompProfileFileController"
    inputs = (Input(SECCOMP_PROFILES),)
    writes = f"({SECCOMP_PROFILES_DIR} in the node)"

    def __init__(self, layout: Layout) -> None:
        self._dir = layout.path(SECCOMP_PROFILES_DIR)

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed()
            profiles = {r.spec.name: r.spec.value for r in ctx.list(SECCOMP_PROFILES)}
            try:
                self._write(profiles)
            except OSError as exc:
                ctx.waiting("seccomp profiles", f"cannot write {SECCOMP_PROFILES_DIR}: {exc}")
                continue
            ctx.clear_waiting()

    def _write(self, profiles: Mapping[str, object]) -> None:
        if not profiles and not self._dir.exists():
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        for name, value in profiles.items():
            path = self._dir / Path(name).name
            content = json.dumps(value, separators=(",", ":")).encode()
            if not path.exists() or path.read_bytes() != content:
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_bytes(content)
                tmp.chmod(0o644)
                tmp.replace(path)
        for existing in self._dir.iterdir():
            if existing.name not in profiles and not existing.name.startswith("."):
                existing.unlink()


def devices_status_controller() -> TransformController[DevicesStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, DevicesStatusSpec]:
        return {DEVICES_STATUS_ID: DevicesStatusSpec(ready=True)}

    return TransformController(
        "runtime.DevicesStatusController", inputs=[], output=DEVICES_STATUSES, map_inputs=derive
    )


def maintenance_config_controller(layout: Layout) -> TransformController[MaintenanceServiceConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MaintenanceServiceConfigSpec]:
        current = ctx.get_or_none(NODE_ADDRESSES, NODE_ADDRESS_CURRENT_ID)
        reachable = tuple(str(a.ip) for a in current.spec.addresses) if current is not None else ()
        host = f"[{layout.address}]" if ":" in layout.address else layout.address
        spec = MaintenanceServiceConfigSpec(
            listen_address=f"{host}:{constants.APID_PORT}", reachable_addresses=reachable
        )
        return {MAINTENANCE_SERVICE_CONFIG_ID: spec}

    return TransformController(
        "runtime.MaintenanceConfigController", inputs=[Input(NODE_ADDRESSES, id=NODE_ADDRESS_CURRENT_ID)],
        output=MAINTENANCE_SERVICE_CONFIGS, map_inputs=derive,
    )  # fmt: skip


def feature_config_controllers(layout: Layout) -> list[Controller]:
    """This module's controllers, in registration order."""
    return [
        kubespan_config_controller(),
        kubeaccess_config_controller(),
        kubelet_secrets_controller(),
        seccomp_profile_controller(),
        SeccompProfileFileController(layout),
        devices_status_controller(),
        maintenance_config_controller(layout),
    ]
