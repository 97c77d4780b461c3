"""Controller runtime: transform controllers, output tracking, wake-ups, restarts, waits."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Coroutine, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clock_helpers import FakeClock

from ichor.machined.cosi import (
    META_NAMESPACE,
    RESOURCE_DEFINITIONS,
    WAIT_STATUSES,
    Backoff,
    Controller,
    ControllerContext,
    Input,
    InputNotDeclaredError,
    Output,
    OutputKind,
    OutputNotDeclaredError,
    OwnerConflictError,
    Phase,
    PhaseConflictError,
    RegistrationError,
    Registry,
    ResourceType,
    Runtime,
    SkipReconcile,
    State,
    TransformController,
    WaitingFor,
    assert_no_resource,
    assert_resource,
)
from ichor.machined.cosi._log import go_duration

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class FakeSleep:
    """Records every backoff/retry delay and returns at once (after yielding to the loop)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@dataclasses.dataclass(frozen=True)
class ConfigSpec:
    name: str = ""


@dataclasses.dataclass(frozen=True)
class GreetingSpec:
    text: str = ""


@dataclasses.dataclass(frozen=True)
class ShoutSpec:
    text: str = ""


CONFIGS = ResourceType("Configs.test.ichor.dev", "config", ConfigSpec)
GREETINGS = ResourceType("Greetings.test.ichor.dev", "runtime", GreetingSpec)
SHOUTS = ResourceType("Shouts.test.ichor.dev", "runtime", ShoutSpec)


