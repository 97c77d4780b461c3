"""Area ``k8s``: ``k8s.NodeCordonedSpecController``, MachineStatus -> NodeCordonedSpec ``cordoned``.

As Talos 1.7: the spec exists while the machine is shutting down, upgrading or resetting, and is
removed when it boots or runs again; in any other stage (rebooting, installing, ...) it is left as
it is. The node apply controller cordons the ``Node`` while it exists (and uncordons a node it
cordoned once it is gone).
"""

from __future__ import annotations

from ichor.machined.cosi import ControllerContext, EmptySpec, Input, SkipReconcile, TransformController
from ichor.machined.resources import MACHINE_STATUS_ID, MACHINE_STATUSES, MachineStage
from ichor.machined.resources._k8s_status import NODE_CORDONED_ID, NODE_CORDONED_SPECS

__all__ = ["CORDONED_STAGES", "node_cordoned_spec_controller"]

CORDONED_STAGES = frozenset({MachineStage.SHUTTING_DOWN, MachineStage.UPGRADING, MachineStage.RESETTING})
_UNCORDONED_STAGES = frozenset({MachineStage.BOOTING, MachineStage.RUNNING})


def node_cordoned_spec_controller() -> TransformController[EmptySpec]:
    def derive(ctx: ControllerContext) -> dict[str, EmptySpec]:
        status = ctx.get_or_none(MACHINE_STATUSES, MACHINE_STATUS_ID)
        if status is None:
            raise SkipReconcile
        if status.spec.stage in CORDONED_STAGES:
            return {NODE_CORDONED_ID: EmptySpec()}
        if status.spec.stage in _UNCORDONED_STAGES:
            return {}
        raise SkipReconcile  # Talos leaves the cordon as it is in the other stages

    return TransformController(
        "k8s.NodeCordonedSpecController", inputs=[Input(MACHINE_STATUSES, id=MACHINE_STATUS_ID)],
        output=NODE_CORDONED_SPECS, map_inputs=derive,
    )  # fmt: skip
