"""Shared pieces of the VM tests: why a VM test cannot run here, the imager's outputs built for one,
a network namespace with a bridge and a tap for one VM, and ``talosctl`` run inside it (nothing
reaches the host's network; deleting the namespace removes the bridge and the tap)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ichor.imager.vm import OVMF_CODE
from ichor.machinery import proc

IMAGE_TOOLS = (
    "qemu-system-x86_64", "mksquashfs", "ip", "apt-get", "dpkg-deb", "depmod", "grub-mkimage", "xorriso",
    "mkfs.xfs", "mkfs.vfat", "mcopy",
)  # fmt: skip
"""What building the imager's outputs and booting them needs (``scripts/os-packages.txt``)."""


def vm_skip_reason() -> str | None:
    """Why a VM test cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespace, bridge, tap)"
    missing = next((tool for tool in IMAGE_TOOLS if shutil.which(tool) is None), None)
    if missing:
        return f"needs {missing} (scripts/os-packages.txt)"
    if not OVMF_CODE.exists():
        return f"needs {OVMF_CODE} (ovmf)"
    return None


def build_output(out: Path, profile: str, name: str, *args: str) -> Path:
    """``python -m ichor.imager <profile> --output out <args>``; returns ``out/name`` (the path it printed)."""
    result = proc.run(
        [sys.executable, "-m", "ichor.imager", profile, "--output", str(out), *args], timeout=1200
    )
    assert result.stdout.strip().endswith(str(out / name)), result.stdout
    return out / name


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
