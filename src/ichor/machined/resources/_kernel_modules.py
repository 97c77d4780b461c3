"""Kernel modules to load (``machine.kernel.modules``): Talos's ``KernelModuleSpecs`` (namespace
``runtime``, alias ``modules``, no print columns), one per module, id = the module's name.

The spec's YAML keys are Talos 1.7's own: the name is under ``string`` (Talos's yaml tag for
``Name``), the parameters under ``parameters``.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import ResourceType

__all__ = ["KERNEL_MODULE_SPECS", "KERNEL_MODULE_TYPES", "KernelModuleSpecSpec"]


@dataclasses.dataclass(frozen=True)
class KernelModuleSpecSpec:
    """A module to load and the parameters to load it with (``greeting=x``)."""

    name: str = dataclasses.field(default="", metadata={"yaml": "string"})
    parameters: tuple[str, ...] = ()


KERNEL_MODULE_SPECS: ResourceType[KernelModuleSpecSpec] = ResourceType(
    type="KernelModuleSpecs.runtime.talos.dev",
    default_namespace="runtime",
    spec_class=KernelModuleSpecSpec,
    aliases=("modules",),
)

KERNEL_MODULE_TYPES = (KERNEL_MODULE_SPECS,)
