"""In-memory state: CRUD, versions, ownership, finalizers, label queries and watches."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from clock_helpers import FakeClock

from ichor.machined.cosi import (
    AlreadyExistsError,
    ConflictError,
    EventType,
    NotFoundError,
    OwnerConflictError,
    PendingFinalizersError,
    Phase,
    PhaseConflictError,
    ResourceType,
    State,
    label_equal,
    label_exists,
    label_not_exists,
)

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@dataclasses.dataclass(frozen=True)
class ThingSpec:
    value: str = ""


THINGS = ResourceType("Things.test.ichor.dev", "test", ThingSpec)
NS = "test"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def state(clock: FakeClock) -> State:
    return State(clock=clock)


def test_create_sets_version_owner_phase_and_timestamps(state: State, clock: FakeClock) -> None:
    stored = state.create(THINGS.new("a", ThingSpec("x")), owner="ThingController")
    meta = stored.metadata
    assert (meta.version, meta.owner, meta.phase) == (1, "ThingController", Phase.RUNNING)
    assert meta.created == meta.updated == clock.now
    assert state.get(NS, THINGS, "a") == stored
    assert state.get(NS, THINGS.type, "a").spec == ThingSpec("x")


def test_update_bumps_version_keeps_created(state: State, clock: FakeClock) -> None:
    first = state.create(THINGS.new("a", ThingSpec("x")))
    clock.advance(5)
    second = state.update(first.with_spec(ThingSpec("y")))
    clock.advance(5)
    third = state.update(second.with_spec(ThingSpec("z")).with_labels({"k": "v"}))
    assert [first.metadata.version, second.metadata.version, third.metadata.version] == [1, 2, 3]
    assert third.metadata.created == first.metadata.created
    assert third.metadata.updated == clock.now != first.metadata.updated
    assert state.get(NS, THINGS, "a").spec == ThingSpec("z")
    assert state.get(NS, THINGS, "a").metadata.labels == {"k": "v"}


def test_get_missing_is_not_found_with_cosi_message(state: State) -> None:
    with pytest.raises(NotFoundError) as err:
        state.get(NS, THINGS, "nope")
    assert str(err.value) == "resource Things.test.ichor.dev(test/nope@undefined) doesn't exist"


def test_spec_of_is_the_spec_or_none(state: State) -> None:
    assert state.spec_of(THINGS, "one") is None
    state.create(THINGS.new("one", ThingSpec("x")))
    assert state.spec_of(THINGS, "one") == ThingSpec("x")


def test_create_twice_is_already_exists(state: State) -> None:
    state.create(THINGS.new("a", ThingSpec("x")))
    with pytest.raises(
        AlreadyExistsError, match=r"resource Things.test.ichor.dev\(test/a@1\) already exists"
    ):
        state.create(THINGS.new("a", ThingSpec("other")))
    assert state.get(NS, THINGS, "a").spec == ThingSpec("x")
    assert issubclass(AlreadyExistsError, ConflictError)


def test_update_missing_is_not_found(state: State) -> None:
    with pytest.raises(NotFoundError):
        state.update(THINGS.new("ghost", ThingSpec()))
    assert state.list(NS, THINGS) == []


def test_update_by_non_owner_is_owner_conflict(state: State) -> None:
    stored = state.create(THINGS.new("a", ThingSpec("x")), owner="A")
    with pytest.raises(OwnerConflictError, match=r'is owned by "A"') as err:
        state.update(stored.with_spec(ThingSpec("y")), owner="B")
    assert err.value.hint
    with pytest.raises(OwnerConflictError):
        state.update(stored.with_spec(ThingSpec("y")))  # the user may not touch a controller's output
    with pytest.raises(OwnerConflictError):
        state.teardown(NS, THINGS, "a", owner="B")
    with pytest.raises(OwnerConflictError):
        state.destroy(NS, THINGS, "a", owner="B")
    assert state.get(NS, THINGS, "a").metadata.version == 1


def test_update_expected_version_conflict(state: State) -> None:
    stored = state.create(THINGS.new("a", ThingSpec("x")))
    state.update(stored.with_spec(ThingSpec("y")), expected_version=1)
    with pytest.raises(ConflictError) as err:
        state.update(stored.with_spec(ThingSpec("stale")), expected_version=1)
    assert 'update conflict: expected version "1", actual version "2"' in str(err.value)
    assert state.get(NS, THINGS, "a").spec == ThingSpec("y")


def test_update_expected_phase_conflict(state: State) -> None:
    stored = state.create(THINGS.new("a", ThingSpec("x")))
    state.add_finalizer(NS, THINGS, "a", "holder")
    state.teardown(NS, THINGS, "a")
    with pytest.raises(PhaseConflictError, match="is not in phase running"):
        state.update(stored.with_spec(ThingSpec("y")), expected_phase=Phase.RUNNING)


def test_update_keeps_owner_phase_and_finalizers(state: State) -> None:
    state.create(THINGS.new("a", ThingSpec("x")), owner="A")
    state.add_finalizer(NS, THINGS, "a", "B")
    current = state.get(NS, THINGS, "a")
    forged = dataclasses.replace(
        current, metadata=dataclasses.replace(current.metadata, finalizers=(), phase=Phase.TEARING_DOWN)
    )
    after = state.update(forged.with_spec(ThingSpec("y")), owner="A")
    assert after.metadata.finalizers == ("B",)
    assert after.metadata.phase is Phase.RUNNING
    assert after.metadata.owner == "A"


def test_teardown_then_destroy(state: State) -> None:
    state.create(THINGS.new("a", ThingSpec()))
    assert state.teardown(NS, THINGS, "a") is True
    torn = state.get(NS, THINGS, "a")
    assert torn.metadata.phase is Phase.TEARING_DOWN
    assert torn.metadata.version == 2
    assert state.teardown(NS, THINGS, "a") is True  # idempotent, no new version
    assert state.get(NS, THINGS, "a").metadata.version == 2
    state.destroy(NS, THINGS, "a")
    with pytest.raises(NotFoundError):
        state.get(NS, THINGS, "a")
    with pytest.raises(NotFoundError):
        state.destroy(NS, THINGS, "a")
    with pytest.raises(NotFoundError):
        state.teardown(NS, THINGS, "a")


def test_finalizers_block_destroy_and_are_named(state: State) -> None:
    state.create(THINGS.new("a", ThingSpec()))
    state.add_finalizer(NS, THINGS, "a", "EtcdController", "KubeletController")
    state.add_finalizer(NS, THINGS, "a", "EtcdController")  # already there: no new version
    assert state.get(NS, THINGS, "a").metadata.version == 2
    assert state.teardown(NS, THINGS, "a") is False
    with pytest.raises(PendingFinalizersError) as err:
        state.destroy(NS, THINGS, "a")
    assert "has pending finalizers [EtcdController KubeletController]" in str(err.value)
    assert state.get(NS, THINGS, "a").metadata.phase is Phase.TEARING_DOWN
    # No new holders once tearing down.
    with pytest.raises(PhaseConflictError):
        state.add_finalizer(NS, THINGS, "a", "Latecomer")
    state.remove_finalizer(NS, THINGS, "a", "EtcdController", "NotThere")
    with pytest.raises(PendingFinalizersError, match=r"\[KubeletController\]"):
        state.destroy(NS, THINGS, "a")
    state.remove_finalizer(NS, THINGS, "a", "KubeletController")
    state.destroy(NS, THINGS, "a")
    assert state.list(NS, THINGS) == []


def test_list_sorted_and_label_queries(state: State) -> None:
    state.create(THINGS.new("c", ThingSpec(), labels={"role": "worker"}))
    state.create(THINGS.new("a", ThingSpec(), labels={"role": "controlplane", "zone": "x"}))
    state.create(THINGS.new("b", ThingSpec()))
    state.create(THINGS.new("other-ns", ThingSpec(), namespace="elsewhere"))

    def ids(**kw: Any) -> list[str]:
        return [r.id for r in state.list(NS, THINGS, **kw)]

    assert ids() == ["a", "b", "c"]
    assert ids(labels=[label_equal("role", "worker")]) == ["c"]
    assert ids(labels=[label_exists("role")]) == ["a", "c"]
    assert ids(labels=[label_not_exists("role")]) == ["b"]
    assert ids(labels=[label_exists("role"), label_exists("zone")]) == ["a"]
    assert ids(labels=[label_equal("role", "nope")]) == []
    assert [r.id for r in state.list("elsewhere", THINGS)] == ["other-ns"]


def test_resource_type_rejects_wrong_spec_and_empty_id() -> None:
    with pytest.raises(TypeError, match="needs a ThingSpec spec"):
        THINGS.new("a", "not a spec")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        THINGS.new("", ThingSpec())


# -- watches -----------------------------------------------------------------------------------


async def take(it: Any, n: int) -> list[Any]:
    out = []
    async with asyncio.timeout(1):
        for _ in range(n):
            out.append(await anext(it))
    return out


def test_watch_kind_bootstrap_then_live_in_order(state: State) -> None:
    async def main() -> None:
        state.create(THINGS.new("b", ThingSpec("1")))
        state.create(THINGS.new("a", ThingSpec("1")))
        watch = state.watch_kind(NS, THINGS)
        b = state.get(NS, THINGS, "b")
        state.update(b.with_spec(ThingSpec("2")))
        state.create(THINGS.new("c", ThingSpec()))
        state.destroy(NS, THINGS, "a")
        events = await take(watch, 6)
        assert [(e.type, e.resource.id) for e in events] == [
            (EventType.CREATED, "a"),
            (EventType.CREATED, "b"),
            (EventType.BOOTSTRAPPED, ""),
            (EventType.UPDATED, "b"),
            (EventType.CREATED, "c"),
            (EventType.DESTROYED, "a"),
        ]
        assert events[2].resource.is_tombstone
        assert events[3].old is not None and events[3].old.spec == ThingSpec("1")
        assert events[3].resource.spec == ThingSpec("2")

    run(main())


def test_watch_kind_without_bootstrap_sees_only_changes(state: State) -> None:
    async def main() -> None:
        state.create(THINGS.new("old", ThingSpec()))
        watch = state.watch_kind(NS, THINGS, bootstrap=False)
        state.create(THINGS.new("new", ThingSpec()))
        [event] = await take(watch, 1)
        assert (event.type, event.resource.id) == (EventType.CREATED, "new")

    run(main())


def test_watch_kind_empty_collection_bootstraps_immediately(state: State) -> None:
    async def main() -> None:
        [event] = await take(state.watch_kind(NS, THINGS), 1)
        assert event.type is EventType.BOOTSTRAPPED

    run(main())


def test_watch_kind_label_query(state: State) -> None:
    async def main() -> None:
        state.create(THINGS.new("w1", ThingSpec(), labels={"role": "worker"}))
        state.create(THINGS.new("cp", ThingSpec(), labels={"role": "controlplane"}))
        watch = state.watch_kind(NS, THINGS, labels=[label_equal("role", "worker")])
        state.create(THINGS.new("cp2", ThingSpec(), labels={"role": "controlplane"}))
        state.create(THINGS.new("w2", ThingSpec(), labels={"role": "worker"}))
        events = await take(watch, 3)
        assert [(e.type, e.resource.id) for e in events] == [
            (EventType.CREATED, "w1"),
            (EventType.BOOTSTRAPPED, ""),
            (EventType.CREATED, "w2"),
        ]

    run(main())


def test_watch_one_resource_starts_with_current_state(state: State) -> None:
    async def main() -> None:
        missing = state.watch(NS, THINGS, "a")
        [first] = await take(missing, 1)
        assert first.type is EventType.DESTROYED and first.resource.is_tombstone
        assert first.resource.metadata.version_string == "undefined"
        state.create(THINGS.new("other", ThingSpec()))
        state.create(THINGS.new("a", ThingSpec("1")))
        [created] = await take(missing, 1)
        assert (created.type, created.resource.id) == (EventType.CREATED, "a")

        existing = state.watch(NS, THINGS, "a")
        state.update(state.get(NS, THINGS, "a").with_spec(ThingSpec("2")))
        state.destroy(NS, THINGS, "a")
        events = await take(existing, 3)
        assert [e.type for e in events] == [EventType.CREATED, EventType.UPDATED, EventType.DESTROYED]
        assert events[0].resource.spec == ThingSpec("1")

    run(main())


def test_watch_waits_for_a_later_change(state: State) -> None:
    async def main() -> None:
        watch = state.watch_kind(NS, THINGS, bootstrap=False)

        async def later() -> None:
            await asyncio.sleep(0)
            state.create(THINGS.new("late", ThingSpec()))

        async with asyncio.TaskGroup() as tg:
            tg.create_task(later())
            [event] = await take(watch, 1)
        assert event.resource.id == "late"

    run(main())


def test_slow_watcher_gets_errored_not_a_gap(clock: FakeClock) -> None:
    state = State(clock=clock, history=8)

    async def main() -> None:
        caught_up = state.watch_kind(NS, THINGS, bootstrap=False)
        slow = state.watch_kind(NS, THINGS, bootstrap=False)
        for i in range(8):
            state.create(THINGS.new(f"r{i}", ThingSpec()))
        # Exactly the history behind: still complete.
        assert [e.resource.id for e in await take(caught_up, 8)] == [f"r{i}" for i in range(8)]
        state.create(THINGS.new("r8", ThingSpec()))
        [errored] = await take(slow, 1)
        assert errored.type is EventType.ERRORED
        assert errored.error is not None and "buffer overrun" in errored.error
        with pytest.raises(StopAsyncIteration):
            await anext(slow)
        [next_event] = await take(caught_up, 1)
        assert next_event.resource.id == "r8"

    run(main())


def test_history_must_be_positive() -> None:
    with pytest.raises(ValueError):
        State(history=0)
