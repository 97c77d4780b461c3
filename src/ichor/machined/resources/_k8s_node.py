"""What Talos 1.7 applies to the node's Kubernetes ``Node`` object, in namespace ``k8s``.

* ``NodeLabelSpecs`` (id = the label key): a label and its value (``machine.nodeLabels``, plus
  ``node-role.kubernetes.io/control-plane`` on control planes);
* ``NodeTaintSpecs`` (id = the taint key): a taint's value and effect (``machine.nodeTaints``, plus
  ``node-role.kubernetes.io/control-plane:NoSchedule`` on control planes that do not allow
  scheduling).

Both are sensitive as in Talos (``os:admin`` only). Types only; :mod:`ichor.machined.controllers.k8s.nodes`
creates them and applies them to the ``Node``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "K8S_NODE_TYPES",
    "NODE_LABEL_SPECS",
    "NODE_TAINT_SPECS",
    "NodeLabelSpecSpec",
    "NodeTaintSpecSpec",
]


@dataclasses.dataclass(frozen=True)
class NodeLabelSpecSpec:
    key: str = ""
    value: str = ""


@dataclasses.dataclass(frozen=True)
class NodeTaintSpecSpec:
    key: str = ""
    effect: str = ""
    value: str = ""


NODE_LABEL_SPECS: ResourceType[NodeLabelSpecSpec] = ResourceType(
    type="NodeLabelSpecs.k8s.talos.dev", default_namespace="k8s", spec_class=NodeLabelSpecSpec,
    print_columns=(PrintColumn("Value", "{.value}"),), sensitive=True,
)  # fmt: skip
NODE_TAINT_SPECS: ResourceType[NodeTaintSpecSpec] = ResourceType(
    type="NodeTaintSpecs.k8s.talos.dev", default_namespace="k8s", spec_class=NodeTaintSpecSpec,
    print_columns=(PrintColumn("Effect", "{.effect}"), PrintColumn("Value", "{.value}")),
    sensitive=True,
)  # fmt: skip

K8S_NODE_TYPES: tuple[ResourceType[Any], ...] = (NODE_LABEL_SPECS, NODE_TAINT_SPECS)
