"""The one way Ichor starts a child process.

Every process start in the project goes through this module: :func:`run` for short blocking
commands whose output is captured, :func:`spawn` for long-lived children (service processes) whose
output streams to a file or to pipes, and :func:`start` for a child that must outlive the event
loop or even the caller (a node's launcher, a node in a test). Both log the command line, start the child in its own session
(so it and everything it forks form one process group that can be signalled together), and report
failure as :class:`~ichor.machinery.errors.ProcessError` carrying the exit code and the last lines
of stderr.

This module must not decide policy (restarts, health, when to stop): that belongs to the service
supervisor in ``ichor.machined.services``. Nothing else in the project may call ``subprocess`` or
``asyncio.create_subprocess_exec`` directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ichor.machinery.errors import ProcessError

__all__ = [
    "STDERR_TAIL_LINES",
    "Background",
    "Completed",
    "Process",
    "ProcessError",
    "group_pids",
    "pid_alive",
    "run",
    "run_in_terminal",
    "spawn",
    "start",
]

log = logging.getLogger("ichor.proc")

STDERR_TAIL_LINES = 20
"""How many trailing lines of stderr a :class:`ProcessError` carries."""


@dataclass(frozen=True)
class Completed:
    """A finished :func:`run`: the command, its exit code and captured output."""

    args: list[str]
    exit_code: int
    stdout: str
    stderr: str


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _read_tail(path: Path, lines: int = STDERR_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return _tail(f.read().decode(errors="replace"), lines)
    except OSError:
        return ""


def _environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    # Extra variables are laid over our own environment; children never lose PATH by accident.
    if env is None:
        return None
    return {**os.environ, **env}


def _describe_exit(exit_code: int) -> str:
    if exit_code < 0:
        return f"was killed by signal {signal.Signals(-exit_code).name}"
    return f"exited with code {exit_code}"


def _failure(args: list[str], exit_code: int, stderr_tail: str, hint: str | None) -> ProcessError:
    message = f"command {shlex.join(args)!r} {_describe_exit(exit_code)}"
    if stderr_tail:
        message += f": {stderr_tail}"
    return ProcessError(message, command=args, exit_code=exit_code, stderr_tail=stderr_tail, hint=hint)


def _start_error(args: list[str], err: OSError, hint: str | None) -> ProcessError:
    return ProcessError(
        f"cannot start {shlex.join(args)!r}: {err.strerror or err}",
        command=args,
        exit_code=None,
        hint=hint or f"check that {args[0]!r} exists and is executable",
    )


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal a whole process group; False when nothing is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A pgid reused by someone else's process: never ours to signal.
        return False
    return True


def run(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float | None = None,
    output: Path | None = None,
    check: bool = True,
    hint: str | None = None,
) -> Completed:
    """Run a short command to completion and return its output.

    stdout and stderr are captured as text, or, with ``output``, both are appended to that file
    (then :attr:`Completed.stdout`/``stderr`` are empty and an error's stderr tail comes from the
    file). On timeout the child's whole process group is killed and :class:`ProcessError` is raised
    with ``exit_code=None``. With ``check`` (the default) a non-zero exit raises too.
    """
    argv = [str(a) for a in args]
    log.info("running: %s", shlex.join(argv))
    sink = output.open("ab") if output is not None else None
    try:
        try:
            child = subprocess.Popen(
                argv,
                cwd=cwd,
                env=_environment(env),
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=sink if sink is not None else subprocess.PIPE,
                stderr=sink if sink is not None else subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as err:
            raise _start_error(argv, err, hint) from err
        try:
            stdout, stderr = child.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            tail = _read_tail(output) if output is not None else _tail(stderr or "")
            raise ProcessError(
                f"command {shlex.join(argv)!r} timed out after {timeout:g} s",
                command=argv,
                exit_code=None,
                stderr_tail=tail,
                hint=hint,
            ) from None
        finally:
            # Grandchildren left in the group die with the command, like a foreground job.
            _kill_group(child.pid, signal.SIGKILL)
    finally:
        if sink is not None:
            sink.close()
    stdout = stdout or ""
    stderr = stderr or ""
    log.debug("exit code %d: %s", child.returncode, shlex.join(argv))
    if check and child.returncode != 0:
        tail = _tail(stderr) if output is None else _read_tail(output)
        raise _failure(argv, child.returncode, tail, hint)
    return Completed(args=argv, exit_code=child.returncode, stdout=stdout, stderr=stderr)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (Linux ``/proc``; falls back to ``kill 0``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # The state letter follows the parenthesised command name, which may itself contain ')'.
    state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
    return state not in (b"Z", b"X")


def group_pids(pgid: int) -> list[int]:
    """Every live (non-zombie) process whose process group is ``pgid`` (Linux ``/proc``)."""
    pids: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        end = stat.rindex(b")")
        fields = stat[end + 2 :].split()
        # fields: state, ppid, pgrp, ...
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            pids.append(int(entry))
    return sorted(pids)


class Process:
    """A child started by :func:`spawn`: its own session and process group, led by :attr:`pid`."""

    def __init__(self, args: list[str], child: asyncio.subprocess.Process, output: Path | None) -> None:
        self.args = args
        self._child = child
        self.output = output

    def __repr__(self) -> str:
        return f"Process(pid={self.pid}, args={self.args!r})"

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def pgid(self) -> int:
        # start_new_session makes the child a session and group leader: pgid == pid.
        return self._child.pid

    @property
    def exit_code(self) -> int | None:
        """None while running; negative ``-signal`` when killed by a signal."""
        return self._child.returncode

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self._child.stdout

    @property
    def stderr(self) -> asyncio.StreamReader | None:
        return self._child.stderr

    async def wait(self) -> int:
        """Wait for the group leader to exit and return its exit code."""
        return await self._child.wait()

    def group_pids(self) -> list[int]:
        """Live processes in this child's process group (leader and whatever it forked)."""
        return group_pids(self.pgid)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (no-op once the group is empty)."""
        _kill_group(self.pgid, sig)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    async def stop(self, timeout: float) -> int:
        """SIGTERM the group, SIGKILL it after ``timeout`` seconds; always leaves the group empty."""
        self.terminate()
        try:
            async with asyncio.timeout(timeout):
                code = await self.wait()
        except TimeoutError:
            self.kill()
            code = await self.wait()
        # Members that outlived the leader (ignored SIGTERM, or the leader did not forward it).
        self.kill()
        return code

    def check(self, hint: str | None = None) -> None:
        """Raise :class:`ProcessError` if the process has exited non-zero (stderr tail from output)."""
        code = self.exit_code
        if code is not None and code != 0:
            tail = _read_tail(self.output) if self.output is not None else ""
            raise _failure(self.args, code, tail, hint)


async def spawn(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    output: Path | None = None,
    hint: str | None = None,
) -> Process:
    """Start a long-lived child in its own session/process group and return its handle.

    With ``output`` the child's stdout and stderr are both appended to that file (a service log);
    otherwise they are pipes readable from :attr:`Process.stdout`/:attr:`Process.stderr`. The caller
    owns the child: it must :meth:`Process.wait` for it (or :meth:`Process.stop` it).
    """
    argv = [str(a) for a in args]
    log.info("spawning: %s", shlex.join(argv))
    sink = None
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        sink = output.open("ab")
    try:
        child = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=_environment(env),
            stdin=subprocess.DEVNULL,
            stdout=sink if sink is not None else asyncio.subprocess.PIPE,
            stderr=sink if sink is not None else asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        raise _start_error(argv, err, hint) from err
    finally:
        # The child holds its own descriptor now.
        if sink is not None:
            with contextlib.suppress(OSError):
                sink.close()
    log.info("started PID %d: %s", child.pid, shlex.join(argv))
    return Process(argv, child, output)


class Background:
    """A child started by :func:`start`, managed without an event loop."""

    def __init__(self, args: list[str], popen: subprocess.Popen[bytes]) -> None:
        self.args = args
        self._popen = popen

    def __repr__(self) -> str:
        return f"Background(pid={self.pid}, args={self.args!r})"

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; ``subprocess.TimeoutExpired`` when it is still running after ``timeout``."""
        return self._popen.wait(timeout)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (safe inside a signal handler)."""
        if self._popen.poll() is None:
            _kill_group(self.pid, sig)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the whole process group, SIGKILL it after ``timeout``; returns the exit code."""
        if self._popen.poll() is None:
            _kill_group(self.pid, signal.SIGTERM)
            try:
                return self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("process %d ignored SIGTERM for %.1fs, sending SIGKILL", self.pid, timeout)
        _kill_group(self.pid, signal.SIGKILL)
        return self._popen.wait()


