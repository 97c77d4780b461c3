"""Resources of namespace ``runtime``: machine status, services, time sync, boot signals.

Talos keeps these in ``runtime`` although some carry the ``v1alpha1.talos.dev`` suffix
(``Services``, ``TimeStatuses``, ``AcquireConfigStatuses``); the type names are Talos's.
"""

from __future__ import annotations

import dataclasses
import enum

from ichor.machined.cosi import EmptySpec, PrintColumn, ResourceType
from ichor.machined.resources._proto import bool_field, message_field, repeated, string_field, varint_field

__all__ = [
    "ACQUIRE_CONFIG_STATUSES",
    "ACQUIRE_CONFIG_STATUS_ID",
    "MACHINE_RESET_SIGNALS",
    "MACHINE_RESET_SIGNAL_ID",
    "MACHINE_STATUSES",
    "MACHINE_STATUS_ID",
    "RUNTIME_NAMESPACE",
    "SERVICES",
    "TIME_STATUSES",
    "TIME_STATUS_ID",
    "MachineStage",
    "MachineStatusSpec",
    "MachineStatusStatus",
    "ServiceSpec",
    "TimeStatusSpec",
    "UnmetCondition",
]

RUNTIME_NAMESPACE = "runtime"
MACHINE_STATUS_ID = "machine"
MACHINE_RESET_SIGNAL_ID = "machine"
TIME_STATUS_ID = "node"
ACQUIRE_CONFIG_STATUS_ID = "machine-config"


class MachineStage(enum.StrEnum):
    """The machine's stage as ``talosctl get machinestatus`` prints it (declaration order = proto number)."""

    UNKNOWN = "unknown"
    BOOTING = "booting"
    INSTALLING = "installing"
    MAINTENANCE = "maintenance"
    RUNNING = "running"
    REBOOTING = "rebooting"
    SHUTTING_DOWN = "shutting down"
    RESETTING = "resetting"
    UPGRADING = "upgrading"

    @property
    def number(self) -> int:
        return list(MachineStage).index(self)


@dataclasses.dataclass(frozen=True)
class UnmetCondition:
    """Something that keeps the machine from being ready at its stage, and why."""

    name: str
    reason: str

    def proto_spec(self) -> bytes:
        return string_field(1, self.name) + string_field(2, self.reason)


@dataclasses.dataclass(frozen=True)
class MachineStatusStatus:
    ready: bool = False
    unmet_conditions: tuple[UnmetCondition, ...] = ()

    def proto_spec(self) -> bytes:
        return bool_field(1, self.ready) + repeated(2, (c.proto_spec() for c in self.unmet_conditions))


@dataclasses.dataclass(frozen=True)
class MachineStatusSpec:
    stage: MachineStage = MachineStage.UNKNOWN
    status: MachineStatusStatus = MachineStatusStatus()

    def proto_spec(self) -> bytes:
        return varint_field(1, self.stage.number) + message_field(2, self.status.proto_spec())


@dataclasses.dataclass(frozen=True)
class ServiceSpec:
    """A system service's state as published for ``talosctl get services``."""

    running: bool = False
    healthy: bool = False
    unknown: bool = False

    def proto_spec(self) -> bytes:
        return bool_field(1, self.running) + bool_field(2, self.healthy) + bool_field(3, self.unknown)


@dataclasses.dataclass(frozen=True)
class TimeStatusSpec:
    synced: bool = False
    epoch: int = 0
    """Incremented every time the clock jumps by more than 15 minutes."""
    sync_disabled: bool = False

    def proto_spec(self) -> bytes:
        return bool_field(1, self.synced) + varint_field(2, self.epoch) + bool_field(3, self.sync_disabled)


MACHINE_STATUSES: ResourceType[MachineStatusSpec] = ResourceType(
    type="MachineStatuses.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=MachineStatusSpec,
    print_columns=(PrintColumn("Stage", "{.stage}"), PrintColumn("Ready", "{.status.ready}")),
)

MACHINE_RESET_SIGNALS: ResourceType[EmptySpec] = ResourceType(
    type="MachineResetSignals.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=EmptySpec,
)

SERVICES: ResourceType[ServiceSpec] = ResourceType(
    type="Services.v1alpha1.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=ServiceSpec,
    aliases=("svc",),
    print_columns=(
        PrintColumn("Running", "{.running}"),
        PrintColumn("Healthy", "{.healthy}"),
        PrintColumn("Health Unknown", "{.unknown}"),
    ),
)

TIME_STATUSES: ResourceType[TimeStatusSpec] = ResourceType(
    type="TimeStatuses.v1alpha1.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=TimeStatusSpec,
    print_columns=(PrintColumn("Synced", "{.synced}"),),
)

ACQUIRE_CONFIG_STATUSES: ResourceType[EmptySpec] = ResourceType(
    type="AcquireConfigStatuses.v1alpha1.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=EmptySpec,
)
