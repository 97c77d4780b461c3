"""Resources of namespace ``runtime``: machine status, services, time sync, boot signals.

Talos keeps these in ``runtime`` although some carry the ``v1alpha1.talos.dev`` suffix
(``Services``, ``TimeStatuses``, ``AcquireConfigStatuses``); the type names are Talos's.
"""

from __future__ import annotations

import dataclasses
import enum

from ichor.api.gen.resource.definitions.enums import enums_pb2
from ichor.api.gen.resource.definitions.runtime import runtime_pb2
from ichor.api.gen.resource.definitions.time import time_pb2
from ichor.api.gen.resource.definitions.v1alpha1 import v1alpha1_pb2
from ichor.machined.cosi import EmptySpec, PrintColumn, ResourceType

__all__ = [
    "ACQUIRE_CONFIG_STATUSES",
    "ACQUIRE_CONFIG_STATUS_ID",
    "MACHINE_RESET_SIGNALS",
    "MACHINE_RESET_SIGNAL_ID",
    "MACHINE_STATUSES",
    "MACHINE_STATUS_ID",
    "PLATFORM_METADATAS",
    "PLATFORM_METADATA_ID",
    "RUNTIME_NAMESPACE",
    "SECURITY_STATES",
    "SECURITY_STATE_ID",
    "SERVICES",
    "TIME_STATUSES",
    "TIME_STATUS_ID",
    "MachineStage",
    "MachineStatusSpec",
    "MachineStatusStatus",
    "PlatformMetadataSpec",
    "SecurityStateSpec",
    "ServiceSpec",
    "TimeStatusSpec",
    "UnmetCondition",
]

RUNTIME_NAMESPACE = "runtime"
MACHINE_STATUS_ID = "machine"
MACHINE_RESET_SIGNAL_ID = "machine"
TIME_STATUS_ID = "node"
ACQUIRE_CONFIG_STATUS_ID = "machine-config"
SECURITY_STATE_ID = "securitystate"
PLATFORM_METADATA_ID = "platformmetadata"


class MachineStage(enum.StrEnum):
    """The machine's stage as ``talosctl get machinestatus`` prints it (``MACHINE_STAGE_<NAME>`` in protobuf)."""

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
    def proto_name(self) -> str:
        """The stage's name in Talos's ``enums.RuntimeMachineStage``."""
        return f"MACHINE_STAGE_{self.name}"

    @property
    def number(self) -> int:
        return int(enums_pb2.RuntimeMachineStage.Value(self.proto_name))


@dataclasses.dataclass(frozen=True)
class UnmetCondition:
    """Something that keeps the machine from being ready at its stage, and why."""

    name: str
    reason: str

    def to_proto(self) -> runtime_pb2.UnmetCondition:
        return runtime_pb2.UnmetCondition(name=self.name, reason=self.reason)


@dataclasses.dataclass(frozen=True)
class MachineStatusStatus:
    ready: bool = False
    unmet_conditions: tuple[UnmetCondition, ...] = ()

    def to_proto(self) -> runtime_pb2.MachineStatusStatus:
        return runtime_pb2.MachineStatusStatus(
            ready=self.ready, unmet_conditions=[c.to_proto() for c in self.unmet_conditions]
        )


@dataclasses.dataclass(frozen=True)
class MachineStatusSpec:
    stage: MachineStage = MachineStage.UNKNOWN
    status: MachineStatusStatus = MachineStatusStatus()

    def proto_spec(self) -> bytes:
        message = runtime_pb2.MachineStatusSpec(stage=self.stage.proto_name)
        message.status.CopyFrom(self.status.to_proto())
        message.status.SetInParent()  # Go encodes the (non-nil) status even when it is all zeros
        return bytes(message.SerializeToString())


@dataclasses.dataclass(frozen=True)
class ServiceSpec:
    """A system service's state as published for ``talosctl get services``."""

    running: bool = False
    healthy: bool = False
    unknown: bool = False

    def proto_spec(self) -> bytes:
        message = v1alpha1_pb2.ServiceSpec(running=self.running, healthy=self.healthy, unknown=self.unknown)
        return bytes(message.SerializeToString())


@dataclasses.dataclass(frozen=True)
class TimeStatusSpec:
    synced: bool = False
    epoch: int = 0
    """Incremented every time the clock jumps by more than 15 minutes."""
    sync_disabled: bool = False

    def proto_spec(self) -> bytes:
        message = time_pb2.StatusSpec(synced=self.synced, epoch=self.epoch, sync_disabled=self.sync_disabled)
        return bytes(message.SerializeToString())


MACHINE_STATUSES: ResourceType[MachineStatusSpec] = ResourceType(
    type="MachineStatuses.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=MachineStatusSpec,
    print_columns=(PrintColumn("Stage", "{.stage}"), PrintColumn("Ready", "{.status.ready}")),
    # ManifestStatuses shares the initials: `get ms` stays the machine status, as on Talos.
    aliases=("ms",),
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


_OMIT = {"omitempty": True}


@dataclasses.dataclass(frozen=True)
class SecurityStateSpec:
    """Secure Boot state and the UKI/PCR signing keys' fingerprints (Talos's ``SecurityState``).

    Talos's client reads it before reboot, reset, hostname and etcd flows; in container mode Talos
    reports no Secure Boot and no keys, as a node sharing the host's kernel has neither."""

    secure_boot: bool = False
    uki_signing_key_fingerprint: str = dataclasses.field(default="", metadata=_OMIT)
    pcr_signing_key_fingerprint: str = dataclasses.field(default="", metadata=_OMIT)


@dataclasses.dataclass(frozen=True)
class PlatformMetadataSpec:
    """What the platform says about the machine (``talosctl get platformmetadata``, the dashboard)."""

    platform: str = dataclasses.field(default="", metadata=_OMIT)
    hostname: str = dataclasses.field(default="", metadata=_OMIT)
    region: str = dataclasses.field(default="", metadata=_OMIT)
    zone: str = dataclasses.field(default="", metadata=_OMIT)
    instance_type: str = dataclasses.field(default="", metadata=_OMIT)
    instance_id: str = dataclasses.field(default="", metadata={"yaml": "instanceId", "omitempty": True})
    provider_id: str = dataclasses.field(default="", metadata={"yaml": "providerId", "omitempty": True})
    spot: bool = dataclasses.field(default=False, metadata=_OMIT)


SECURITY_STATES: ResourceType[SecurityStateSpec] = ResourceType(
    type="SecurityStates.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=SecurityStateSpec,
    print_columns=(
        PrintColumn("SecureBoot", "{.secureBoot}"),
        PrintColumn("UKISigningKeyFingerprint", "{.ukiSigningKeyFingerprint}"),
        PrintColumn("PCRSigningKeyFingerprint", "{.pcrSigningKeyFingerprint}"),
    ),
)

PLATFORM_METADATAS: ResourceType[PlatformMetadataSpec] = ResourceType(
    type="PlatformMetadatas.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=PlatformMetadataSpec,
    print_columns=(
        PrintColumn("Platform", "{.platform}"),
        PrintColumn("Type", "{.instanceType}"),
        PrintColumn("Region", "{.region}"),
        PrintColumn("Zone", "{.zone}"),
    ),
)
