"""Resources of namespace ``cri``: ``machine.registries`` as the node uses it (Talos 1.7's
``RegistriesConfigs.cri.talos.dev``, id ``registries``, ``talosctl get registriesconfigs``).

The spec keeps the config's own keys (``mirrors``, ``config``) as plain YAML values;
``files.CRIRegistryConfigController`` renders them into ``/etc/cri/conf.d``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import ResourceType

__all__ = ["CRI_NAMESPACE", "REGISTRIES_CONFIGS", "REGISTRIES_CONFIG_ID", "RegistriesConfigSpec"]

CRI_NAMESPACE = "cri"
REGISTRIES_CONFIG_ID = "registries"


@dataclasses.dataclass(frozen=True)
class RegistriesConfigSpec:
    mirrors: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)


REGISTRIES_CONFIGS: ResourceType[RegistriesConfigSpec] = ResourceType(
    type="RegistriesConfigs.cri.talos.dev", default_namespace=CRI_NAMESPACE, spec_class=RegistriesConfigSpec,
    sensitive=True,
)  # fmt: skip
