"""Building programs from Go modules into the user's cache: what etcd's and Kubernetes's builds share.

The parts: where the cache is (``$XDG_CACHE_HOME/ichor/...``), the Go toolchain found and checked
(:func:`find_go`), one ``go`` command run with its output appended to a build log and a progress line
every tick (:class:`GoRunner`: elapsed time, modules downloaded or packages compiled; on failure the
log's tail and, when the tail shows the network, a hint naming ``GOPROXY``), a lock file that
serialises concurrent builds (:func:`locked`), and the staged install (:func:`install_staged`): a
build goes to ``<target>.new``, is verified, and only then renamed to ``<target>``, so a directory
that exists holds a verified build.

The callers choose the error type they raise (``error``) and what a user can do without the build
(``fallback``, appended to every hint). This module never decides what to build.
"""

from __future__ import annotations

__all__ = ["GoRunner", "cache_root", "elapsed", "find_go", "install_staged", "locked"]

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError, ProcessError

T = TypeVar("T")

STEP_TIMEOUT = 60 * 60.0
"""The longest one ``go`` command may run (Kubernetes's six binaries take ~20 min on 2 cores)."""

_NETWORK_FAILURE = re.compile(
    r"dial tcp|no such host|connection refused|i/o timeout|proxyconnect|network is unreachable"
    r"|TLS handshake|verifying .*: .*(?:sum\.golang\.org|checksum database)|GOPROXY=off|module lookup disabled"
    r"|403 Forbidden|404 Not Found|410 Gone",
    re.IGNORECASE,
)


_MESSAGE = re.compile(
    r"^# |^go: (?!downloading)|\.(?:go|c|h):\d+(?::\d+)?: |^\s+\S+ imports$|\berror:", re.IGNORECASE
)


def cache_root(env: Mapping[str, str], *parts: str) -> Path:
    """``$XDG_CACHE_HOME/ichor/<parts>`` (default ``~/.cache``; a relative XDG value is ignored, as the spec says)."""
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".cache"
    return base.joinpath("ichor", *parts)


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def find_go(
    go: str | None, *, minimum: tuple[int, int], what: str, error: type[MachineryError], fallback: str
) -> tuple[str, dict[str, str]]:
    """The ``go`` executable and its ``GOVERSION``/``GOPROXY``/``GOFLAGS``; raises ``error`` when
    it is missing, does not run, or is older than ``minimum``."""
    install = f"install Go {minimum[0]}.{minimum[1]} or newer (https://go.dev/dl); {fallback}"
    path = shutil.which(go or "go")
    if path is None:
        raise error(f"cannot build {what}: the Go toolchain (`go`) is not on PATH", hint=install)
    try:
        out = proc.run([path, "env", "-json", "GOVERSION", "GOPROXY", "GOFLAGS"], timeout=60).stdout
    except ProcessError as err:
        raise error(f"the Go toolchain does not run: {err}", hint=install) from err
    values: dict[str, str] = json.loads(out)
    match = re.search(r"go(\d+)\.(\d+)", values.get("GOVERSION", ""))
    if match is None or (int(match[1]), int(match[2])) < minimum:
        raise error(
            f"Go {values.get('GOVERSION') or '(unknown version)'} is too old to build {what}", hint=install
        )
    return path, values


