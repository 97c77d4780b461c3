"""The reset sequence: a step that fails stops what follows it (nothing wiped), a graceful=false
reset skips leaving etcd, and every reset tells discovery first."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ichor.api.gen.machine import machine_pb2
from ichor.machined.cosi import Source, State
from ichor.machined.events import EventBus
from ichor.machined.platform import EXIT_REBOOT, Layout
from ichor.machined.resources import MACHINE_RESET_SIGNALS, MachineStage
from ichor.machined.sequencer import NodeParts, Sequencer


class _Supervisor:
    def __init__(self) -> None:
        self.stopped: list[str] = []

    def list(self) -> list[Any]:
        return [type("Info", (), {"id": "etcd"})()]

    async def stop(self, *ids: str) -> None:
        self.stopped.extend(ids)

    async def stop_all(self, *, keep: Any = ()) -> None:
        self.stopped.append(f"all but {','.join(keep)}")


def _sequencer(tmp_path: Path, leave_problem: str | None) -> tuple[Sequencer, NodeParts, list[str]]:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    layout.config_file.write_text("config")
    (layout.etcd_data_dir / "member").mkdir(parents=True)
    said: list[str] = []
    left: list[str] = []

    async def leave() -> str | None:
        left.append("etcd")
        return leave_problem

    parts = NodeParts(
        layout=layout, state=State(), events=EventBus(), store=type("Store", (), {})(),  # type: ignore[arg-type]
        supervisor=_Supervisor(), stage=Source("stage", MachineStage.RUNNING), say=said.append,  # type: ignore[arg-type]
        clock=lambda: datetime.now(UTC), services=lambda loaded: [], maintenance=None,  # type: ignore[arg-type]
        leave_etcd=leave,
    )  # fmt: skip
    return Sequencer(parts), parts, left


def _reset(graceful: bool) -> machine_pb2.ResetRequest:
    return machine_pb2.ResetRequest(graceful=graceful, reboot=True)


def test_a_graceful_reset_that_cannot_leave_etcd_wipes_nothing(tmp_path: Path) -> None:
    sequencer, parts, left = _sequencer(tmp_path, leave_problem="this is the only voting etcd member")

    async def main() -> None:
        sequencer._stop = asyncio.get_running_loop().create_future()
        await sequencer._reset(_reset(graceful=True))
        assert not sequencer._stop.done(), "the node was stopped although the reset was aborted"

    asyncio.run(main())
    assert left == ["etcd"]
    assert parts.layout.config_file.read_text() == "config"
    assert (parts.layout.etcd_data_dir / "member").is_dir()
    assert parts.stage.value is MachineStage.RUNNING
    assert not parts.state.list(MACHINE_RESET_SIGNALS.default_namespace, MACHINE_RESET_SIGNALS)
    assert parts.supervisor.stopped == []  # type: ignore[attr-defined]
    said: list[str] = parts.say.__self__  # type: ignore[attr-defined]
    assert any("reset aborted" in line and "--graceful=false" in line for line in said)


def test_a_forced_reset_skips_etcd_tells_discovery_and_wipes(tmp_path: Path) -> None:
    sequencer, parts, left = _sequencer(tmp_path, leave_problem="never asked")

    async def main() -> int:
        sequencer._stop = asyncio.get_running_loop().create_future()
        await sequencer._reset(_reset(graceful=False))
        return await sequencer._stop

    assert asyncio.run(main()) == EXIT_REBOOT
    assert left == []
    assert not parts.layout.config_file.exists()
    assert not (parts.layout.etcd_data_dir / "member").exists()
    assert parts.state.list(MACHINE_RESET_SIGNALS.default_namespace, MACHINE_RESET_SIGNALS)
    assert parts.supervisor.stopped == ["all but apid,machined"]  # type: ignore[attr-defined]
    assert parts.stage.value is MachineStage.RESETTING


class _StuckSupervisor(_Supervisor):
    """etcd never reaches a terminal state (its stop hangs)."""

    def list(self) -> list[Any]:
        return [type("Info", (), {"id": i})() for i in ("apid", "etcd")]

    def is_running(self, service_id: str) -> bool:
        return service_id == "etcd"

    async def stop_all(self, *, keep: Any = ()) -> None:
        await asyncio.Event().wait()


def test_stopping_all_services_goes_on_without_one_that_never_stops(tmp_path: Path, monkeypatch: Any) -> None:
    import ichor.machined.sequencer as sequencer_module

    monkeypatch.setattr(sequencer_module, "STOP_ALL_LIMIT", 0.05)
    sequencer, parts, _left = _sequencer(tmp_path, leave_problem=None)
    parts.supervisor = _StuckSupervisor()  # type: ignore[assignment]
    told: list[int] = []
    parts.stopping = told.append

    asyncio.run(asyncio.wait_for(sequencer._stop_all(), 5))
    said: list[str] = parts.say.__self__  # type: ignore[attr-defined]
    assert said == ["stopping all services: etcd still stopping after 0 s; going on without them"]
    assert told == []  # stopping() is the run's announcement, not _stop_all's


def test_a_reboot_loads_the_next_boot_for_kexec_unless_talos_would_not(tmp_path: Path) -> None:
    """Talos's KexecPrepare after every service stopped: a default reboot, an upgrade and a reset of
    some partitions kexec; ``--mode powercycle``, a shutdown and a whole-disk reset go through the
    firmware (a reset of BOOT too: the rule of ``ResetPlan.kexec``, test_reset_rules)."""
    sequencer, parts, _left = _sequencer(tmp_path, leave_problem=None)
    loads: list[str] = []

    def prepare() -> str:
        loads.append("loaded")
        return "kexec: loaded the next boot (boot: slot A (v1), good): rebooting without the firmware"

    parts.prepare_kexec = prepare

    def way_out(request: Any) -> list[str]:
        """What loading and the console saw after ``request`` ended the run."""
        loads.clear()
        said: list[str] = parts.say.__self__  # type: ignore[attr-defined]
        said.clear()

        async def main() -> None:
            sequencer._stop = asyncio.get_running_loop().create_future()
            request()
            await sequencer._way_out(await asyncio.wait_for(sequencer._stop, 5))

        asyncio.run(main())
        return [*loads, *(line for line in said if line.startswith("kexec:"))]

    reboot = lambda mode: lambda: sequencer.request_reboot("a", mode)  # noqa: E731
    assert way_out(reboot(machine_pb2.RebootRequest.DEFAULT)) == ["loaded", prepare()]
    assert way_out(reboot(machine_pb2.RebootRequest.POWERCYCLE)) == []
    upgrade = lambda mode: lambda: sequencer.request_upgrade("a", lambda _p: asyncio.sleep(0), mode)  # noqa: E731
    assert way_out(upgrade(machine_pb2.UpgradeRequest.POWERCYCLE)) == []
    assert way_out(upgrade(machine_pb2.UpgradeRequest.DEFAULT))[0] == "loaded"
    assert way_out(lambda: sequencer.request_shutdown("a")) == []

    for labels, kexecs in (((), False), (("EPHEMERAL",), True), (("STATE",), True)):
        request = machine_pb2.ResetRequest(reboot=True, graceful=False, system_partitions_to_wipe=[
            machine_pb2.ResetPartitionSpec(label=label, wipe=True) for label in labels])  # fmt: skip

        async def reset_then_way_out(request: machine_pb2.ResetRequest = request) -> None:
            sequencer._stop = asyncio.get_running_loop().create_future()
            await sequencer._reset(request)
            await sequencer._way_out(await sequencer._stop)

        loads.clear()
        asyncio.run(reset_then_way_out())
        assert (loads == ["loaded"]) is kexecs, (labels, loads)
