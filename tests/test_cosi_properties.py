"""Property: replaying a bootstrapped kind watch always reproduces the state, whatever the writes."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machined.cosi import (
    EventType,
    NotFoundError,
    PendingFinalizersError,
    PhaseConflictError,
    ResourceType,
    State,
    spec_to_plain,
)


@dataclasses.dataclass(frozen=True)
class ValueSpec:
    value: int = 0


VALUES = ResourceType("Values.test.ichor.dev", "test", ValueSpec)

ids = st.sampled_from(["a", "b", "c", "d"])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), ids, st.integers(0, 9)),
        st.tuples(st.just("destroy"), ids, st.just(0)),
        st.tuples(st.just("teardown"), ids, st.just(0)),
        st.tuples(st.just("finalize"), ids, st.just(0)),
        st.tuples(st.just("release"), ids, st.just(0)),
    ),
    max_size=40,
)


def apply(state: State, op: str, id: str, value: int) -> None:
    try:
        if op == "upsert":
            try:
                current = state.get("test", VALUES, id)
            except NotFoundError:
                state.create(VALUES.new(id, ValueSpec(value)))
            else:
                state.update(current.with_spec(ValueSpec(value)))
        elif op == "destroy":
            state.destroy("test", VALUES, id)
        elif op == "teardown":
            state.teardown("test", VALUES, id)
        elif op == "finalize":
            state.add_finalizer("test", VALUES, id, "holder")
        else:
            state.remove_finalizer("test", VALUES, id, "holder")
    except (NotFoundError, PendingFinalizersError, PhaseConflictError):
        pass


@settings(max_examples=150, deadline=None)
@given(before=ops, after=ops)
def test_watch_replay_reproduces_state(
    before: list[tuple[str, str, int]], after: list[tuple[str, str, int]]
) -> None:
    state = State(history=64)

    async def main() -> None:
        for op in before:
            apply(state, *op)
        watch = state.watch_kind("test", VALUES)
        for op in after:
            apply(state, *op)
        expected = {r.id: r for r in state.list("test", VALUES)}
        # A last write marks the end of the stream, so the replay knows when it has seen everything.
        state.create(VALUES.new("zz-end", ValueSpec()))
        seen: dict[str, Any] = {}
        versions: dict[str, int] = {}
        bootstrapped = False
        async with asyncio.timeout(1):
            async for event in watch:
                res = event.resource
                if event.type is EventType.BOOTSTRAPPED:
                    bootstrapped = True
                    continue
                assert event.type is not EventType.ERRORED
                if res.id == "zz-end":
                    assert bootstrapped
                    break
                if event.type is EventType.DESTROYED:
                    del seen[res.id], versions[res.id]
                    continue
                if event.type is EventType.UPDATED:
                    # Versions only move forward, by exactly one per write.
                    assert res.metadata.version == versions[res.id] + 1
                seen[res.id] = res
                versions[res.id] = res.metadata.version
        assert {k: spec_to_plain(v.spec) for k, v in seen.items()} == {
            k: spec_to_plain(v.spec) for k, v in expected.items()
        }
        assert seen == expected

    asyncio.run(main())
