"""The ``upgrade`` sequence: the installer's work runs while the node runs, then the node reboots;
a failure leaves it running on the slot it booted and says why (console and SequenceEvent)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ichor.api.gen.machine import machine_pb2
from ichor.machined.cosi import Source, State
from ichor.machined.events import EventBus
from ichor.machined.platform import EXIT_REBOOT, Layout
from ichor.machined.resources import MachineStage
from ichor.machined.sequencer import NodeParts, Sequencer
from ichor.machinery.errors import SlotError


def _sequencer(tmp_path: Path) -> tuple[Sequencer, list[str], EventBus]:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    said: list[str] = []
    bus = EventBus()
    parts = NodeParts(
        layout=layout, state=State(), events=bus, store=type("Store", (), {})(),  # type: ignore[arg-type]
        supervisor=None, stage=Source("stage", MachineStage.RUNNING), say=said.append,  # type: ignore[arg-type]
        clock=lambda: datetime.now(UTC), services=lambda loaded: [], maintenance=None,  # type: ignore[arg-type]
        leave_etcd=None,  # type: ignore[arg-type]
    )  # fmt: skip
    return Sequencer(parts), said, bus


def _sequences(bus: EventBus) -> list[tuple[str, int, str, str]]:
    return [(e.payload.sequence, e.payload.action, e.payload.error.message, e.actor_id) for e in bus.history()
            if isinstance(e.payload, machine_pb2.SequenceEvent)]  # fmt: skip


START, STOP = machine_pb2.SequenceEvent.START, machine_pb2.SequenceEvent.STOP


def test_a_written_upgrade_reboots_the_node(tmp_path: Path) -> None:
    sequencer, said, bus = _sequencer(tmp_path)

    async def work(printf: Callable[[str], None]) -> None:
        await asyncio.to_thread(printf, "partitioning nothing: slot B written")

    async def main() -> int:
        sequencer._stop = asyncio.get_running_loop().create_future()
        sequencer.request_upgrade("actor-1", work)
        return await asyncio.wait_for(sequencer._stop, 5)

    assert asyncio.run(main()) == EXIT_REBOOT
    assert "upgrade: partitioning nothing: slot B written" in said
    assert _sequences(bus) == [("upgrade", START, "", "actor-1"), ("upgrade", STOP, "", "actor-1"),
                               ("reboot", START, "", "actor-1")]  # fmt: skip
    tasks = [
        (e.payload.task, e.payload.action)
        for e in bus.history()
        if isinstance(e.payload, machine_pb2.TaskEvent)
    ]
    assert tasks == [("upgrade", machine_pb2.TaskEvent.START), ("upgrade", machine_pb2.TaskEvent.STOP)]


def test_a_failed_upgrade_leaves_the_node_running_and_says_why(tmp_path: Path) -> None:
    sequencer, said, bus = _sequencer(tmp_path)

    async def work(printf: Callable[[str], None]) -> None:
        raise SlotError("upgrade refused: slot B (v2) is still on trial", hint="use --force")

    async def main() -> bool:
        sequencer._stop = asyncio.get_running_loop().create_future()
        sequencer.request_upgrade("actor-2", work)
        await asyncio.sleep(0.5)
        return sequencer._stop.done()

    assert asyncio.run(main()) is False
    assert said[-1] == ("upgrade failed: upgrade refused: slot B (v2) is still on trial (use --force); "
                        "the node stays on the slot it booted")  # fmt: skip
    assert _sequences(bus)[-1] == ("upgrade", STOP, "upgrade refused: slot B (v2) is still on trial (use --force)",
                                   "actor-2")  # fmt: skip
