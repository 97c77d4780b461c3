"""Shared pieces of the VM tests: a network namespace with a bridge and a tap for one VM, and
``talosctl`` run inside it (nothing reaches the host's network; deleting the namespace removes
the bridge and the tap)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ichor.machinery import proc


@contextmanager
def vm_netns(prefix: str, gateway: str) -> Iterator[str]:
    """A namespace ``<prefix>-<pid>`` with bridge ``br0`` (``gateway``/24) and ``tap0`` on it."""
    name = f"{prefix}-{os.getpid()}"
    proc.run(["ip", "netns", "add", name])
    try:
        for command in (
            ["link", "add", "br0", "type", "bridge"],
            ["addr", "add", f"{gateway}/24", "dev", "br0"],
            ["link", "set", "br0", "up"],
            ["link", "set", "lo", "up"],
            ["tuntap", "add", "tap0", "mode", "tap"],
            ["link", "set", "tap0", "master", "br0", "up"],
        ):
            proc.run(["ip", "-n", name, *command])
        yield name
    finally:
        proc.run(["ip", "netns", "delete", name], check=False)


def talosctl_in(netns: str, home: Path, *args: str, timeout: float = 120) -> proc.Completed:
    """``python -m ichor <args>`` in ``netns`` with ``HOME=home``; never raises on its exit code."""
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return proc.run(
        ["ip", "netns", "exec", netns, sys.executable, "-m", "ichor", *args],
        env=env,
        check=False,
        timeout=timeout,
    )