class GoRunner:
    """Runs ``go`` commands of one build: a shared log, the environment, progress to ``report``."""

    def __init__(
        self,
        *,
        go: str,
        values: Mapping[str, str],
        log: Path,
        report: Callable[[str], None],
        tick: float,
        error: type[MachineryError],
        fallback: str,
    ) -> None:
        self.go = go
        self.go_version = values.get("GOVERSION", "go")
        self.proxy = values.get("GOPROXY") or "(GOPROXY unset)"
        self.log = log
        self.report = report
        self.tick = tick
        self.error = error
        self.fallback = fallback
        flags = values.get("GOFLAGS", "").split()
        self.env = {"CGO_ENABLED": "0", "GOFLAGS": " ".join([*flags, "-trimpath"])}

    def run(self, args: list[str], *, cwd: Path, what: str, env: Mapping[str, str] | None = None) -> None:
        """Run ``go args`` in ``cwd``, reporting progress every tick; raise ``error`` with the log's tail."""
        started = time.monotonic()
        self.run_logged([self.go, *args], cwd=cwd, what=what, env=env)
        self.report(f"  {what}: done in {elapsed(time.monotonic() - started)}")

    def run_logged(
        self, argv: list[str], *, cwd: Path, what: str, env: Mapping[str, str] | None = None
    ) -> None:
        """Run any build command (``go``, ``gcc``) with its output in the log and progress every tick."""
        start_offset = self.log.stat().st_size if self.log.exists() else 0
        started = time.monotonic()
        next_tick = started + self.tick
        child = proc.start(argv, output=self.log, cwd=cwd, env={**self.env, **(env or {})})
        try:
            while (code := child.poll()) is None:
                time.sleep(0.2)
                now = time.monotonic()
                if now - started > STEP_TIMEOUT:
                    raise self.error(
                        f"{what} took longer than {STEP_TIMEOUT / 60:.0f} min; stopped",
                        hint=f"see {self.log}; {self.fallback}",
                    )
                if now >= next_tick:
                    next_tick = now + self.tick
                    self.report(f"  {what}: {elapsed(now - started)} so far, {self._progress(start_offset)}")
        finally:
            if child.poll() is None:
                child.stop()
        if code != 0:
            raise self._failure(argv, cwd, code, self._tail(start_offset))

    def output(self, args: list[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> str:
        """Run ``go args`` (a short query such as ``mod download -json``) and return its stdout."""
        argv = [self.go, *args]
        done = proc.run(argv, cwd=cwd, env={**self.env, **(env or {})}, timeout=STEP_TIMEOUT, check=False)
        with self.log.open("a") as log:
            log.write(done.stderr)
        if done.exit_code != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise self._failure(argv, cwd, done.exit_code, tail)
        return done.stdout

    def _failure(self, argv: list[str], cwd: Path, code: int | None, tail: str) -> MachineryError:
        if _NETWORK_FAILURE.search(tail):
            hint = (
                f"the Go module proxy (GOPROXY={self.proxy}) or the checksum database did not answer "
                f"or does not serve this version; allow access to it or set GOPROXY to a reachable "
                f"mirror; {self.fallback}"
            )
        else:
            hint = f"the whole output is in {self.log}; {self.fallback}"
        shown = " ".join(a if len(a) < 80 else a[:77] + "..." for a in argv[1:])
        return self.error(
            f"`{Path(argv[0]).name} {shown}` (in {cwd}) failed with exit code {code}:\n{tail}", hint=hint
        )

    def _new_text(self, offset: int) -> str:
        with self.log.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def _progress(self, offset: int) -> str:
        lines = [line for line in self._new_text(offset).splitlines() if line.strip()]
        downloads = sum(1 for line in lines if line.startswith("go: downloading"))
        if downloads:
            return f"{downloads} modules downloaded"
        return f"{sum(1 for line in lines if not line.startswith('go: '))} packages compiled"

    def _tail(self, offset: int, lines: int = 20) -> str:
        """The compiler's and go's messages when there are any (``go build -v`` interleaves them with
        hundreds of package names), else the last lines."""
        text = self._new_text(offset).rstrip("\n").splitlines()
        messages = [line for line in text if _MESSAGE.search(line) or _NETWORK_FAILURE.search(line)]
        return "\n".join((messages or text)[-lines:])


@contextlib.contextmanager
def locked(path: Path, report: Callable[[str], None], what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created), saying so when another build holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"waiting for another build of {what} to finish (lock {path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def install_staged(target: Path, build: Callable[[Path], T]) -> T:
    """Run ``build(staging)`` into a fresh ``<target>.new`` and, when it returns, rename it to
    ``target`` (replacing what was there) and return what it returned; when it raises, nothing is
    left but the old ``target``."""
    staging = target.with_name(target.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        result = build(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
    return result
