"""Process runner under the supervisor with real Python children: logs, follow, SIGTERM, SIGKILL.

Every PID a test sees is SIGKILLed at the end (also on failure), and each test checks by PID that
nothing it started is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ichor.machined.platform import Layout
from ichor.machined.services import (
    ProcessRunner,
    RestartPolicy,
    Service,
    ServiceState,
    Supervisor,
    process,
)
from ichor.machinery.proc import pid_alive

PY = sys.executable
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(root=tmp_path / "node", address="127.0.0.2")


@pytest.fixture
def pids() -> Iterator[list[int]]:
    seen: list[int] = []
    yield seen
    for pid in seen:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)


async def until(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not pid_alive(pid)


def child_pid(sup: Supervisor, service_id: str, pids: list[int]) -> int:
    runner = sup.runner(service_id)
    assert isinstance(runner, ProcessRunner) and runner.process is not None
    pids.append(runner.process.pid)
    return runner.process.pid


TICKER = """
import signal, sys, time
def term(*_):
    print("got SIGTERM, bye", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", file=sys.stderr, flush=True)
for i in range(1, 100000):
    print(f"tick {i}", flush=True)
    time.sleep(0.05)
"""

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
print(f"child {child.pid}", flush=True)
time.sleep(120)
"""


def test_process_logs_tail_follow_and_sigterm(layout: Layout, pids: list[int]) -> None:
    async def main() -> tuple[int, list[str]]:
        async with Supervisor(layout) as sup:
            sup.load(Service("ticker", process([PY, "-c", TICKER])))
            sup.start("ticker")
            await until(lambda: sup.info("ticker").state is ServiceState.RUNNING)
            pid = child_pid(sup, "ticker", pids)
            started = sup.info("ticker").events[-1]
            assert started.message == f'Process Process(["{PY}" "-c" {_go(TICKER)}]) started with PID {pid}'

            log = layout.log_dir / "ticker.log"
            await until(lambda: log.exists() and log.read_text().count("tick") >= 4)
            # stdout and stderr both land in <log dir>/<id>.log
            assert "ready\n" in log.read_text()

            tail = [line async for line in sup.follow_log("ticker", tail=2)]
            assert len(tail) == 2 and all(line.startswith(b"tick ") for line in tail)
            last_seen = int(tail[-1].split()[1])

            followed: list[bytes] = []
            async for line in sup.follow_log("ticker", tail=1, follow=True, poll_interval=0.02):
                followed.append(line)
                if len(followed) == 4:
                    break
            numbers = [int(line.split()[1]) for line in followed]
            assert numbers[0] >= last_seen
            assert numbers == list(range(numbers[0], numbers[0] + 4))

            await sup.stop("ticker")
            events = [e.message for e in sup.info("ticker").events]
            runner_name = f'Process(["{PY}" "-c" {_go(TICKER)}])'
            assert events[-2:] == [f"Sending SIGTERM to {runner_name}", "Service finished successfully"]
            assert not any("SIGKILL" in m for m in events)
            return pid, log.read_text().splitlines()

    pid, lines = run(main())
    assert lines[-1] == "got SIGTERM, bye"
    assert gone(pid)


def test_sigterm_ignored_means_sigkill_after_stop_timeout(layout: Layout, pids: list[int]) -> None:
    async def main() -> tuple[list[int], float]:
        async with Supervisor(layout) as sup:
            sup.load(Service("stubborn", process([PY, "-c", STUBBORN]), stop_timeout=0.5))
            sup.start("stubborn")
            await until(lambda: sup.info("stubborn").state is ServiceState.RUNNING)
            leader = child_pid(sup, "stubborn", pids)
            log = layout.log_dir / "stubborn.log"
            await until(lambda: log.exists() and "child " in log.read_text())
            grandchild = int(log.read_text().split()[1])
            pids.append(grandchild)
            runner = sup.runner("stubborn")
            assert isinstance(runner, ProcessRunner)
            assert runner.pids == sorted([leader, grandchild])

            began = time.monotonic()
            await sup.stop("stubborn")
            took = time.monotonic() - began
            messages = [e.message for e in sup.info("stubborn").events]
            assert [m.split(" to ")[0] for m in messages[-3:]] == [
                "Sending SIGTERM",
                "Sending SIGKILL",
                "Service finished successfully",
            ]
            return [leader, grandchild], took

    members, took = run(main())
    assert 0.4 < took < 5
    for pid in members:
        assert gone(pid), f"PID {pid} left behind"


def test_failed_process_exit_status_and_restart_forever(layout: Layout, pids: list[int]) -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    script = "import sys; print('cannot bind', file=sys.stderr); sys.exit(2)"

    async def main() -> None:
        async with Supervisor(layout, sleep=sleep) as sup:
            sup.load(
                Service("once", process([PY, "-c", script]), restart=RestartPolicy.ONCE),
                Service("again", process([PY, "-c", script])),
            )
            sup.start("once", "again")
            await until(lambda: not sup.is_running("once"))
            assert sup.info("once").events[-1].message == (
                "Failed running service: error running service: exit status 2"
            )
            await until(lambda: len(delays) >= 2)
            name = f'Process(["{PY}" "-c" {_go(script)}])'
            assert f"Error running {name}, going to restart forever: exit status 2" in [
                e.message for e in sup.info("again").events
            ]
            await sup.stop("again")
            assert "cannot bind\n" in (layout.log_dir / "once.log").read_text()

    run(main())


def test_missing_program_fails_the_service(layout: Layout, tmp_path: Path) -> None:
    async def main() -> str:
        async with Supervisor(layout) as sup:
            sup.load(Service("ghost", process([str(tmp_path / "nope")]), restart=RestartPolicy.ONCE))
            sup.start("ghost")
            await until(lambda: not sup.is_running("ghost"))
            return sup.info("ghost").events[-1].message

    message = run(main())
    assert message.startswith(
        "Failed running service: error running service: error starting process: cannot start"
    )


def test_follow_log_of_service_without_log_yet(layout: Layout) -> None:
    async def main() -> list[bytes]:
        sup = Supervisor(layout)
        sup.load(Service("quiet", process([PY, "-c", "pass"])))
        return [line async for line in sup.follow_log("quiet", tail=10)]

    assert run(main()) == []


def _go(text: str) -> str:
    from ichor.machinery.goquote import quote

    return quote(text)
