"""Resources of namespace ``config``: the machine configuration and the machine type."""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import TYPE_CHECKING

from ichor.api.gen.resource.definitions.config import config_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2
from ichor.machined.cosi import PrintColumn, ResourceType

if TYPE_CHECKING:
    from ichor.machinery.config import Config, Container

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
    in ``talosctl get mc -o yaml`` are the ones the user applied. The parsed documents ride along
    (:attr:`container`, loaded once by the config store, off the event loop) so controllers read
    the typed models (:attr:`v1alpha1`) instead of parsing or walking YAML.
    """

    text: str
    container: Container | None = dataclasses.field(
        default=None, compare=False, repr=False, metadata={"hidden": True}
    )

    @functools.cached_property
    def parsed(self) -> Container:
        """The documents; parsed here only when the writer did not hand them in (tests)."""
        if self.container is not None:
            return self.container
        from ichor.machinery.config import load_config

        return load_config(self.text, source="MachineConfig")

    @property
    def v1alpha1(self) -> Config | None:
        """The typed ``v1alpha1`` document (machine/cluster), None when the config has none."""
        doc = self.parsed.v1alpha1
        if doc is None:
            return None
        from ichor.machinery.config import Config

        model = doc.model
        assert isinstance(model, Config)
        return model

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

    @property
    def is_control_plane(self) -> bool:
        """``init`` and ``controlplane`` (Talos's ``machine.Type.IsControlPlane``)."""
        return self in (MachineTypeSpec.INIT, MachineTypeSpec.CONTROLPLANE)

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
