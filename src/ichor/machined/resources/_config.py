"""Resources of namespace ``config``: the machine configuration and the machine type."""

from __future__ import annotations

import dataclasses
import enum

from ichor.api.gen.resource.definitions.config import config_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2
from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "ACTIVE_CONFIG_ID",
    "CONFIG_NAMESPACE",
    "MACHINE_CONFIGS",
    "MACHINE_TYPES",
    "MACHINE_TYPE_ID",
    "MAINTENANCE_CONFIG_ID",
    "MachineConfigSpec",
    "MachineTypeSpec",
]

CONFIG_NAMESPACE = "config"

ACTIVE_CONFIG_ID = "v1alpha1"
"""The config the node runs with."""
MAINTENANCE_CONFIG_ID = "maintenance"
"""The partial config (e.g. SideroLink, event sinks) available while in maintenance mode."""
MACHINE_TYPE_ID = "machine-type"


@dataclasses.dataclass(frozen=True)
class MachineConfigSpec:
    """The machine configuration as the node holds it: the YAML documents, byte for byte.

    Talos shows the config text itself as the spec (not a re-encoding), so comments and key order
    in ``talosctl get mc -o yaml`` are the ones the user applied.
    """

    text: str

    def raw_yaml(self) -> str:
        return self.text if self.text.endswith("\n") else self.text + "\n"

    def proto_spec(self) -> bytes:
        return bytes(config_pb2.MachineConfigSpec(yaml_marshalled=self.text.encode()).SerializeToString())


class MachineTypeSpec(enum.StrEnum):
    """``machine.type``; the spec of ``MachineTypes`` is this one word."""

    UNKNOWN = "unknown"
    INIT = "init"
    CONTROLPLANE = "controlplane"
    WORKER = "worker"

    def raw_yaml(self) -> str:
        return f"{self.value}\n"

    def proto_spec(self) -> bytes:
        return bytes(config_pb2.MachineTypeSpec(machine_type=_MACHINE_TYPE_NUMBERS[self]).SerializeToString())


_MACHINE_TYPE_NUMBERS = {
    MachineTypeSpec.UNKNOWN: enums_pb2.TYPE_UNKNOWN,
    MachineTypeSpec.INIT: enums_pb2.TYPE_INIT,
    MachineTypeSpec.CONTROLPLANE: enums_pb2.TYPE_CONTROL_PLANE,
    MachineTypeSpec.WORKER: enums_pb2.TYPE_WORKER,
}

MACHINE_CONFIGS: ResourceType[MachineConfigSpec] = ResourceType(
    type="MachineConfigs.config.talos.dev",
    default_namespace=CONFIG_NAMESPACE,
    spec_class=MachineConfigSpec,
    sensitive=True,
)

MACHINE_TYPES: ResourceType[MachineTypeSpec] = ResourceType(
    type="MachineTypes.config.talos.dev",
    default_namespace=CONFIG_NAMESPACE,
    spec_class=MachineTypeSpec,
    print_columns=(PrintColumn("Type", "{@}"),),
)