def greetings_from_configs(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
    return {c.id: GreetingSpec(f"hello {c.spec.name}") for c in ctx.list(CONFIGS)}


def greeting_controller(map_inputs: Any = greetings_from_configs) -> TransformController[GreetingSpec]:
    return TransformController(
        "GreetingController", inputs=[Input(CONFIGS)], output=GREETINGS, map_inputs=map_inputs
    )


async def shouts_from_greetings(ctx: ControllerContext) -> Mapping[str, ShoutSpec]:
    return {g.id: ShoutSpec(g.spec.text.upper()) for g in ctx.list(GREETINGS)}


@contextlib.asynccontextmanager
async def running(runtime: Runtime) -> AsyncIterator[asyncio.Task[None]]:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(runtime.run())
        try:
            yield task
        finally:
            task.cancel()


def make(*controllers: Controller, **kw: Any) -> tuple[State, Runtime, FakeSleep, FakeClock]:
    clock = FakeClock()
    sleep = FakeSleep()
    state = State(clock=clock)
    runtime = Runtime(state, clock=clock, sleep=sleep, **kw)
    for c in controllers:
        runtime.register(c)
    return state, runtime, sleep, clock


def test_transform_inputs_in_outputs_out_and_stale_outputs_torn_down() -> None:
    state, runtime, _, _ = make(greeting_controller())

    async def main() -> None:
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            out = await assert_resource(state, GREETINGS, "a", lambda r: r.spec.text == "hello alice")
            assert out.metadata.owner == "GreetingController"
            state.create(CONFIGS.new("b", ConfigSpec("bob")))
            await assert_resource(state, GREETINGS, "b", lambda r: r.spec.text == "hello bob")
            cfg = state.get("config", CONFIGS, "a")
            state.update(cfg.with_spec(ConfigSpec("alicia")))
            updated = await assert_resource(state, GREETINGS, "a", lambda r: r.spec.text == "hello alicia")
            assert updated.metadata.version == 2
            state.destroy("config", CONFIGS, "a")
            await assert_no_resource(state, GREETINGS, "a")
            assert [r.id for r in state.list("runtime", GREETINGS)] == ["b"]

    run(main())


def test_unchanged_outputs_are_not_rewritten() -> None:
    passes = 0

    def mapper(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal passes
        passes += 1
        return {"fixed": GreetingSpec("same")}

    state, runtime, _, _ = make(greeting_controller(mapper))

    async def main() -> None:
        async with running(runtime):
            await assert_resource(state, GREETINGS, "fixed")
            state.create(CONFIGS.new("poke", ConfigSpec()))
            for _ in range(20):
                if passes >= 2:
                    break
                await asyncio.sleep(0)
            assert passes >= 2
            assert state.get("runtime", GREETINGS, "fixed").metadata.version == 1

    run(main())


def test_torn_down_output_held_by_finalizer_is_destroyed_when_released() -> None:
    state, runtime, _, _ = make(greeting_controller())

    async def main() -> None:
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            await assert_resource(state, GREETINGS, "a")
            state.add_finalizer("runtime", GREETINGS, "a", "SomeConsumer")
            state.destroy("config", CONFIGS, "a")
            await assert_resource(state, GREETINGS, "a", lambda r: r.metadata.phase is Phase.TEARING_DOWN)
            state.remove_finalizer("runtime", GREETINGS, "a", "SomeConsumer")
            await assert_no_resource(state, GREETINGS, "a")

    run(main())


def test_output_owned_by_someone_else_fails_the_controller() -> None:
    state, runtime, sleep, _ = make(greeting_controller())

    async def main() -> None:
        state.create(GREETINGS.new("a", GreetingSpec("mine")), owner="")
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            while not sleep.delays:
                await asyncio.sleep(0)
        status = runtime.status("GreetingController")
        assert status.last_error is not None and "OwnerConflictError" in status.last_error
        assert state.get("runtime", GREETINGS, "a").spec == GreetingSpec("mine")

    run(main())


def test_failing_controller_restarts_with_exponential_backoff() -> None:
    calls = 0

    def flaky(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal calls
        calls += 1
        if calls <= 4:
            raise RuntimeError(f"boom {calls}")
        return greetings_from_configs(ctx)

    state, runtime, sleep, clock = make(
        greeting_controller(flaky), backoff=Backoff(initial=1, factor=2, maximum=5)
    )

    async def main() -> None:
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            await assert_resource(state, GREETINGS, "a")
            assert sleep.delays == [1, 2, 4, 5]
            status = runtime.status("GreetingController")
            assert status.restarts == 4
            assert status.last_error == "RuntimeError: boom 4"
            assert status.last_error_at == clock.now
            # The next wake-up proves the pass completed; the backoff starts over.
            state.create(CONFIGS.new("b", ConfigSpec("bob")))
            await assert_resource(state, GREETINGS, "b")
            for _ in range(10):
                await asyncio.sleep(0)
            status = runtime.status("GreetingController")
            assert status.consecutive_failures == 0
            assert status.next_delay == 1
            assert status.running

    run(main())


def test_backoff_is_capped() -> None:
    backoff = Backoff(initial=0.5, factor=2, maximum=60)
    assert [backoff.delay(n) for n in (1, 2, 3, 8, 20)] == [0.5, 1, 2, 60, 60]


class RogueController(Controller):
    name = "RogueController"
    inputs = (Input(CONFIGS),)
    outputs = (Output(GREETINGS),)

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed()
            ctx.modify(SHOUTS, "x", ShoutSpec("not mine to write"))


def test_undeclared_output_write_is_refused_and_recorded() -> None:
    state, runtime, sleep, _ = make(RogueController())

    async def main() -> None:
        async with running(runtime):
            while not sleep.delays:
                await asyncio.sleep(0)
        status = runtime.status("RogueController")
        assert status.last_error is not None
        assert (
            'controller "RogueController" is not allowed to write resource type "Shouts.test.ichor.dev"'
            in (status.last_error)
        )
        assert state.list("runtime", SHOUTS) == []

    run(main())


def test_context_enforces_declarations() -> None:
    state = State()
    state.create(SHOUTS.new("s", ShoutSpec()))
    ctx = ControllerContext(RogueController(), state, asyncio.Event(), clock=FakeClock(), sleep=FakeSleep())
    with pytest.raises(OutputNotDeclaredError) as err:
        ctx.modify(SHOUTS, "x", ShoutSpec())
    assert err.value.hint and "outputs" in err.value.hint
    with pytest.raises(OutputNotDeclaredError):
        ctx.destroy(SHOUTS, "s")
    with pytest.raises(InputNotDeclaredError, match="not among its inputs"):
        ctx.get(SHOUTS, "s")
    with pytest.raises(InputNotDeclaredError):
        ctx.list(CONFIGS, namespace="elsewhere")
    assert [r.id for r in state.list("runtime", SHOUTS)] == ["s"]
    # Declared output of another owner: refused by the state's ownership rule.
    state.create(GREETINGS.new("g", GreetingSpec("user's")))
    with pytest.raises(OwnerConflictError):
        ctx.modify(GREETINGS, "g", GreetingSpec("controller's"))
    assert state.get("runtime", GREETINGS, "g").spec == GreetingSpec("user's")


def test_two_controller_chain_propagates_wakeups() -> None:
    shout = TransformController(
        "ShoutController", inputs=[Input(GREETINGS)], output=SHOUTS, map_inputs=shouts_from_greetings
    )
    state, runtime, _, _ = make(shout, greeting_controller())

    async def main() -> None:
        async with running(runtime):
            state.create(CONFIGS.new("a", ConfigSpec("alice")))
            await assert_resource(state, SHOUTS, "a", lambda r: r.spec.text == "HELLO ALICE")
            cfg = state.get("config", CONFIGS, "a")
            state.update(cfg.with_spec(ConfigSpec("bob")))
            await assert_resource(state, SHOUTS, "a", lambda r: r.spec.text == "HELLO BOB")
            state.destroy("config", CONFIGS, "a")
            await assert_no_resource(state, SHOUTS, "a")
            await assert_no_resource(state, GREETINGS, "a")

    run(main())


def test_bursts_of_changes_coalesce_into_few_passes() -> None:
    passes = 0

    def counting(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal passes
        passes += 1
        return greetings_from_configs(ctx)

    state, runtime, _, _ = make(greeting_controller(counting))

    async def main() -> None:
        async with running(runtime):
            while passes < 1:
                await asyncio.sleep(0)
            for i in range(50):
                state.create(CONFIGS.new(f"c{i:02d}", ConfigSpec(str(i))))
            await assert_resource(state, GREETINGS, "c49")
            assert len(state.list("runtime", GREETINGS)) == 50
            assert passes <= 3

    run(main())


def test_input_with_id_wakes_only_for_that_resource() -> None:
    passes = 0

    def one(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal passes
        passes += 1
        cfg = ctx.get_or_none(CONFIGS, "main")
        return {"main": GreetingSpec(cfg.spec.name)} if cfg else {}

    controller = TransformController(
        "MainGreetingController", inputs=[Input(CONFIGS, id="main")], output=GREETINGS, map_inputs=one
    )
    state, runtime, _, _ = make(controller)

    async def main() -> None:
        async with running(runtime):
            state.create(CONFIGS.new("main", ConfigSpec("m")))
            await assert_resource(state, GREETINGS, "main")
            before = passes
            for i in range(5):
                state.create(CONFIGS.new(f"other{i}", ConfigSpec()))
            for _ in range(20):
                await asyncio.sleep(0)
            assert passes == before

    run(main())


def test_waiting_publishes_wait_status_and_clears_it() -> None:
    def needs_name(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        cfg = ctx.get_or_none(CONFIGS, "a")
        if cfg is None or not cfg.spec.name:
            raise WaitingFor("Configs a", "no name configured yet")
        return {"a": GreetingSpec(cfg.spec.name)}

    state, runtime, _, clock = make(greeting_controller(needs_name))

    async def main() -> None:
        async with running(runtime):
            wait = await assert_resource(state, WAIT_STATUSES, "GreetingController")
            assert wait.spec.waiting_for == "Configs a"
            assert wait.spec.reason == "no name configured yet"
            assert wait.spec.since == clock.now
            assert wait.spec.next_retry is None
            assert wait.metadata.owner == "GreetingController"
            first_since = clock.now
            clock.now += timedelta(seconds=30)
            state.create(CONFIGS.new("a", ConfigSpec("")))
            await assert_resource(
                state, WAIT_STATUSES, "GreetingController", lambda r: r.metadata.version >= 1
            )
            # Same thing awaited: "since" keeps the first time it was noticed.
            assert state.get("runtime", WAIT_STATUSES, "GreetingController").spec.since == first_since
            assert state.list("runtime", GREETINGS) == []
            cfg = state.get("config", CONFIGS, "a")
            state.update(cfg.with_spec(ConfigSpec("alice")))
            await assert_resource(state, GREETINGS, "a")
            await assert_no_resource(state, WAIT_STATUSES, "GreetingController")

    run(main())


def test_waiting_with_retry_after_runs_again_without_input_change() -> None:
    calls = 0

    def eventually(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise WaitingFor("time", "warming up", retry_after=5)
        return {"done": GreetingSpec("ok")}

    state, runtime, sleep, _ = make(greeting_controller(eventually))

    async def main() -> None:
        async with running(runtime):
            await assert_resource(state, GREETINGS, "done")
            assert 5 in sleep.delays
            await assert_no_resource(state, WAIT_STATUSES, "GreetingController")

    run(main())


def test_skip_reconcile_keeps_outputs() -> None:
    skip = False

    def mapper(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        if skip:
            raise SkipReconcile
        return greetings_from_configs(ctx)

    state, runtime, _, _ = make(greeting_controller(mapper))

    async def main() -> None:
        nonlocal skip
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            await assert_resource(state, GREETINGS, "a")
            skip = True
            state.destroy("config", CONFIGS, "a")
            for _ in range(20):
                await asyncio.sleep(0)
            assert [r.id for r in state.list("runtime", GREETINGS)] == ["a"]

    run(main())


def test_registration_rules() -> None:
    runtime = Runtime(State())
    runtime.register(greeting_controller())
    with pytest.raises(RegistrationError, match="already registered"):
        runtime.register(greeting_controller())
    other = TransformController(
        "OtherGreetingController", inputs=[], output=GREETINGS, map_inputs=lambda ctx: {}
    )
    with pytest.raises(RegistrationError, match='controller "GreetingController" already does'):
        runtime.register(other)
    shared_a = TransformController(
        "SharedA", inputs=[], output=SHOUTS, map_inputs=lambda ctx: {}, output_kind=OutputKind.SHARED
    )
    shared_b = TransformController(
        "SharedB", inputs=[], output=SHOUTS, map_inputs=lambda ctx: {}, output_kind=OutputKind.SHARED
    )
    runtime.register(shared_a)
    runtime.register(shared_b)
    assert list(runtime.controllers) == ["GreetingController", "SharedA", "SharedB"]


def test_shutdown_cancels_everything_and_publishes_definitions() -> None:
    registry = Registry([CONFIGS, GREETINGS])
    state, runtime, _, _ = make(greeting_controller(), registry=registry)

    async def main() -> None:
        async with running(runtime) as task:
            await assert_resource(state, RESOURCE_DEFINITIONS, WAIT_STATUSES.type.lower())
            await assert_resource(
                state, RESOURCE_DEFINITIONS, GREETINGS.type.lower(), namespace=META_NAMESPACE
            )
        assert task.cancelled()
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == []
        assert not runtime.status("GreetingController").running

    run(main())


def test_assert_resource_times_out_with_last_seen_state() -> None:
    state = State()

    async def main() -> None:
        state.create(GREETINGS.new("a", GreetingSpec("x")))
        with pytest.raises(AssertionError, match=r"did not match within 0.02s: .*GreetingSpec\(text='x'\)"):
            await assert_resource(state, GREETINGS, "a", lambda r: r.spec.text == "y", timeout=0.02)
        with pytest.raises(AssertionError, match="it does not exist"):
            await assert_resource(state, GREETINGS, "b", timeout=0.02)
        with pytest.raises(AssertionError, match="still exists"):
            await assert_no_resource(state, GREETINGS, "a", timeout=0.02)

    run(main())


def test_modify_recreates_a_released_torn_down_output_and_refuses_a_held_one() -> None:
    state = State()
    ctx = ControllerContext(
        greeting_controller(), state, asyncio.Event(), clock=FakeClock(), sleep=FakeSleep()
    )
    first = ctx.modify(GREETINGS, "a", GreetingSpec("one"))
    assert first.metadata.owner == "GreetingController"
    assert (
        ctx.modify(GREETINGS, "a", lambda old: GreetingSpec(f"{old.text if old else ''}+")).spec.text
        == "one+"
    )
    ctx.teardown(GREETINGS, "a")
    again = ctx.modify(GREETINGS, "a", GreetingSpec("two"))
    assert (again.metadata.version, again.metadata.phase, again.spec.text) == (1, Phase.RUNNING, "two")
    state.add_finalizer("runtime", GREETINGS, "a", "Consumer")
    assert ctx.clean_up_outputs(GREETINGS, set()) == ["a"]
    with pytest.raises(PhaseConflictError):
        ctx.modify(GREETINGS, "a", GreetingSpec("three"))
    assert state.get("runtime", GREETINGS, "a").spec.text == "two"


def test_runtime_log_names_the_controller_when_it_starts_fails_and_restarts(tmp_path: Path) -> None:
    calls = 0

    def flaky(ctx: ControllerContext) -> Mapping[str, GreetingSpec]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("no greeting yet")
        ctx.logger.info("greeted", count=len(ctx.list(CONFIGS)))
        return greetings_from_configs(ctx)

    log_path = tmp_path / "var/log/controller-runtime.log"
    state, runtime, _, _ = make(greeting_controller(flaky), backoff=Backoff(initial=1.5), log_path=log_path)

    async def main() -> None:
        state.create(CONFIGS.new("a", ConfigSpec("alice")))
        async with running(runtime):
            await assert_resource(state, GREETINGS, "a")

    run(main())
    fields = '{"component": "controller-runtime", "controller": "GreetingController"'
    assert log_path.read_text().splitlines() == [
        f"2024-05-01T12:00:00.000Z DEBUG controller starting {fields}}}",
        f'2024-05-01T12:00:00.000Z ERROR controller failed {fields}, "error": "RuntimeError: no greeting yet"}}',
        f"2024-05-01T12:00:00.000Z DEBUG restarting controller in 1.5s {fields}}}",
        f"2024-05-01T12:00:00.000Z DEBUG controller starting {fields}}}",
        f'2024-05-01T12:00:00.000Z INFO greeted {fields}, "count": 1}}',
    ]


def test_a_controller_that_returns_is_logged_finished(tmp_path: Path) -> None:
    class OneShot(Controller):
        name = "v1alpha1.OneShotController"

        async def run(self, ctx: ControllerContext) -> None:
            ctx.logger.warning("nothing to do", reason="one shot")

    log_path = tmp_path / "controller-runtime.log"
    _, runtime, _, clock = make(OneShot(), log_path=log_path)
    clock.now = datetime(2024, 5, 1, 14, 0, 0, 7000, tzinfo=timezone(timedelta(hours=2)))

    async def main() -> None:
        async with running(runtime):
            while "finished" not in (log_path.read_text() if log_path.exists() else ""):
                await asyncio.sleep(0)

    run(main())
    assert log_path.read_text().splitlines()[1:] == [
        '2024-05-01T14:00:00.007+0200 WARN nothing to do {"component": "controller-runtime", '
        '"controller": "v1alpha1.OneShotController", "reason": "one shot"}',
        '2024-05-01T14:00:00.007+0200 DEBUG controller finished {"component": "controller-runtime", '
        '"controller": "v1alpha1.OneShotController"}',
    ]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.5, "500ms"), (1, "1s"), (1.5, "1.5s"), (60, "1m0s"), (90.25, "1m30.25s")]
)
def test_restart_delays_are_printed_as_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
