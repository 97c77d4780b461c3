"""controllers/runtime.py: MachineStatus from the sequencer's stage, Services from the supervisor,
TimeStatus."""

from __future__ import annotations

from collections.abc import Mapping

from controller_helpers import run, running

from ichor.api.gen.machine import machine_pb2
from ichor.machined.controllers import runtime
from ichor.machined.cosi import WAIT_STATUSES, Source, assert_no_resource, assert_resource
from ichor.machined.events import EventBus
from ichor.machined.resources import MACHINE_STATUSES, SERVICES, TIME_STATUSES, MachineStage
from ichor.machined.services import ServiceInfo


def test_machine_status_follows_the_sequencer_stage_and_is_an_event() -> None:
    stage: Source[MachineStage] = Source("stage", MachineStage.BOOTING)
    events = EventBus()

    async def main() -> None:
        async with running(runtime.MachineStatusController(stage, events)) as state:
            await assert_resource(
                state, MACHINE_STATUSES, "machine", lambda r: r.spec.stage is MachineStage.BOOTING
            )
            stage.set(MachineStage.RUNNING)
            status = await assert_resource(
                state, MACHINE_STATUSES, "machine", lambda r: r.spec.stage is MachineStage.RUNNING
            )
            assert status.spec.status.ready
            published = [e.payload for e in events._backlog(10, "", 0)]
            stages = [p.stage for p in published if isinstance(p, machine_pb2.MachineStatusEvent)]
            assert stages == [machine_pb2.MachineStatusEvent.BOOTING, machine_pb2.MachineStatusEvent.RUNNING]

    run(main)


def _info(
    service_id: str, *, running: bool, healthy: bool | None, waiting_for: str | None = None
) -> ServiceInfo:
    from ichor.machined.services import HealthStatus, ServiceState

    return ServiceInfo(
        id=service_id, description=service_id, state=ServiceState.RUNNING if running else ServiceState.WAITING,
        health=HealthStatus(healthy=healthy), events=(), running=running, up=running and bool(healthy),
        waiting_for=waiting_for, waiting_since=None, has_health_check=True,
    )  # fmt: skip


def test_services_and_their_waits_follow_the_supervisor() -> None:
    services: Source[Mapping[str, ServiceInfo]] = Source("services", {})

    async def main() -> None:
        async with running(runtime.ServiceController(services)) as state:
            services.set({"etcd": _info("etcd", running=False, healthy=None, waiting_for="time sync")})
            await assert_resource(state, SERVICES, "etcd", lambda r: not r.spec.running)
            await assert_resource(
                state, WAIT_STATUSES, "service-etcd",
                lambda r: r.spec.waiting_for == "service etcd: time sync",
            )  # fmt: skip
            services.set({"etcd": _info("etcd", running=True, healthy=True)})
            await assert_resource(state, SERVICES, "etcd", lambda r: r.spec.running and r.spec.healthy)
            await assert_no_resource(state, WAIT_STATUSES, "service-etcd", timeout=2)
            services.set({})
            await assert_no_resource(state, SERVICES, "etcd", timeout=2)

    run(main)


def test_time_is_synced_on_a_process_node() -> None:
    async def main() -> None:
        async with running(runtime.time_status_controller()) as state:
            status = await assert_resource(state, TIME_STATUSES, "node")
            assert status.spec.synced and status.spec.sync_disabled

    run(main)
