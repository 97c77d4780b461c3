"""Kernel parameters (``machine.sysctls``, ``machine.sysfs``): Talos's ``KernelParamSpecs``,
``KernelParamDefaultSpecs`` and ``KernelParamStatuses`` (namespace ``runtime``).

Ids are Talos's: the key with its tree's prefix, ``proc.sys.net.ipv4.ip_forward`` for a sysctl and
``sys.<key>`` for a sysfs entry. The status adds one Ichor-only field, ``reason``, saying why a key
was not applied (a node sharing the host's kernel never changes it); Talos's message has no field
for it, so the official client sees Talos's three.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "KERNEL_PARAM_DEFAULT_SPECS",
    "KERNEL_PARAM_SPECS",
    "KERNEL_PARAM_STATUSES",
    "KERNEL_PARAM_TYPES",
    "KernelParamSpecSpec",
    "KernelParamStatusSpec",
]

_RUNTIME = "runtime"


@dataclasses.dataclass(frozen=True)
class KernelParamSpecSpec:
    """A value to write (the spec of both ``KernelParamSpecs`` and ``KernelParamDefaultSpecs``)."""

    value: str = ""
    ignore_errors: bool = False


@dataclasses.dataclass(frozen=True)
class KernelParamStatusSpec:
    """What the kernel has for a key, what it had before the node changed it, and whether it could."""

    current: str = ""
    default: str = ""
    unsupported: bool = False
    reason: str = dataclasses.field(default="", metadata={"omitempty": True})
    """Ichor's: why the key was not applied (refused on a shared kernel, or the kernel's error)."""


KERNEL_PARAM_SPECS: ResourceType[KernelParamSpecSpec] = ResourceType(
    type="KernelParamSpecs.runtime.talos.dev",
    default_namespace=_RUNTIME,
    spec_class=KernelParamSpecSpec,
)

KERNEL_PARAM_DEFAULT_SPECS: ResourceType[KernelParamSpecSpec] = ResourceType(
    type="KernelParamDefaultSpecs.runtime.talos.dev",
    default_namespace=_RUNTIME,
    spec_class=KernelParamSpecSpec,
)

KERNEL_PARAM_STATUSES: ResourceType[KernelParamStatusSpec] = ResourceType(
    type="KernelParamStatuses.runtime.talos.dev",
    default_namespace=_RUNTIME,
    spec_class=KernelParamStatusSpec,
    aliases=("sysctls", "kernelparameters", "kernelparams"),
    print_columns=(
        PrintColumn("Current", "{.current}"),
        PrintColumn("Default", "{.default}"),
        PrintColumn("Unsupported", "{.unsupported}"),
    ),
)

KERNEL_PARAM_TYPES = (KERNEL_PARAM_SPECS, KERNEL_PARAM_DEFAULT_SPECS, KERNEL_PARAM_STATUSES)
