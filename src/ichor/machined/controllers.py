"""The node's controllers: each turns the machine config into the resources derived from it.

``MachineTypeController`` (MachineConfig -> MachineType) and ``HostnameController`` (MachineConfig
-> HostnameStatus) are transform controllers: a config change re-derives their outputs, and an
output the pass no longer produces is torn down.
"""

from __future__ import annotations

from typing import Any

from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    HostnameStatusSpec,
    MachineTypeSpec,
)
from ichor.machinery.yamlio import load_documents, to_plain

ACTIVE = "v1alpha1"


def _v1alpha1(ctx: ControllerContext) -> dict[str, Any]:
    resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE)
    if resource is None:
        raise SkipReconcile
    for doc in load_documents(resource.spec.text, source="MachineConfig"):
        if isinstance(doc, dict) and "kind" not in doc:
            return dict(to_plain(doc))
    raise SkipReconcile


def machine_type_of(v1alpha1: dict[str, Any]) -> MachineTypeSpec:
    """``init`` is a control plane that bootstraps; anything else that is not one is a worker."""
    kind = str((v1alpha1.get("machine") or {}).get("type", "worker"))
    return MachineTypeSpec("controlplane" if kind in ("init", "controlplane") else "worker")


def hostname_of(v1alpha1: dict[str, Any], address: str) -> str:
    """``machine.network.hostname``, else Talos's address-derived default."""
    network = (v1alpha1.get("machine") or {}).get("network") or {}
    return str(network.get("hostname") or default_hostname(address))


def machine_type_controller() -> TransformController[MachineTypeSpec]:
    def derive(ctx: ControllerContext) -> dict[str, MachineTypeSpec]:
        return {"machine-type": machine_type_of(_v1alpha1(ctx))}

    return TransformController(
        "config.MachineTypeController",
        inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)],
        output=MACHINE_TYPES,
        map_inputs=derive,
    )


def default_hostname(address: str) -> str:
    """Talos's address-derived default (``talos-<ip with dashes>``), used when the config names none."""
    return "talos-" + address.replace(".", "-").replace(":", "-")


def hostname_controller(layout: Layout) -> TransformController[HostnameStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, HostnameStatusSpec]:
        host, _, domain = hostname_of(_v1alpha1(ctx), layout.address).partition(".")
        return {"hostname": HostnameStatusSpec(host, domain)}

    return TransformController(
        "network.HostnameController", inputs=[Input(MACHINE_CONFIGS, id=ACTIVE)], output=HOSTNAME_STATUSES,
        map_inputs=derive,
    )  # fmt: skip
