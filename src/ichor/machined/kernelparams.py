"""Kernel parameters as Talos names them, and the files they live in (``/proc/sys``, ``/sys``).

A key's id is Talos's: ``proc.sys.<sysctl key>`` or ``sys.<sysfs key>`` (:func:`param_id`). Its file
follows sysctl.conf(5) as Talos 1.7 does (002:692-704): when the first separator after the prefix
is ``/`` the key is a path as written; when it is ``.``, dots and slashes swap, so
``net.ipv6.conf.eth0/100.disable_ipv6`` and ``net/ipv6/conf/eth0.100/disable_ipv6`` are the same
file (:func:`param_path`).

:class:`KernelParamFiles` reads and writes those files under a root (``/`` on a node, a temporary
directory in tests). Whether a node may change a key at all is the platform's answer
(:meth:`ichor.machined.platform.Platform.kernel_param_refusal`), asked before any write: a node
sharing the host's kernel must never change a host-wide setting. This module never decides that.
"""

from __future__ import annotations

__all__ = ["SYSCTL", "SYSFS", "KernelParamFiles", "param_id", "param_path"]

from pathlib import Path, PurePosixPath

SYSCTL = "proc.sys"
"""The id prefix of a sysctl (``machine.sysctls``)."""
SYSFS = "sys"
"""The id prefix of a sysfs entry (``machine.sysfs``)."""


def param_id(prefix: str, key: str) -> str:
    """Talos's resource id of ``key`` under ``prefix`` (``proc.sys`` + ``net.ipv4.ip_forward``)."""
    return f"{prefix}.{key}"


def param_path(param: str) -> PurePosixPath:
    """The absolute file of a kernel parameter id (``proc.sys.kernel.panic`` -> ``/proc/sys/kernel/panic``)."""
    key, prefix = param, ""
    for known in (SYSCTL, SYSFS):
        if param.startswith(known + "."):
            key, prefix = param[len(known) + 1 :], known
            break
    separators = [at for at in (key.find("."), key.find("/")) if at != -1]
    if separators and key[min(separators)] == ".":
        key = key.translate(str.maketrans("./", "/."))
    parts = [p for p in (prefix.replace(".", "/") + "/" + key).split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"kernel parameter {param!r} leaves its tree")
    return PurePosixPath("/", *parts)


class KernelParamFiles:
    """Reads and writes kernel parameter files under ``root`` (``/`` on a node)."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root

    def _file(self, param: str) -> Path:
        return self.root.joinpath(*param_path(param).parts[1:])

    def exists(self, param: str) -> bool:
        return self._file(param).exists()

    def read(self, param: str) -> str:
        """The value as the kernel shows it, stripped; raises ``OSError`` (``FileNotFoundError`` for an
        unknown key)."""
        return self._file(param).read_text().strip()

    def write(self, param: str, value: str) -> None:
        """Write ``value`` as one write(2), as sysctl(8) does; raises ``OSError``."""
        with self._file(param).open("w") as file:
            file.write(value)
