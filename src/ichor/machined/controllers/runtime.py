"""Area ``runtime``: the machine's stage, its services and its clock, as resources.

* ``runtime.MachineStatusController``: the sequencer's stage (a :class:`~ichor.machined.cosi.Source`)
  -> MachineStatus ``machine``; every change of it is also a ``MachineStatusEvent`` for
  ``talosctl events``, always with its ``status`` (Talos's client reads ``GetStatus().Ready``);
* ``v1alpha1.ServiceController``: the supervisor's view of each service (a Source) -> Services,
  plus a ``waits`` resource ``service-<id>`` saying what a waiting service waits for, and since when;
* ``runtime.SecurityStateController``: Services ``machined`` -> SecurityState ``securitystate``;
* ``time.SyncController``: TimeStatus ``node``. A process node keeps the host's clock: Talos in a
  container reports it synced, with sync disabled.
"""

from __future__ import annotations

from collections.abc import Mapping

from ichor.api.gen.machine import machine_pb2
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    SkipReconcile,
    Source,
    TransformController,
)
from ichor.machined.events import EventBus
from ichor.machined.resources import (
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    SECURITY_STATE_ID,
    SECURITY_STATES,
    SERVICES,
    TIME_STATUS_ID,
    TIME_STATUSES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    SecurityStateSpec,
    ServiceSpec,
    TimeStatusSpec,
)
from ichor.machined.services import ServiceInfo

__all__ = [
    "MachineStatusController",
    "ServiceController",
    "machine_status_event",
    "security_state_controller",
    "time_status_controller",
]


class MachineStatusController(Controller):
    name = "runtime.MachineStatusController"
    reads = "(sequencer stage)"
    outputs = (Output(MACHINE_STATUSES),)

    def __init__(self, stage: Source[MachineStage], events: EventBus) -> None:
        self._stage = stage
        self._events = events

    async def run(self, ctx: ControllerContext) -> None:
        with self._stage.listen(ctx.wake):
            while True:
                await ctx.changed()
                stage = self._stage.value
                current = ctx.get_or_none(MACHINE_STATUSES, MACHINE_STATUS_ID)
                ready = stage is MachineStage.RUNNING
                spec = MachineStatusSpec(stage, MachineStatusStatus(ready=ready))
                ctx.modify(MACHINE_STATUSES, MACHINE_STATUS_ID, spec)
                if current is None or current.spec != spec:
                    self._events.publish(machine_status_event(spec))


def machine_status_event(spec: MachineStatusSpec) -> machine_pb2.MachineStatusEvent:
    """The event Talos sends for a MachineStatus: stage and status, the status always present."""
    status = machine_pb2.MachineStatusEvent.MachineStatus(
        ready=spec.status.ready,
        unmet_conditions=[
            machine_pb2.MachineStatusEvent.MachineStatus.UnmetCondition(name=c.name, reason=c.reason)
            for c in spec.status.unmet_conditions
        ],
    )
    return machine_pb2.MachineStatusEvent(
        stage=machine_pb2.MachineStatusEvent.MachineStage.Value(spec.stage.name), status=status
    )


class ServiceController(Controller):
    name = "v1alpha1.ServiceController"
    reads = "(supervisor)"
    outputs = (Output(SERVICES),)

    def __init__(self, services: Source[Mapping[str, ServiceInfo]]) -> None:
        self._services = services

    async def run(self, ctx: ControllerContext) -> None:
        waiting: set[str] = set()
        with self._services.listen(ctx.wake):
            while True:
                await ctx.changed()
                infos = dict(self._services.value)
                for info in infos.values():
                    spec = ServiceSpec(running=info.running, healthy=bool(info.health.healthy),
                                       unknown=info.health.unknown)  # fmt: skip
                    ctx.modify(SERVICES, info.id, spec)
                ctx.clean_up_outputs(SERVICES, set(infos))
                now_waiting: set[str] = set()
                for info in infos.values():
                    if info.waiting_for is None:
                        continue
                    wait_id = f"service-{info.id}"
                    last_event = info.events[-1].message if info.events else ""
                    ctx.waiting(f"service {info.id}: {info.waiting_for}", last_event or f"Waiting for {info.waiting_for}",
                                id=wait_id, since=info.waiting_since)  # fmt: skip
                    now_waiting.add(wait_id)
                for wait_id in waiting - now_waiting:
                    ctx.clear_waiting(wait_id)
                waiting = now_waiting


def time_status_controller() -> TransformController[TimeStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, TimeStatusSpec]:
        return {TIME_STATUS_ID: TimeStatusSpec(synced=True, epoch=1, sync_disabled=True)}

    return TransformController("time.SyncController", inputs=[], output=TIME_STATUSES, map_inputs=derive)


def security_state_controller() -> TransformController[SecurityStateSpec]:
    """``runtime.SecurityStateController``: SecurityState ``securitystate`` once machined runs.

    In container mode Talos reports no Secure Boot and no signing keys: a node on a shared kernel
    was not booted from a UKI, so there is nothing to measure. That is the real state here."""

    def derive(ctx: ControllerContext) -> dict[str, SecurityStateSpec]:
        if ctx.get_or_none(SERVICES, "machined") is None:
            raise SkipReconcile
        return {SECURITY_STATE_ID: SecurityStateSpec(secure_boot=False)}

    return TransformController(
        "runtime.SecurityStateController",
        inputs=[Input(SERVICES, id="machined")],
        output=SECURITY_STATES,
        map_inputs=derive,
    )
