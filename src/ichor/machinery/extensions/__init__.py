"""Talos system extensions and extension services, read and checked offline.

* :mod:`._manifest`: a system extension directory (``manifest.yaml`` + ``rootfs/``) -> :class:`SystemExtension`;
* :mod:`._service`: ``/usr/local/etc/containers/*.yaml`` -> :class:`ServiceSpec` (Talos's rules and texts);
* :mod:`._oci`: (spec, ExtensionServiceConfig) -> the OCI ``config.json`` Talos runs ``ext-<name>`` with.

Errors are :class:`~ichor.machinery.errors.ExtensionError` and
:class:`~ichor.machinery.errors.ExtensionServiceError`. Nothing here mounts or starts anything.
"""

from __future__ import annotations

from ._manifest import ALLOWED_PATHS, ExtensionMetadata, SystemExtension, load_extension, version_satisfies
from ._oci import (
    CONFIG_FILES_DIR,
    DEFAULT_MASKED_PATHS,
    DEFAULT_READONLY_PATHS,
    ENVIRONMENT_FILE_LIMIT,
    EXTENSIONS_CGROUP,
    GRANTABLE_CAPABILITIES,
    OCI_VERSION,
    ServiceConfig,
    capabilities_in,
    config_file_source,
    environment_from_file,
    fit_to_node,
    runtime_spec,
)
from ._service import (
    CONTAINERS_ROOTFS_DIR,
    SERVICE_SPECS_DIR,
    SPEC_LIMITS,
    Dependency,
    Mount,
    NetworkCheck,
    RestartKind,
    Security,
    ServiceContainer,
    ServiceSpec,
    SpecRefusal,
    load_service_specs,
    parse_service_spec,
)

__all__ = [
    "ALLOWED_PATHS",
    "CONFIG_FILES_DIR",
    "CONTAINERS_ROOTFS_DIR",
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_READONLY_PATHS",
    "ENVIRONMENT_FILE_LIMIT",
    "EXTENSIONS_CGROUP",
    "GRANTABLE_CAPABILITIES",
    "OCI_VERSION",
    "SERVICE_SPECS_DIR",
    "SPEC_LIMITS",
    "Dependency",
    "ExtensionMetadata",
    "Mount",
    "NetworkCheck",
    "RestartKind",
    "Security",
    "ServiceConfig",
    "ServiceContainer",
    "ServiceSpec",
    "SpecRefusal",
    "SystemExtension",
    "capabilities_in",
    "config_file_source",
    "environment_from_file",
    "fit_to_node",
    "load_extension",
    "load_service_specs",
    "parse_service_spec",
    "runtime_spec",
    "version_satisfies",
]