def start(
    args: Sequence[str],
    *,
    output: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    hint: str | None = None,
    preexec: Callable[[], None] | None = None,
) -> Background:
    """Start a child in its own session with stdout+stderr appended to ``output``; do not wait.

    The child keeps running if the caller exits (it is not tied to the caller's terminal or loop).
    ``preexec`` runs in the child between fork and exec (a container node's chroot); only a
    single-threaded caller may pass one.
    """
    argv = [str(a) for a in args]
    log.info("starting: %s (output %s)", shlex.join(argv), output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("ab") as sink:
        try:
            popen = subprocess.Popen(
                argv, cwd=cwd, env=_environment(env), stdin=subprocess.DEVNULL, stdout=sink,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec,
            )  # fmt: skip
        except OSError as err:
            raise _start_error(argv, err, hint) from None
    return Background(argv, popen)


def run_in_terminal(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, hint: str | None = None
) -> int:
    """Run an interactive program (an editor) on the caller's terminal and wait for it; its exit code.

    Unlike :func:`run` the child shares the caller's stdin/stdout/stderr and stays in the caller's
    session and process group, so it owns the terminal as a foreground job would (a child in a new
    session could not read the keyboard). Ctrl-C reaches both, as in a shell.
    """
    argv = [str(a) for a in args]
    log.info("running in the terminal: %s", shlex.join(argv))
    try:
        return subprocess.call(argv, env=_environment(env))
    except OSError as err:
        raise _start_error(argv, err, hint) from None
