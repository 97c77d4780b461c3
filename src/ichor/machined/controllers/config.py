"""Area ``config``: the typed machine config every controller reads, and ``MachineType``.

* ``config.MachineTypeController``: MachineConfig -> MachineType;
* ``config.AcquireController``: MachineConfig -> AcquireConfigStatus ``machine-config`` (the node
  has acquired a config); MachineStatus -> MaintenanceServiceRequest ``maintenance`` while the
  machine waits in maintenance mode.

:func:`active_config` is how a controller reads the machine config: the typed ``v1alpha1`` model
carried by the ``MachineConfigs/v1alpha1`` resource (parsed once, by the config store), never YAML
re-parsed or dicts walked.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    EmptySpec,
    Input,
    Output,
    SkipReconcile,
    TransformController,
)
from ichor.machined.resources import (
    ACQUIRE_CONFIG_STATUS_ID,
    ACQUIRE_CONFIG_STATUSES,
    ACTIVE_CONFIG_ID,
    MACHINE_CONFIGS,
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    MachineStage,
    MachineTypeSpec,
)
from ichor.machined.resources._feature_configs import (
    MAINTENANCE_SERVICE_REQUEST_ID,
    MAINTENANCE_SERVICE_REQUESTS,
)
from ichor.machinery.config import Config

__all__ = [
    "ACTIVE_CONFIG",
    "AcquireController",
    "active_config",
    "control_plane_host",
    "machine_type_controller",
    "machine_type_of",
]

ACTIVE_CONFIG = Input(MACHINE_CONFIGS, id=ACTIVE_CONFIG_ID)
"""The input of every controller that reads the machine config."""


def active_config(ctx: ControllerContext) -> Config:
    """The active machine config's typed v1alpha1 document; skips the pass while there is none."""
    resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
    config = resource.spec.v1alpha1 if resource is not None else None
    if config is None:
        raise SkipReconcile
    return config


def control_plane_host(config: Config) -> str | None:
    """The host of ``cluster.controlPlane.endpoint``, if it has one."""
    plane = config.cluster.control_plane if config.cluster is not None else None
    return urlsplit(plane.endpoint or "").hostname if plane is not None else None


def machine_type_of(config: Config) -> MachineTypeSpec:
    """``machine.type`` as Talos reports it: ``init`` (a control plane that bootstraps etcd; the
    Disaster Recovery guide looks for it, 001:542-550), ``controlplane``, else ``worker``. Ask
    ``.is_control_plane`` for what both control plane kinds run."""
    kind = config.machine.type if config.machine is not None else None
    if kind == "init":
        return MachineTypeSpec.INIT
    return MachineTypeSpec.CONTROLPLANE if kind == "controlplane" else MachineTypeSpec.WORKER


def machine_type_controller() -> TransformController[MachineTypeSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MachineTypeSpec]:
        return {MACHINE_TYPE_ID: machine_type_of(active_config(ctx))}

    return TransformController(
        "config.MachineTypeController", inputs=[ACTIVE_CONFIG], output=MACHINE_TYPES, map_inputs=derive
    )


class AcquireController(Controller):
    """AcquireConfigStatus once a config is active; MaintenanceServiceRequest ``maintenance`` while
    the machine waits in maintenance mode for one (Talos's acquire controller requests the
    maintenance service then, and tears the request down once a config came)."""

    name = "config.AcquireController"
    inputs = (ACTIVE_CONFIG, Input(MACHINE_STATUSES, id=MACHINE_STATUS_ID))
    outputs = (Output(ACQUIRE_CONFIG_STATUSES), Output(MAINTENANCE_SERVICE_REQUESTS))

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed()
            config = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
            if config is not None and config.spec.v1alpha1 is not None:
                ctx.modify(ACQUIRE_CONFIG_STATUSES, ACQUIRE_CONFIG_STATUS_ID, EmptySpec())
            status = ctx.get_or_none(MACHINE_STATUSES, MACHINE_STATUS_ID)
            if status is not None and status.spec.stage is MachineStage.MAINTENANCE:
                ctx.modify(MAINTENANCE_SERVICE_REQUESTS, MAINTENANCE_SERVICE_REQUEST_ID, EmptySpec())
            else:
                ctx.clean_up_outputs(MAINTENANCE_SERVICE_REQUESTS, set())


def acquire_status_controller() -> AcquireController:
    return AcquireController()
