"""machined's idle heap trim and its opt-in tracemalloc dump (ichor.machined.memory)."""

from __future__ import annotations

import os
import signal
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machined.memory import TRACEMALLOC_ENV, IdleTrimmer, glibc_trim, start_tracemalloc_from_env


class _Clocks:
    """A wall clock and a CPU clock the test advances by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def spend(self, seconds: float, cpu_share: float) -> None:
        self.now += seconds
        self.cpu += seconds * cpu_share


def _trimmer(clocks: _Clocks, trims: list[int]) -> IdleTrimmer:
    def trim() -> int:
        trims.append(1)
        return 1

    return IdleTrimmer(trim, window=5.0, idle_share=0.05, cpu=lambda: clocks.cpu, clock=lambda: clocks.now)


def test_trims_once_when_the_node_goes_idle_after_load() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    clocks.spend(5, 0.9)  # under load: never trimmed while calls are being served
    assert trimmer.tick() is False
    clocks.spend(5, 0.8)
    assert trimmer.tick() is False
    clocks.spend(5, 0.01)  # load gone
    assert trimmer.tick() is True
    for _ in range(5):  # idle stays idle: no trim again and again
        clocks.spend(5, 0.01)
        assert trimmer.tick() is False
    clocks.spend(5, 0.5)  # the next burst
    assert trimmer.tick() is False
    clocks.spend(5, 0.0)
    assert trimmer.tick() is True
    assert len(trims) == trimmer.trims == 2


def test_a_node_idle_from_boot_trims_once() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    for _ in range(4):
        clocks.spend(5, 0.0)
        trimmer.tick()
    assert len(trims) == 1


def test_a_clock_that_did_not_move_decides_nothing() -> None:
    clocks, trims = _Clocks(), []
    trimmer = _trimmer(clocks, trims)
    clocks.cpu += 1.0
    assert trimmer.tick() is False
    assert trims == []


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="glibc's malloc_trim")
def test_glibc_trim_calls_the_c_library() -> None:
    trim = glibc_trim()
    assert trim is not None
    assert trim() in (0, 1)


@pytest.fixture
def usr1() -> Iterator[object]:
    before = signal.getsignal(signal.SIGUSR1)
    try:
        yield before
    finally:
        signal.signal(signal.SIGUSR1, before)
        tracemalloc.stop()


@pytest.mark.usefixtures("usr1")
def test_tracemalloc_dump_on_sigusr1(tmp_path: Path) -> None:
    assert start_tracemalloc_from_env(tmp_path, {TRACEMALLOC_ENV: "3"}) is True
    assert tracemalloc.is_tracing()
    os.kill(os.getpid(), signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGUSR1)
    dumps = sorted((tmp_path / "system/run").glob("tracemalloc-*.snapshot"))
    assert [d.name for d in dumps] == ["tracemalloc-1.snapshot", "tracemalloc-2.snapshot"]
    assert tracemalloc.Snapshot.load(str(dumps[0])).statistics("filename")


@pytest.mark.parametrize("value", ["", "many"])
def test_tracemalloc_stays_off_unless_asked_with_a_number(tmp_path: Path, value: str, usr1: object) -> None:
    assert start_tracemalloc_from_env(tmp_path, {TRACEMALLOC_ENV: value}) is False
    assert not tracemalloc.is_tracing()
    assert signal.getsignal(signal.SIGUSR1) is usr1
    assert not (tmp_path / "system/run").exists()
