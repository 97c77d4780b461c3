"""Area ``k8s``: ``k8s.KubeletLifecycleController``, Services ``kubelet`` -> KubeletLifecycle ``kubelet``.

Talos creates the KubeletLifecycle when it starts the kubelet service and tears it down before it
stops the kubelet (what holds a finalizer on it, the VIP operator, lets go first). Here it follows
the supervisor's ``kubelet`` service: created once the service runs, kept while the service exists
(a kubelet restarting keeps it, as on Talos), gone when the service is removed. A node whose
kubelet never ran (a process node's is skipped) has none.
"""

from __future__ import annotations

from ichor.machined.cosi import ControllerContext, EmptySpec, Input, TransformController
from ichor.machined.resources import SERVICES
from ichor.machined.resources._k8s_status import KUBELET_LIFECYCLE_ID, KUBELET_LIFECYCLES

__all__ = ["kubelet_lifecycle_controller"]


def kubelet_lifecycle_controller() -> TransformController[EmptySpec]:
    def derive(ctx: ControllerContext) -> dict[str, EmptySpec]:
        service = ctx.get_or_none(SERVICES, "kubelet")
        if service is None:
            return {}
        started = (
            service.spec.running or ctx.get_or_none(KUBELET_LIFECYCLES, KUBELET_LIFECYCLE_ID) is not None
        )
        return {KUBELET_LIFECYCLE_ID: EmptySpec()} if started else {}

    return TransformController(
        "k8s.KubeletLifecycleController", inputs=[Input(SERVICES, id="kubelet")], output=KUBELET_LIFECYCLES,
        map_inputs=derive,
    )  # fmt: skip
