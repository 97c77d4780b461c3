"""The events Talos's own client waits for, sent as Talos sends them.

The official ``talosctl`` reads ``GetStatus().Ready`` of every ``MachineStatusEvent`` (it panics on
a missing status), its reboot/shutdown/reset trackers wait for ``MachineStatusEvent`` RUNNING+ready
and ``TaskEvent`` ``stopAllServices``, Talos's tests wait for ``SequenceEvent`` ``boot`` STOP, and
the Events API picks history by Talos's rules (``tail_events`` before ``tail_id`` before
``tail_seconds``; an id need not be in the buffer). ``reboot --wait`` compares the node's boot id
before and after; each node boot has its own.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from grpclib.client import Channel
from grpclib.server import Server

from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.machined.controllers.runtime import MachineStatusController, machine_status_event
from ichor.machined.cosi import Source, State, assert_resource
from ichor.machined.events import EventBus, NodeEvent, new_xid
from ichor.machined.node import Node
from ichor.machined.platform import EXIT_REBOOT, Layout
from ichor.machined.resources import (
    MACHINE_STATUSES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    UnmetCondition,
)
from ichor.machined.sequencer import NodeParts, Sequencer
from ichor.machined.server import _files
from ichor.machined.server._machine import MachineService


def _names(events: list[NodeEvent]) -> list[str]:
    out = []
    for e in events:
        p = e.payload
        kind = p.DESCRIPTOR.name
        if kind == "SequenceEvent":
            out.append(f"sequence {p.sequence} {machine_pb2.SequenceEvent.Action.Name(p.action)}")
        elif kind == "PhaseEvent":
            out.append(f"phase {p.phase} {machine_pb2.PhaseEvent.Action.Name(p.action)}")
        elif kind == "TaskEvent":
            out.append(f"task {p.task} {machine_pb2.TaskEvent.Action.Name(p.action)}")
    return out


# --------------------------------------------------------------------------- MachineStatusEvent


def test_machine_status_event_always_carries_its_status() -> None:
    spec = MachineStatusSpec(MachineStage.BOOTING, MachineStatusStatus(ready=False))
    event = machine_status_event(spec)
    wire = machine_pb2.MachineStatusEvent.FromString(event.SerializeToString())
    assert wire.HasField("status")  # Go's GetStatus() is non-nil even when all zeros
    assert wire.stage == machine_pb2.MachineStatusEvent.BOOTING and not wire.status.ready
    spec = MachineStatusSpec(
        MachineStage.RUNNING, MachineStatusStatus(False, (UnmetCondition("time", "not synced"),))
    )
    wire = machine_pb2.MachineStatusEvent.FromString(machine_status_event(spec).SerializeToString())
    assert [(c.name, c.reason) for c in wire.status.unmet_conditions] == [("time", "not synced")]


def test_controller_publishes_running_and_ready_for_the_reboot_tracker() -> None:
    async def main() -> list[NodeEvent]:
        state, events = State(), EventBus()
        stage: Source[MachineStage] = Source("stage", MachineStage.BOOTING)
        from ichor.machined.cosi import Registry, Runtime
        from ichor.machined.resources import register_node_types

        registry = Registry()
        register_node_types(registry)
        runtime = Runtime(state, registry=registry)
        runtime.register(MachineStatusController(stage, events))
        task = asyncio.create_task(runtime.run())
        try:
            await assert_resource(
                state, MACHINE_STATUSES, "machine", lambda r: r.spec.stage is MachineStage.BOOTING
            )
            stage.set(MachineStage.RUNNING)
            await assert_resource(state, MACHINE_STATUSES, "machine", lambda r: r.spec.status.ready)
        finally:
            task.cancel()
        return [e async for e in _drain(events)]

    published = asyncio.run(main())
    statuses = [e.payload for e in published]
    assert all(p.HasField("status") for p in statuses)
    # What action.MachineReadyEventFn waits for after a reboot.
    assert any(p.stage == machine_pb2.MachineStatusEvent.RUNNING and p.status.ready for p in statuses)


async def _drain(events: EventBus) -> Any:
    subscription = events.subscribe(tail_events=-1)
    while True:
        try:
            async with asyncio.timeout(0.05):
                yield await anext(subscription)
        except TimeoutError:
            return


# --------------------------------------------------------------------------- the Events API history


def _bus_with(n: int, start: datetime) -> tuple[EventBus, list[NodeEvent]]:
    now = [start]
    bus = EventBus(clock=lambda: now[0])
    published = []
    for i in range(n):
        now[0] = start + timedelta(seconds=i)
        published.append(bus.publish(machine_pb2.TaskEvent(task=f"t{i}")))
    now[0] = start + timedelta(seconds=n - 1, milliseconds=500)
    return bus, published


def _backlog(bus: EventBus, **options: Any) -> list[str]:
    return [
        e.payload.task
        for e in bus._backlog(**{"tail_events": 0, "tail_id": "", "tail_seconds": 0, **options})
    ]


def test_tail_events_wins_over_id_and_seconds_as_in_talos() -> None:
    bus, published = _bus_with(5, datetime(2026, 1, 1, tzinfo=UTC))
    assert _backlog(bus, tail_events=-1) == ["t0", "t1", "t2", "t3", "t4"]
    assert _backlog(bus, tail_events=2, tail_id=published[0].id, tail_seconds=100) == ["t3", "t4"]
    assert _backlog(bus, tail_events=50) == ["t0", "t1", "t2", "t3", "t4"]
    assert _backlog(bus) == []


def test_tail_id_takes_everything_after_it_even_when_it_left_the_buffer() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    bus, published = _bus_with(4, start)
    assert _backlog(bus, tail_id=published[1].id) == ["t2", "t3"]
    older = new_xid(start - timedelta(hours=1))  # an id older than the history: all of it
    assert _backlog(bus, tail_id=older) == ["t0", "t1", "t2", "t3"]
    newer = new_xid(start + timedelta(hours=1))
    assert _backlog(bus, tail_id=newer) == []


def test_tail_seconds_counts_by_the_id_second() -> None:
    bus, _ = _bus_with(5, datetime(2026, 1, 1, tzinfo=UTC))  # now = t4 + 0.5 s
    # Talos keeps events whose id second is after now - duration: t4 (at -0.5 s) and t3 (-1.5 s).
    assert _backlog(bus, tail_seconds=2) == ["t3", "t4"]


# --------------------------------------------------------------------------- sequences


class _Supervisor:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def load(self, *services: Any) -> None:
        self.calls.append("load")

    def start(self, *ids: str) -> None:
        self.calls.append("start")

    def start_all(self) -> None:
        self.calls.append("start_all")

    def list(self) -> list[Any]:
        return []

    async def stop_all(self, *, keep: Any = ()) -> None:
        self.calls.append("stop_all")


class _Store:
    request_reboot: Any = None

    async def acquire(self) -> Any:
        return type("Loaded", (), {"is_control_plane": False, "config": None})()

    def activate(self, loaded: Any) -> None:
        pass


def test_boot_then_reboot_sends_talos_sequence_phase_and_task_events(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    events = EventBus()
    parts = NodeParts(
        layout=layout, state=State(), events=events, store=_Store(),  # type: ignore[arg-type]
        supervisor=_Supervisor(), stage=Source("stage", MachineStage.BOOTING), say=lambda _: None,  # type: ignore[arg-type]
        clock=lambda: datetime.now(UTC), services=lambda loaded: [], maintenance=None,  # type: ignore[arg-type]
        leave_etcd=None,  # type: ignore[arg-type]
    )  # fmt: skip
    sequencer = Sequencer(parts)
    sequencer._hostname = lambda loaded: "node"  # type: ignore[method-assign]

    async def main() -> int:
        run = asyncio.create_task(sequencer.run())
        while parts.stage.value is not MachineStage.RUNNING:
            assert not run.done(), run.result()  # a sequencer that failed never reaches RUNNING
            await asyncio.sleep(0.01)
        sequencer.request_reboot("actor-1")
        return await run

    assert asyncio.run(main()) == EXIT_REBOOT
    history = events._backlog(-1, "", 0)
    assert _names(history) == [
        "sequence initialize START",
        "sequence initialize STOP",
        "sequence boot START",
        "sequence boot STOP",
        "sequence reboot START",
        "phase stopEverything START",
        "task stopAllServices START",
        "task stopAllServices STOP",
        "phase stopEverything STOP",
    ]
    # The reboot's events are the caller's (the tracker follows its actor id); the boot's are nobody's.
    actors = {(_names([e])[0], e.actor_id) for e in history}
    assert ("task stopAllServices START", "actor-1") in actors
    assert ("sequence boot STOP", "") in actors


# --------------------------------------------------------------------------- boot id


def test_boot_id_path_is_recognised_in_every_spelling() -> None:
    for path in (
        "/proc/sys/kernel/random/boot_id",
        "proc/sys/kernel/random/boot_id",
        "//proc/./sys/kernel/random/boot_id",
    ):
        assert _files.is_boot_id(path)
    assert not _files.is_boot_id("/proc/sys/kernel/random/uuid")


class _BootNode:
    """The little of a node that ``read`` needs."""

    def __init__(self, layout: Layout, boot_id: str) -> None:
        self.layout = layout
        self.boot_id = boot_id
        self.events = EventBus()


async def _read_boot_id(tmp: Path, boot_id: str) -> bytes:
    layout = Layout(root=tmp, address="127.5.0.2")
    layout.ensure()
    server = Server([MachineService(_BootNode(layout, boot_id), roles_of=lambda stream: {"os:admin"})])  # type: ignore[arg-type]
    path = str(tmp / "machine.sock")
    await server.start(path=path)
    channel = Channel(path=path)
    try:
        async with machine_grpc.MachineServiceStub(channel).Read.open() as call:
            await call.send_message(machine_pb2.ReadRequest(path="/proc/sys/kernel/random/boot_id"), end=True)
            return b"".join([m.bytes async for m in call])
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


def test_each_node_boot_reads_its_own_boot_id(tmp_path: Path) -> None:
    first, second = Node(Layout(tmp_path / "a", "127.5.0.2")), Node(Layout(tmp_path / "a", "127.5.0.2"))
    assert first.boot_id != second.boot_id  # a reboot is a new machined process: a new boot id
    assert uuid.UUID(first.boot_id).version == 4
    host = (
        Path("/proc/sys/kernel/random/boot_id").read_bytes()
        if Path("/proc/sys/kernel/random/boot_id").exists()
        else b""
    )
    got = asyncio.run(asyncio.wait_for(_read_boot_id(tmp_path, first.boot_id), 10))
    assert got == f"{first.boot_id}\n".encode()  # the kernel's format: the UUID and a newline
    assert got != host
