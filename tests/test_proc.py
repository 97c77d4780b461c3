"""The subprocess helper: captured output, errors with stderr tails, timeouts, logs, group kills.

Every child is a real Python process; anything a test starts is killed by PID at the end even when
the test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError, ProcessError

PY = sys.executable


@pytest.fixture
def reaper() -> Iterator[list[int]]:
    """PIDs (and process groups) a test started; all are SIGKILLed afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.pid_alive(pid):
            return True
        time.sleep(0.02)
    return not proc.pid_alive(pid)


def test_run_captures_stdout_and_stderr() -> None:
    done = proc.run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"])
    assert done.exit_code == 0
    assert done.stdout == "out\n"
    assert done.stderr == "err\n"


def test_run_passes_input_and_extra_environment() -> None:
    done = proc.run(
        [PY, "-c", "import os, sys; print(sys.stdin.read().upper() + os.environ['ICHOR_T'])"],
        input="abc",
        env={"ICHOR_T": "-x"},
    )
    assert done.stdout == "ABC-x\n"


def test_run_failure_raises_with_exit_code_and_stderr_tail() -> None:
    script = "import sys\nfor i in range(50): print(f'line {i}', file=sys.stderr)\nsys.exit(3)"
    with pytest.raises(ProcessError) as info:
        proc.run([PY, "-c", script], hint="try --foo")
    err = info.value
    assert isinstance(err, MachineryError)
    assert err.exit_code == 3
    assert err.hint == "try --foo"
    tail = err.stderr_tail.splitlines()
    assert tail == [f"line {i}" for i in range(50 - proc.STDERR_TAIL_LINES, 50)]
    assert "exited with code 3" in str(err)
    assert "line 49" in str(err)
    assert "line 0\n" not in str(err)


def test_run_without_check_returns_failure() -> None:
    done = proc.run([PY, "-c", "raise SystemExit(4)"], check=False)
    assert done.exit_code == 4


def test_run_missing_program_is_a_process_error_with_hint(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-program"
    with pytest.raises(ProcessError) as info:
        proc.run([str(missing)])
    assert info.value.exit_code is None
    assert "cannot start" in str(info.value)
    assert info.value.hint is not None and str(missing) in info.value.hint


def test_run_timeout_kills_the_process_group(tmp_path: Path, reaper: list[int]) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # The command forks a grandchild that would outlive it; the timeout must take both.
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(ProcessError) as info:
        proc.run([PY, "-c", script], timeout=1.5)
    assert time.monotonic() - started < 10
    assert info.value.exit_code is None
    assert "timed out after 1.5 s" in str(info.value)
    assert info.value.stderr_tail == "started"
    grandchild = int(pidfile.read_text())
    reaper.append(grandchild)
    assert wait_gone(grandchild)


def test_run_output_to_file_and_tail_from_file(tmp_path: Path) -> None:
    log = tmp_path / "cmd.log"
    log.write_text("earlier\n")
    done = proc.run([PY, "-c", "print('hello')"], output=log)
    assert done.stdout == ""
    assert log.read_text() == "earlier\nhello\n"
    with pytest.raises(ProcessError) as info:
        proc.run([PY, "-c", "import sys; print('bad thing', file=sys.stderr); sys.exit(1)"], output=log)
    assert info.value.stderr_tail.endswith("bad thing")


def test_spawn_streams_output_to_file(tmp_path: Path, reaper: list[int]) -> None:
    log = tmp_path / "logs" / "svc.log"

    async def main() -> int:
        child = await proc.spawn(
            [PY, "-c", "import sys; print('to stdout', flush=True); print('to stderr', file=sys.stderr)"],
            output=log,
        )
        reaper.append(child.pid)
        return await child.wait()

    assert asyncio.run(main()) == 0
    assert sorted(log.read_text().splitlines()) == ["to stderr", "to stdout"]


def test_spawn_pipes_and_check(reaper: list[int]) -> None:
    async def main() -> tuple[bytes, ProcessError | None]:
        child = await proc.spawn([PY, "-c", "print('piped'); raise SystemExit(2)"])
        reaper.append(child.pid)
        assert child.stdout is not None and child.stderr is not None
        out = await child.stdout.read()
        await child.stderr.read()
        await child.wait()
        try:
            child.check()
        except ProcessError as err:
            return out, err
        return out, None

    out, err = asyncio.run(main())
    assert out == b"piped\n"
    assert err is not None and err.exit_code == 2


def test_spawn_missing_program(tmp_path: Path) -> None:
    async def main() -> None:
        await proc.spawn([str(tmp_path / "nope")])

    with pytest.raises(ProcessError, match="cannot start"):
        asyncio.run(main())


def test_kill_takes_the_whole_process_group(tmp_path: Path, reaper: list[int]) -> None:
    pidfile = tmp_path / "child.pid"
    script = (
        "import signal, subprocess, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"p = subprocess.Popen([{PY!r}, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )

    async def main() -> tuple[int, list[int], float]:
        child = await proc.spawn([PY, "-c", script])
        reaper.append(child.pid)
        while not pidfile.exists() or not pidfile.read_text():
            await asyncio.sleep(0.02)
        reaper.append(int(pidfile.read_text()))
        members = child.group_pids()
        started = time.monotonic()
        code = await child.stop(timeout=0.5)
        return code, members, time.monotonic() - started

    code, members, took = asyncio.run(main())
    grandchild = int(pidfile.read_text())
    assert grandchild in members and len(members) == 2
    assert code == -signal.SIGKILL
    assert 0.4 < took < 5
    for pid in members:
        assert wait_gone(pid), f"PID {pid} survived"


def test_stop_of_a_cooperative_child_uses_sigterm(reaper: list[int]) -> None:
    async def main() -> int:
        child = await proc.spawn([PY, "-c", "import time; print('up', flush=True); time.sleep(60)"])
        reaper.append(child.pid)
        assert child.stdout is not None
        await child.stdout.readline()
        code = await child.stop(timeout=5)
        await child.stdout.read()
        return code

    assert asyncio.run(main()) == -signal.SIGTERM


def test_run_in_terminal_shares_the_callers_stdio_and_returns_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "pgid"
    code = proc.run_in_terminal(["sh", "-c", f"ps -o pgid= -p $$ > {out}; exit 3"])
    assert code == 3
    # Same process group as the caller: a terminal editor stays the foreground job.
    assert int(out.read_text()) == os.getpgid(0)
    with pytest.raises(ProcessError, match="cannot start") as caught:
        proc.run_in_terminal(["/nonexistent/editor", "f"], hint="set EDITOR")
    assert caught.value.hint == "set EDITOR"
