"""Resources of namespace ``runtime`` about system extensions and extension service configs (Talos 1.7).

* ``ExtensionStatuses`` (``talosctl get extensions``): one per installed system extension, id
  ``0``, ``1``, ... in layer order, spec ``{image, metadata}``; columns NAME and VERSION;
* ``ExtensionServiceConfigs``: one per ``ExtensionServiceConfig`` document, id = its name, spec
  ``{files: [{content, mountPath}], environment}`` (sensitive: config files may hold secrets);
* ``ExtensionServiceConfigStatuses``: the ``ExtensionServiceConfig`` version whose files are on disk
  (a new version is what restarts ``ext-<name>``).
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._runtime import RUNTIME_NAMESPACE

__all__ = [
    "EXTENSION_SERVICE_CONFIGS",
    "EXTENSION_SERVICE_CONFIG_STATUSES",
    "EXTENSION_STATUSES",
    "EXTENSION_TYPES",
    "ExtensionCompatibility",
    "ExtensionConstraint",
    "ExtensionMetadataSpec",
    "ExtensionServiceConfigFileSpec",
    "ExtensionServiceConfigSpec",
    "ExtensionServiceConfigStatusSpec",
    "ExtensionStatusSpec",
]


@dataclasses.dataclass(frozen=True)
class ExtensionConstraint:
    version: str = ""


@dataclasses.dataclass(frozen=True)
class ExtensionCompatibility:
    talos: ExtensionConstraint = ExtensionConstraint()


@dataclasses.dataclass(frozen=True)
class ExtensionMetadataSpec:
    name: str = ""
    version: str = ""
    author: str = ""
    description: str = ""
    compatibility: ExtensionCompatibility = ExtensionCompatibility()


@dataclasses.dataclass(frozen=True)
class ExtensionStatusSpec:
    image: str = ""
    """The layer the extension came from (Talos: the squashfs image; Ichor: the extension's directory name)."""
    metadata: ExtensionMetadataSpec = ExtensionMetadataSpec()


@dataclasses.dataclass(frozen=True)
class ExtensionServiceConfigFileSpec:
    content: str
    mount_path: str


@dataclasses.dataclass(frozen=True)
class ExtensionServiceConfigSpec:
    files: tuple[ExtensionServiceConfigFileSpec, ...] = dataclasses.field(
        default=(), metadata={"omitempty": True}
    )
    environment: tuple[str, ...] = dataclasses.field(default=(), metadata={"omitempty": True})


@dataclasses.dataclass(frozen=True)
class ExtensionServiceConfigStatusSpec:
    spec_version: str


EXTENSION_STATUSES: ResourceType[ExtensionStatusSpec] = ResourceType(
    type="ExtensionStatuses.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=ExtensionStatusSpec,
    aliases=("extensions",),
    print_columns=(PrintColumn("Name", "{.metadata.name}"), PrintColumn("Version", "{.metadata.version}")),
)
EXTENSION_SERVICE_CONFIGS: ResourceType[ExtensionServiceConfigSpec] = ResourceType(
    type="ExtensionServiceConfigs.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=ExtensionServiceConfigSpec,
    sensitive=True,
)
EXTENSION_SERVICE_CONFIG_STATUSES: ResourceType[ExtensionServiceConfigStatusSpec] = ResourceType(
    type="ExtensionServiceConfigStatuses.runtime.talos.dev",
    default_namespace=RUNTIME_NAMESPACE,
    spec_class=ExtensionServiceConfigStatusSpec,
)
EXTENSION_TYPES = (EXTENSION_STATUSES, EXTENSION_SERVICE_CONFIGS, EXTENSION_SERVICE_CONFIG_STATUSES)
