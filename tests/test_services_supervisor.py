"""Service supervisor with goroutine runners: Talos's states, wait texts, health, restarts, stop order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest
from clock_helpers import FakeClock

from ichor.machined.platform import Layout
from ichor.machined.services import (
    MAX_EVENTS_TO_KEEP,
    NETWORK,
    TIME_SYNC,
    HealthCheck,
    RestartPolicy,
    RunContext,
    Runner,
    Service,
    ServiceEvent,
    ServiceInfo,
    ServiceLoadError,
    ServiceState,
    Supervisor,
    UnknownServiceError,
    WaitTimeoutError,
    event_is_set,
    file_exists,
    goroutine,
)

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


class FakeSleep:
    """Records restart delays and returns at once; ``block_from`` makes the n-th and later calls hang."""

    def __init__(self, block_from: int | None = None) -> None:
        self.delays: list[float] = []
        self.block_from = block_from

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.block_from is not None and len(self.delays) >= self.block_from:
            await asyncio.Event().wait()
        await asyncio.sleep(0)


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def forever(log: IO[str]) -> None:
    await asyncio.Event().wait()


def messages(sup: Supervisor, service_id: str) -> list[str]:
    return [e.message for e in sup.info(service_id).events]


def states(sup: Supervisor, service_id: str) -> list[ServiceState]:
    return [e.state for e in sup.info(service_id).events]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(root=tmp_path / "node", address="127.0.0.2")


def test_state_numbers_are_talos_proto_values() -> None:
    assert [(s.name, int(s)) for s in ServiceState] == [
        ("INITIALIZED", 0),
        ("PREPARING", 1),
        ("WAITING", 2),
        ("RUNNING", 3),
        ("STOPPING", 4),
        ("FINISHED", 5),
        ("FAILED", 6),
        ("SKIPPED", 7),
        ("STARTING", 8),
    ]
    assert str(ServiceState.RUNNING) == "Running"
    assert MAX_EVENTS_TO_KEEP == 64


def test_waits_list_unmet_parts_and_shrink_as_they_are_met(layout: Layout) -> None:
    clock = FakeClock()

    async def main() -> None:
        time_sync, network = asyncio.Event(), asyncio.Event()
        async with Supervisor(layout, clock=clock) as sup:
            sup.load(
                Service("cri", goroutine(forever)),
                Service(
                    "kubelet",
                    goroutine(forever),
                    depends_on=("cri",),
                    conditions=(event_is_set(time_sync, TIME_SYNC), event_is_set(network, NETWORK)),
                ),
            )
            sup.start("kubelet")
            await until(lambda: sup.info("kubelet").state is ServiceState.WAITING)
            info = sup.info("kubelet")
            assert info.waiting_for == 'service "cri" to be "up", time sync, network'
            assert info.waiting_since == clock.now
            entered = clock.now

            clock.advance(3)
            time_sync.set()
            await until(
                lambda: messages(sup, "kubelet")[-1] == 'Waiting for service "cri" to be "up", network'
            )
            # Shrinking is still the same wait: since-when does not move.
            assert sup.info("kubelet").waiting_since == entered

            clock.advance(3)
            sup.start("cri")
            await until(lambda: messages(sup, "kubelet")[-1] == "Waiting for network")
            assert sup.info("kubelet").waiting_for == "network"

            network.set()
            await until(lambda: sup.info("kubelet").state is ServiceState.RUNNING)
            info = sup.info("kubelet")
            assert info.waiting_for is None and info.waiting_since is None
            assert info.up and info.running
            assert messages(sup, "kubelet") == [
                "Starting service",
                'Waiting for service "cri" to be "up", time sync, network',
                'Waiting for service "cri" to be "up", network',
                "Waiting for network",
                "Running pre state",
                "Creating service runner",
                "Service started as goroutine",
            ]
            assert states(sup, "kubelet") == [
                ServiceState.STARTING,
                ServiceState.WAITING,
                ServiceState.WAITING,
                ServiceState.WAITING,
                ServiceState.PREPARING,
                ServiceState.PREPARING,
                ServiceState.RUNNING,
            ]
            # A service without dependencies goes straight to Preparing.
            assert messages(sup, "cri")[:3] == [
                "Starting service",
                "Running pre state",
                "Creating service runner",
            ]

    run(main())


def test_dependency_not_loaded_reads_registered_until_loaded(layout: Layout) -> None:
    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(Service("trustd", goroutine(forever), depends_on=("containerd",)))
            sup.start("trustd")
            await until(lambda: sup.info("trustd").state is ServiceState.WAITING)
            assert messages(sup, "trustd")[-1] == 'Waiting for service "containerd" to be registered'
            sup.load(Service("containerd", goroutine(forever)))
            await until(lambda: messages(sup, "trustd")[-1] == 'Waiting for service "containerd" to be "up"')
            sup.start("containerd")
            await until(lambda: sup.info("trustd").up)

    run(main())


def test_file_condition_text_and_wait(layout: Layout, tmp_path: Path) -> None:
    socket = tmp_path / "machine.sock"

    async def main() -> None:
        async with Supervisor(layout) as sup:
            condition = file_exists(socket, display="/system/run/machined/machine.sock", poll_interval=0.01)
            sup.load(Service("dashboard", goroutine(forever), conditions=(condition,)))
            sup.start("dashboard")
            await until(lambda: sup.info("dashboard").state is ServiceState.WAITING)
            assert messages(sup, "dashboard")[-1] == (
                'Waiting for file "/system/run/machined/machine.sock" to exist'
            )
            socket.touch()
            await until(lambda: sup.info("dashboard").state is ServiceState.RUNNING)

    run(main())


def test_health_check_transitions_and_up(layout: Layout) -> None:
    clock = FakeClock()
    healthy = {"ok": True}

    async def probe() -> None:
        if not healthy["ok"]:
            raise ConnectionRefusedError("dial tcp 127.0.0.2:50000: connection refused")

    first_check = asyncio.Event()

    async def sleep(seconds: float) -> None:
        # The initial delay lasts until the test lets it end; periods are short real sleeps.
        if seconds == 0.5:
            await first_check.wait()
        else:
            await asyncio.sleep(0.01)

    async def main() -> None:
        async with Supervisor(layout, clock=clock, sleep=sleep) as sup:
            check = HealthCheck(probe)
            sup.load(
                Service("apid", goroutine(forever), health_check=check),
                Service("needs-apid", goroutine(forever), depends_on=("apid",)),
            )
            sup.start("apid", "needs-apid")
            await until(lambda: sup.info("apid").state is ServiceState.RUNNING)
            info = sup.info("apid")
            # Running but not yet checked: health unknown, not up, dependents keep waiting.
            assert info.health.unknown and info.health.last_message == "Unknown"
            assert info.health.last_change == clock.now
            assert not info.up
            await asyncio.sleep(0.05)
            assert sup.info("needs-apid").state is ServiceState.WAITING
            first_check.set()
            await until(lambda: sup.info("apid").up)
            await until(lambda: sup.info("needs-apid").state is ServiceState.RUNNING)
            assert messages(sup, "apid")[-1] == "Health check successful"
            assert sup.info("apid").health.healthy is True

            clock.advance(10)
            healthy["ok"] = False
            await until(lambda: not sup.info("apid").up)
            health = sup.info("apid").health
            assert health.healthy is False
            assert health.last_change == clock.now
            assert health.last_message == "dial tcp 127.0.0.2:50000: connection refused"
            assert messages(sup, "apid")[-1] == (
                "Health check failed: dial tcp 127.0.0.2:50000: connection refused"
            )
            event = sup.info("apid").events[-1]
            assert event.state is ServiceState.RUNNING and event.health.healthy is False

            healthy["ok"] = True
            await until(lambda: sup.info("apid").up)
            # Only changes are events: one success, one failure, one success.
            health_events = [m for m in messages(sup, "apid") if m.startswith("Health check")]
            assert health_events == [
                "Health check successful",
                "Health check failed: dial tcp 127.0.0.2:50000: connection refused",
                "Health check successful",
            ]

    run(main())


def test_health_is_probed_at_the_startup_period_until_the_first_pass(layout: Layout) -> None:
    results = iter([False, False, True, True, False])
    delays: list[float] = []

    async def probe() -> None:
        if not next(results, True):
            raise RuntimeError("not yet")

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            check = HealthCheck(probe, initial_delay=1.0, period=5.0, startup_period=0.5)
            sup.load(Service("etcd", goroutine(forever), health_check=check))
            sup.start("etcd")
            await until(lambda: len(delays) >= 6)

    run(main())
    # initial delay, two failing checks at the startup period, then the period: also after a failure.
    assert delays[:6] == [1.0, 0.5, 0.5, 5.0, 5.0, 5.0]


def test_a_stop_with_a_reason_during_pre_finishes_the_service_with_that_reason(layout: Layout) -> None:
    in_pre = asyncio.Event()

    async def pre() -> None:
        in_pre.set()
        await asyncio.Event().wait()  # joining etcd, until bootstrap stops it

    async def main() -> tuple[Any, Any]:
        async with Supervisor(layout) as sup:
            sup.load(
                Service("etcd", goroutine(forever), pre=pre), Service("other", goroutine(forever), pre=pre)
            )
            sup.start("etcd", "other")
            await asyncio.wait_for(in_pre.wait(), 5)
            await until(lambda: sup.info("other").state is ServiceState.PREPARING)
            await sup.stop("etcd", reason="Bootstrap requested")
            await sup.stop("other")
            return sup.info("etcd"), sup.info("other")

    etcd, other = run(main())
    assert etcd.state is ServiceState.FINISHED and etcd.events[-1].message == "Bootstrap requested"
    assert other.state is ServiceState.FAILED
    assert other.events[-1].message == "Failed to run pre stage: context canceled"


def test_health_check_timeout_reads_like_go(layout: Layout) -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(Service("slow", goroutine(forever), health_check=HealthCheck(hang, 0, 0.01, 0.05)))
            sup.start("slow")
            await until(lambda: sup.info("slow").health.healthy is False)
            assert messages(sup, "slow")[-1] == "Health check failed: context deadline exceeded"

    run(main())


def test_forever_restarts_after_errors_with_the_restart_delay(layout: Layout) -> None:
    sleep = FakeSleep()
    runs: list[int] = []

    async def flaky(log: IO[str]) -> None:
        runs.append(1)
        log.write(f"run {len(runs)}\n")
        if len(runs) >= 4:
            await asyncio.Event().wait()
        raise RuntimeError("listen tcp: address already in use")

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            sup.load(Service("trustd", goroutine(flaky)))
            sup.start("trustd")
            await until(lambda: len(runs) == 4 and sup.info("trustd").state is ServiceState.RUNNING)
            restart = 'Error running Goroutine("trustd"), going to restart forever: listen tcp: address already in use'
            assert messages(sup, "trustd").count(restart) == 3
            assert messages(sup, "trustd").count("Service started as goroutine") == 4
            waits = [e for e in sup.info("trustd").events if e.message == restart]
            assert all(e.state is ServiceState.WAITING for e in waits)
            assert sleep.delays == [5.0, 5.0, 5.0]
        assert (layout.log_dir / "trustd.log").read_text() == "run 1\nrun 2\nrun 3\nrun 4\n"

    run(main())


def test_forever_restarts_a_clean_exit(layout: Layout) -> None:
    sleep = FakeSleep(block_from=2)

    async def quick(log: IO[str]) -> None:
        return None

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            sup.load(Service("syslogd", goroutine(quick), restart_delay=0.25))
            sup.start("syslogd")
            await until(lambda: len(sleep.delays) == 2)
            assert 'Runner Goroutine("syslogd") exited without error, going to restart it' in messages(
                sup, "syslogd"
            )
            assert sleep.delays == [0.25, 0.25]
            info = sup.info("syslogd")
            assert info.state is ServiceState.WAITING and info.waiting_for == "restart"
            # Stopping during the restart delay aborts the sequence and finishes cleanly.
            await sup.stop("syslogd")
            assert messages(sup, "syslogd")[-2:] == [
                "Aborting restart sequence",
                "Service finished successfully",
            ]
            assert states(sup, "syslogd")[-2:] == [ServiceState.STOPPING, ServiceState.FINISHED]

    run(main())


def test_once_failure_is_failed_with_talos_wrapping(layout: Layout) -> None:
    async def broken(log: IO[str]) -> None:
        raise RuntimeError("bad config")

    async def fine(log: IO[str]) -> None:
        return None

    async def main() -> None:
        async with Supervisor(layout, sleep=FakeSleep()) as sup:
            sup.load(
                Service("one", goroutine(broken), restart=RestartPolicy.ONCE),
                Service("two", goroutine(fine), restart=RestartPolicy.ONCE),
            )
            sup.start("one", "two")
            await until(lambda: not sup.is_running("one") and not sup.is_running("two"))
            one, two = sup.info("one"), sup.info("two")
            assert one.state is ServiceState.FAILED
            assert one.events[-1].message == "Failed running service: error running service: bad config"
            assert not one.up
            assert two.state is ServiceState.FINISHED and two.up
            assert two.events[-1].message == "Service finished successfully"

    run(main())


def test_until_success_restarts_only_failures(layout: Layout) -> None:
    sleep = FakeSleep()
    attempts: list[int] = []

    async def eventually(log: IO[str]) -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise OSError("not yet")

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            sup.load(Service("ext-setup", goroutine(eventually), restart=RestartPolicy.UNTIL_SUCCESS))
            sup.start("ext-setup")
            await until(lambda: not sup.is_running("ext-setup"))
            text = 'Error running Goroutine("ext-setup"), going to restart until it succeeds: not yet'
            assert messages(sup, "ext-setup").count(text) == 2
            assert sup.info("ext-setup").state is ServiceState.FINISHED
            assert len(attempts) == 3 and sleep.delays == [5.0, 5.0]

    run(main())


def test_history_keeps_64_events(layout: Layout) -> None:
    sleep = FakeSleep(block_from=60)

    async def quick(log: IO[str]) -> None:
        return None

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            sup.load(Service("spin", goroutine(quick)))
            sup.start("spin")
            await until(lambda: len(sleep.delays) == 60)
            events = sup.info("spin").events
            assert len(events) == 64
            # The oldest were dropped: the first event kept is no longer "Starting service".
            assert events[0].message != "Starting service"
            assert events[-1].message.startswith('Runner Goroutine("spin") exited without error')

    run(main())


def test_skip_pre_failure_runner_failure_and_stop_while_waiting(layout: Layout) -> None:
    async def bad_pre() -> None:
        raise ValueError("cannot mount /var")

    def no_runner(context: RunContext) -> Runner | None:
        return None

    def broken_factory(context: RunContext) -> Runner | None:
        raise OSError("image not found")

    async def main() -> None:
        never = asyncio.Event()
        async with Supervisor(layout) as sup:
            sup.load(
                Service("skipped", no_runner),
                Service("pre", goroutine(forever), pre=bad_pre),
                Service("factory", broken_factory),
                Service("waiter", goroutine(forever), conditions=(event_is_set(never, NETWORK),)),
            )
            sup.start("skipped", "pre", "factory", "waiter")
            await until(lambda: not any(sup.is_running(i) for i in ("skipped", "pre", "factory")))
            assert messages(sup, "skipped")[-1] == "Service skipped"
            assert sup.info("skipped").state is ServiceState.SKIPPED and sup.info("skipped").up
            assert messages(sup, "pre")[-1] == "Failed to run pre stage: cannot mount /var"
            assert messages(sup, "factory")[-1] == "Failed to create runner: image not found"
            await until(lambda: sup.info("waiter").state is ServiceState.WAITING)
            await sup.stop("waiter")
            assert messages(sup, "waiter")[-1] == "Condition failed: context canceled"
            assert sup.info("waiter").state is ServiceState.FAILED

    run(main())


def test_stop_all_stops_dependents_first(layout: Layout) -> None:
    stopped: list[str] = []

    def tracked(name: str) -> Callable[[IO[str]], Coroutine[Any, Any, None]]:
        async def main(log: IO[str]) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                # Give a wrongly ordered stop the chance to overtake us.
                stopped.append(name)

        return main

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(
                Service("kubelet", goroutine(tracked("kubelet")), depends_on=("cri",)),
                Service("containerd", goroutine(tracked("containerd"))),
                Service("cri", goroutine(tracked("cri")), depends_on=("containerd",)),
                Service("apid", goroutine(tracked("apid")), depends_on=("containerd",)),
                Service("idle", goroutine(tracked("idle")), depends_on=("containerd",)),
            )
            sup.start("kubelet", "containerd", "cri", "apid")
            await sup.wait_up(["kubelet", "containerd", "cri", "apid"], timeout=5)
            await sup.stop_all()
            assert all(not i.running for i in sup.list())
            assert all(sup.info(i).state is ServiceState.FINISHED for i in ("kubelet", "cri", "apid"))
        assert stopped.index("kubelet") < stopped.index("cri") < stopped.index("containerd")
        assert stopped.index("apid") < stopped.index("containerd")
        assert "idle" not in stopped

    run(main())


def test_stop_all_leaves_the_kept_services_and_their_dependencies_running(layout: Layout) -> None:
    async def forever(_log: IO[str]) -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(
                Service("machined", goroutine(forever)),
                Service("apid", goroutine(forever), depends_on=("machined",)),
                Service("kubelet", goroutine(forever), depends_on=("machined",)),
            )
            sup.start("machined", "apid", "kubelet")
            await sup.wait_up(["machined", "apid", "kubelet"], timeout=5)
            await asyncio.wait_for(sup.stop_all(keep=("apid", "machined")), 5)
            assert sup.is_running("apid") and sup.is_running("machined")
            assert sup.info("kubelet").state is ServiceState.FINISHED

    run(main())


def test_leaving_the_supervisor_stops_everything(layout: Layout) -> None:
    async def main() -> Supervisor:
        async with Supervisor(layout) as sup:
            sup.load(Service("a", goroutine(forever)), Service("b", goroutine(forever), depends_on=("a",)))
            sup.start_all()
            await sup.wait_up(["a", "b"], timeout=5)
        return sup

    sup = run(main())
    assert [(i.id, i.state, i.running) for i in sup.list()] == [
        ("a", ServiceState.FINISHED, False),
        ("b", ServiceState.FINISHED, False),
    ]


def test_wait_up_timeout_says_what_each_service_is_doing(layout: Layout) -> None:
    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(
                Service("etcd", goroutine(forever), conditions=(event_is_set(asyncio.Event(), TIME_SYNC),))
            )
            sup.start("etcd")
            with pytest.raises(WaitTimeoutError) as info:
                await sup.wait_up(["etcd"], timeout=0.2)
            assert str(info.value) == (
                'timed out after 0.2 s waiting for services to be up: service "etcd" is Waiting: '
                "Waiting for time sync"
            )
            assert info.value.hint is not None
            with pytest.raises(UnknownServiceError, match='service "nope" not defined'):
                await sup.wait_up(["nope"], timeout=1)

    run(main())


def test_restart_and_start_of_running_service(layout: Layout) -> None:
    starts: list[int] = []

    async def counted(log: IO[str]) -> None:
        starts.append(1)
        await asyncio.Event().wait()

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(Service("kubelet", goroutine(counted)))
            sup.start("kubelet")
            await sup.wait_up(["kubelet"], timeout=5)
            sup.start("kubelet")  # already running: nothing happens
            await asyncio.sleep(0.05)
            assert len(starts) == 1
            await sup.restart("kubelet")
            await sup.wait_up(["kubelet"], timeout=5)
            await until(lambda: len(starts) == 2)
            assert messages(sup, "kubelet").count("Service finished successfully") == 1
            assert messages(sup, "kubelet").count("Starting service") == 2

    run(main())


def test_subscribe_and_on_change_hook(layout: Layout) -> None:
    seen: list[ServiceInfo] = []

    async def main() -> list[ServiceEvent]:
        async with Supervisor(layout, on_change=seen.append) as sup:
            sup.load(Service("machined", goroutine(forever)))
            received: list[ServiceEvent] = []
            async with sup.subscribe() as events:
                sup.start("machined")
                async for event in events:
                    received.append(event)
                    if event.state is ServiceState.RUNNING:
                        break
            assert not sup._subscribers
            return received

    received = run(main())
    assert [(e.service, e.state, e.message) for e in received] == [
        ("machined", ServiceState.STARTING, "Starting service"),
        ("machined", ServiceState.PREPARING, "Running pre state"),
        ("machined", ServiceState.PREPARING, "Creating service runner"),
        ("machined", ServiceState.RUNNING, "Service started as goroutine"),
    ]
    assert [i.state for i in seen][:4] == [e.state for e in received]
    assert seen[3].running and seen[3].up
    assert seen[-1].state is ServiceState.FINISHED


def test_unknown_service_and_bad_definitions(layout: Layout) -> None:
    async def main() -> None:
        async with Supervisor(layout) as sup:
            with pytest.raises(UnknownServiceError) as info:
                sup.start("etcd")
            assert str(info.value) == 'service "etcd" not defined'
            with pytest.raises(UnknownServiceError):
                await sup.stop("etcd")
            with pytest.raises(UnknownServiceError):
                sup.info("etcd")

    run(main())
    with pytest.raises(ServiceLoadError, match="invalid service id"):
        Service("Bad Id", goroutine(forever))
    with pytest.raises(ServiceLoadError, match="cannot depend on itself"):
        Service("loop", goroutine(forever), depends_on=("loop",))


def test_load_keeps_the_first_definition(layout: Layout) -> None:
    async def other(log: IO[str]) -> None:
        return None

    sup = Supervisor(layout)
    first = Service("apid", goroutine(forever), description="first")
    assert sup.load(first, Service("apid", goroutine(other), description="second")) == ["apid", "apid"]
    assert [(i.id, i.description, i.state) for i in sup.list()] == [
        ("apid", "first", ServiceState.INITIALIZED)
    ]


def test_a_process_node_shows_both_containerd_services_skipped_with_the_reason(layout: Layout) -> None:
    from ichor.machined.services.containerd import PROCESS_NODE_REASON, containerd_services

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(*containerd_services(layout))
            sup.start("containerd", "cri")
            await until(lambda: all(sup.info(i).state is ServiceState.SKIPPED for i in ("containerd", "cri")))
            for service in ("containerd", "cri"):
                assert messages(sup, service)[-1] == f"Service skipped: {PROCESS_NODE_REASON}"
                assert not sup.is_running(service)
            assert not layout.path("/run/containerd").exists()  # nothing was started or written

    run(main())
