"""A container node's namespaces, held by its launcher: Talos's docker nodes without a container engine.

Why the kernel's calls and not runc: runc wants an OCI bundle and a root file system image per node,
and would own the node's lifetime (``runc run`` is the node), so a reboot would tear the network
namespace down with it. Here the launcher itself unshares the node's mount, UTS, IPC and network
namespaces once, when it starts (:meth:`NodeNamespaces.enter`), and keeps them for the node's whole
life: every boot is a fresh PID namespace (:meth:`NodeNamespaces.start`) whose PID 1 is machined,
in a mount namespace of the boot's own whose root is the node's root (:mod:`._rootfs`), while
``eth0``, the disks' mounts and the hostname stay.
When the launcher exits the last process in those namespaces is gone, and the kernel removes them
with everything in them: the mounts, ``eth0`` and its veth peer on the bridge, the node's nftables.
Nothing needs undoing by hand, which is why a node's namespaces are never given a name
(``ip netns add`` would pin them with a mount to remove).

The veth is the provisioner's: it waits until the launcher's network namespace differs from its own
(:func:`network_namespace_of`) and creates the pair into it by the launcher's PID; the launcher waits
for ``eth0`` before the first boot.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups, _rootfs
from ichor.provision import _linux as linux

__all__ = ["EXTERNAL_INTERFACE", "NodeNamespaces", "network_namespace_of"]

EXTERNAL_INTERFACE = "eth0"
"""The node's end of its veth, named as in Talos's docker nodes."""
INTERFACE_TIMEOUT = 60.0


def network_namespace_of(pid: int) -> int | None:
    """The inode of ``pid``'s network namespace (None when the process is gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


class _Boot:
    """One boot of the node: PID 1 of its own PID namespace; its ``/proc`` goes when it exits."""

    def __init__(self, child: proc.Background) -> None:
        self._child = child

    @property
    def pid(self) -> int:
        return self._child.pid

    def wait(self, timeout: float | None = None) -> int:
        return self._child.wait(timeout)  # subprocess.TimeoutExpired while the node runs

    def signal_group(self, sig: int) -> None:
        self._child.signal_group(sig)


class NodeNamespaces:
    """The namespaces and root of one container node (see the module docstring)."""

    def __init__(
        self,
        rootfs: Path,
        node_root: Path,
        hostname: str,
        *,
        cgroups: Sequence[_cgroups.Hierarchy] = (),
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.rootfs = rootfs
        self.node_root = node_root
        self.hostname = hostname
        self.cgroups = cgroups
        """The hierarchies whose node directory the launcher has joined: the node's cgroup namespace
        starts there and its root mounts them (none: the node shares the launcher's cgroups)."""
        self.sleep = sleep
        self._own_pid_ns = -1

    def enter(self) -> None:
        """Unshare the node's namespaces (the launcher moves into them; its cgroups, joined before,
        become the root of the node's cgroup namespace) and build its root."""
        self._own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        flags = linux.CLONE_NEWNS | linux.CLONE_NEWUTS | linux.CLONE_NEWIPC | linux.CLONE_NEWNET
        linux.unshare(flags | (linux.CLONE_NEWCGROUP if self.cgroups else 0))
        socket.sethostname(self.hostname)
        _rootfs.build(self.rootfs, self.node_root, self.cgroups)
        proc.run(["ip", "link", "set", "lo", "up"], timeout=10)

    def wait_for_interface(self, timeout: float = INTERFACE_TIMEOUT) -> None:
        """Wait until the provisioner has moved ``eth0`` in, and bring it up."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.if_nametoindex(EXTERNAL_INTERFACE)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise MachineryError(
                        f"{EXTERNAL_INTERFACE} did not appear in the node's network namespace within {timeout:.0f}s",
                        hint="the provisioner creates it; see the output of `talosctl cluster create`",
                    ) from None
                self.sleep(0.05)
        proc.run(["ip", "link", "set", EXTERNAL_INTERFACE, "up"], timeout=10)

    def start(self, command: Sequence[str], log: Path) -> _Boot:
        """Boot: ``command`` as PID 1 of a new PID namespace, rooted at the node's root."""
        # A PID namespace whose init has exited takes no new processes: each boot gets its own.
        # setns to our own namespace first, as unshare(CLONE_NEWPID) refuses a second time otherwise.
        linux.setns(self._own_pid_ns, linux.CLONE_NEWPID)
        linux.unshare(linux.CLONE_NEWPID)
        rootfs = self.rootfs
        child = proc.start(command, output=log, preexec=lambda: _rootfs.enter(rootfs))
        return _Boot(child)
