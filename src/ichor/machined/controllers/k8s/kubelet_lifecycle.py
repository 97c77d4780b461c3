"""Area ``k8s``: ``k8s.KubeletLifecycleController``, Services ``kubelet`` -> KubeletLifecycle ``kubelet``.

Talos creates the KubeletLifecycle when it starts the kubelet service and tears it down before it
stops the kubelet (what holds a finalizer on it, the VIP operator, lets go first). Here it follows
the supervisor's ``kubelet`` service: present while the service exists, gone when it is removed.
"""

from __future__ import annotations

from ichor.machined.cosi import ControllerContext, EmptySpec, Input, TransformController
from ichor.machined.resources import SERVICES
from ichor.machined.resources._k8s_status import KUBELET_LIFECYCLE_ID, KUBELET_LIFECYCLES

__all__ = ["kubelet_lifecycle_controller"]


def kubelet_lifecycle_controller() -> TransformController[EmptySpec]:
    def derive(ctx: ControllerContext) -> dict[str, EmptySpec]:
        if ctx.get_or_none(SERVICES, "kubelet") is None:
            return {}
        return {KUBELET_LIFECYCLE_ID: EmptySpec()}

    return TransformController(
        "k8s.KubeletLifecycleController", inputs=[Input(SERVICES, id="kubelet")], output=KUBELET_LIFECYCLES,
        map_inputs=derive,
    )  # fmt: skip
