from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from ichor.api.gen.machine import machine_pb2
from ichor.machined.events import EventBus, new_xid, xid_time


def test_xids_are_20_chars_sortable_and_carry_time() -> None:
    t = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
    a, b = new_xid(t), new_xid(t + timedelta(seconds=1))
    assert len(a) == 20 and a < b
    assert xid_time(a) == t
    with pytest.raises(ValueError):
        xid_time("not-an-xid")


def _seq(name: str) -> machine_pb2.SequenceEvent:
    return machine_pb2.SequenceEvent(sequence=name)


async def _take(bus: EventBus, n: int, **kwargs: object) -> list[str]:
    out: list[str] = []
    async with asyncio.timeout(2):
        async for event in bus.subscribe(**kwargs):  # type: ignore[arg-type]
            out.append(event.payload.sequence)  # type: ignore[attr-defined]
            if len(out) == n:
                break
    return out


def test_history_then_live() -> None:
    asyncio.run(_history_then_live())


async def _history_then_live() -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    bus = EventBus(history=3, clock=lambda: now[0])
    for name in ("a", "b", "c", "d"):
        bus.publish(_seq(name))
        now[0] += timedelta(seconds=10)
    assert await _take(bus, 3, tail_events=-1) == ["b", "c", "d"]
    assert await _take(bus, 2, tail_events=2) == ["c", "d"]
    assert await _take(bus, 1, tail_seconds=15) == ["d"]

    async def later() -> None:
        await asyncio.sleep(0.01)
        bus.publish(_seq("live"), actor_id="x")

    task = asyncio.create_task(later())
    assert await _take(bus, 1, actor_id="x") == ["live"]
    await task
    first = bus._backlog(-1, "", 0)[0]
    assert await _take(bus, 2, tail_id=first.id) == ["d", "live"]
    assert first.type_url == "talos/runtime/machine.SequenceEvent"
