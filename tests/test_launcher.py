"""The launcher's restart loop (fake node, fake clocks: no sleeping), and what ``cluster show``
says about a node that keeps crashing (real launcher, real crashing machined, stopped by PID)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ichor.machined.platform import EXIT_POWEROFF, EXIT_REBOOT
from ichor.provision._record import POWERED_OFF, WAITING, LauncherState
from ichor.provision.launcher import REBOOT_PAUSE, Backoff, Launcher


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeNode:
    """A node that runs ``seconds`` of fake time, then exits with ``code``."""

    def __init__(self, clock: Clock, seconds: float, code: int, pid: int) -> None:
        self.clock, self.seconds, self.code, self.pid = clock, seconds, code, pid
        self.signals: list[int] = []

    def wait(self, timeout: float | None = None) -> int:
        self.clock.now += self.seconds
        return self.code

    def signal_group(self, sig: int) -> None:
        self.signals.append(sig)


def _launcher(tmp_path: Path, runs: list[tuple[float, int]], sleep=None) -> tuple[Launcher, Clock]:  # type: ignore[no-untyped-def]
    clock = Clock()
    nodes = iter(FakeNode(clock, seconds, code, pid=100 + i) for i, (seconds, code) in enumerate(runs))

    def advance(seconds: float) -> None:
        clock.now += seconds

    launcher = Launcher(lambda: next(nodes), tmp_path / "state.json", tmp_path / "node.log", clock=clock,
                        wall=clock, sleep=sleep or advance, pid=42)  # fmt: skip
    return launcher, clock


def test_backoff_doubles_per_crash_in_a_row_and_starts_over_after_a_healthy_run() -> None:
    backoff = Backoff(first=1.0, limit=30.0, healthy_run=60.0)
    assert [backoff.after_crash(ran_for=0.5) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.after_crash(ran_for=60.0) == 1 and backoff.crashes == 1
    assert backoff.after_crash(ran_for=59.0) == 2
    backoff.reset()
    assert backoff.after_crash(ran_for=0.1) == 1


def test_a_node_that_ran_healthy_restarts_after_the_first_pause_again(tmp_path: Path) -> None:
    runs = [(0.1, 1), (0.1, 1), (0.1, 1), (600.0, 1), (0.1, 1), (0.1, EXIT_REBOOT), (0.1, 1),
            (0.1, EXIT_POWEROFF)]  # fmt: skip
    launcher, _ = _launcher(tmp_path, runs)
    assert launcher.run() == 0
    pauses = [line.rsplit(" ", 1)[-1] for line in (tmp_path / "node.log").read_text().splitlines()]
    # 1, 2, 4; a 10-minute run ends the row: 1, 2; a reboot is no crash and ends it too: 1.
    assert pauses == ["1.0s", "2.0s", "4.0s", "1.0s", "2.0s", "1.0s"]
    final = LauncherState.read(tmp_path / "state.json")
    assert final is not None and final.state == POWERED_OFF and final.last_exit == EXIT_POWEROFF


def test_while_it_waits_the_state_file_says_until_when(tmp_path: Path) -> None:
    seen: list[LauncherState | None] = []
    launcher, clock = _launcher(tmp_path, [(5.0, 3), (5.0, 3), (0.1, EXIT_POWEROFF)])

    def sleep(seconds: float) -> None:
        seen.append(LauncherState.read(tmp_path / "state.json"))
        clock.now += seconds

    launcher.sleep = sleep
    launcher.run()
    first = seen[0]
    assert first == LauncherState(launcher_pid=42, state=WAITING, node_pid=0, crashes=1, last_exit=3,
                                  restart_at=1000.0 + 5.0 + 1.0)  # fmt: skip
    assert seen[-1] is not None and seen[-1].crashes == 2
    assert seen[-1].restart_at == pytest.approx(1000.0 + 5 + 1 + 5 + 2)


def test_sigterm_during_the_pause_powers_off_without_waiting_it_out(tmp_path: Path) -> None:
    launcher, clock = _launcher(tmp_path, [(0.1, 1)] * 20)
    for _ in range(4):  # reach a 16 s pause
        launcher.backoff.after_crash(0.0)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds
        launcher.stop()  # SIGTERM arrives during the first step of the pause

    launcher.sleep = sleep
    assert launcher.run() == 0
    assert len(slept) == 1 and slept[0] <= 0.2
    final = LauncherState.read(tmp_path / "state.json")
    assert final is not None and final.state == POWERED_OFF


def test_a_stop_while_the_node_starts_reaches_the_node(tmp_path: Path) -> None:
    clock = Clock()
    node = FakeNode(clock, 0.1, EXIT_POWEROFF, pid=7)
    launcher = Launcher(lambda: node, None, tmp_path / "node.log", clock=clock, sleep=lambda _: None)

    def start() -> FakeNode:
        launcher.stop()  # the signal lands between the loop's check and the start
        return node

    launcher.start_node = start
    launcher.run()
    assert node.signals == [signal.SIGTERM]


@pytest.mark.parametrize(
    "text", ["", "[1, 2]", '{"launcher_pid": 1}', '{"launcher_pid": 1, "state": "x", "bad": 2}']
)
def test_an_unreadable_state_file_is_no_state(tmp_path: Path, text: str) -> None:
    (tmp_path / "s.json").write_text(text)
    assert LauncherState.read(tmp_path / "s.json") is None
    assert LauncherState.read(tmp_path / "missing.json") is None


def test_a_rebooting_node_stays_down_as_a_machine_does_before_it_starts_again(tmp_path: Path) -> None:
    """Talos's ``reboot --wait`` watches events again 1 s after the services stop: a node back by
    then is never seen going down. The launcher keeps it down REBOOT_PAUSE (2 s), saying until when."""
    launcher, clock = _launcher(tmp_path, [(0.5, EXIT_REBOOT), (0.5, EXIT_POWEROFF)])
    started: list[float] = []
    start = launcher.start_node
    launcher.start_node = lambda: (started.append(clock.now), start())[1]  # type: ignore[method-assign]
    seen: list[LauncherState | None] = []
    record = launcher._record

    def spy(state: str, last_exit: int | None, restart_at: float = 0.0) -> None:
        record(state, last_exit, restart_at)
        seen.append(LauncherState.read(tmp_path / "state.json"))

    launcher._record = spy  # type: ignore[method-assign]
    assert launcher.run() == 0
    assert REBOOT_PAUSE == 2.0 and started[1] - started[0] >= 0.5 + REBOOT_PAUSE
    waiting = [s for s in seen if s is not None and s.state == WAITING]
    assert (
        len(waiting) == 1
        and waiting[0].last_exit == EXIT_REBOOT
        and waiting[0].restart_at == started[0] + 0.5 + REBOOT_PAUSE
    )
    assert not (tmp_path / "node.log").exists()  # a reboot is no crash: nothing logged
