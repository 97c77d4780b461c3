"""The node as Kubernetes sees it, and the two markers Talos 1.7 keeps around the kubelet.

* ``NodeStatuses`` (namespace ``k8s``, id = the node name): the ``Node`` object's readiness,
  ``spec.unschedulable``, labels and annotations, read from the Kubernetes API;
* ``NodeCordonedSpecs`` (id ``cordoned``, sensitive as in Talos): present while the machine is
  shutting down, upgrading or resetting; the node apply controller then cordons the ``Node``
  (``spec.unschedulable`` and the annotation ``talos.dev/cordoned: "true"``);
* ``KubeletLifecycles`` (id ``kubelet``): present while the kubelet service exists (Talos creates
  it when it starts the kubelet and tears it down before stopping it).

The last two carry no spec (Talos's are empty structs). Types only; ``controllers.k8s.node_status``
and ``controllers.k8s.kubelet_lifecycle`` fill them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ichor.machined.cosi import EmptySpec, PrintColumn, ResourceType

__all__ = [
    "K8S_STATUS_TYPES",
    "KUBELET_LIFECYCLES",
    "KUBELET_LIFECYCLE_ID",
    "NODE_CORDONED_ID",
    "NODE_CORDONED_SPECS",
    "NODE_STATUSES",
    "NodeStatusSpec",
]

KUBELET_LIFECYCLE_ID = "kubelet"
NODE_CORDONED_ID = "cordoned"


@dataclasses.dataclass(frozen=True)
class NodeStatusSpec:
    nodename: str = ""
    node_ready: bool = False
    unschedulable: bool = False
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)


NODE_STATUSES: ResourceType[NodeStatusSpec] = ResourceType(
    type="NodeStatuses.kubernetes.talos.dev", default_namespace="k8s", spec_class=NodeStatusSpec,
    print_columns=(PrintColumn("Ready", "{.nodeReady}"), PrintColumn("Unschedulable", "{.unschedulable}")),
)  # fmt: skip
NODE_CORDONED_SPECS: ResourceType[EmptySpec] = ResourceType(
    type="NodeCordonedSpecs.k8s.talos.dev", default_namespace="k8s", spec_class=EmptySpec, sensitive=True
)
KUBELET_LIFECYCLES: ResourceType[EmptySpec] = ResourceType(
    type="KubeletLifecycles.kubernetes.talos.dev", default_namespace="k8s", spec_class=EmptySpec
)

K8S_STATUS_TYPES: tuple[ResourceType[Any], ...] = (NODE_STATUSES, NODE_CORDONED_SPECS, KUBELET_LIFECYCLES)
