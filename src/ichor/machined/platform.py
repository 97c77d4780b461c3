"""Where a node lives: the one place that maps Talos paths and addresses onto a platform.

Every path machined touches is a Talos path (``/system/state/config.yaml``, ``/var/lib/etcd``,
``/system/secrets/etcd``) resolved through :class:`Layout`, and every address a node binds or dials
for itself comes from :attr:`Layout.address`, never a literal ``127.0.0.1``. The ``process``
platform keeps a node's "disks" as directories under its root and gives it one loopback address;
on the ``container`` platform machined is PID 1 of its own namespaces, the Talos paths are real
mounts (root ``/``, so the mapping is the identity) and the address is its ``eth0``'s; on
``metal`` (a VM or a machine booted from the OS image) the root is ``/`` too and the block
devices are the kernel's (:attr:`Layout.block_devices`).

This module only computes paths; it creates directories on request and never deletes anything.
"""

from __future__ import annotations

__all__ = ["EXIT_POWEROFF", "EXIT_REBOOT", "PARTITIONS", "Layout", "Platform"]

import hashlib
import os
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

# Exit codes a node process uses to tell its launcher what the "machine" should do next.
EXIT_POWEROFF = 0
EXIT_REBOOT = 75


class Platform(StrEnum):
    """Where a node runs (``talosctl version``'s platform name)."""

    PROCESS = "process"
    """A node process on the host's shared loopback (``cluster create --provisioner process``)."""
    CONTAINER = "container"
    """PID 1 of its own namespaces, as Talos's docker nodes (``--provisioner container``)."""
    METAL = "metal"
    """A machine of its own (a VM or hardware booted from the OS image): PID 1 is
    :mod:`ichor.machined.metal`, the kernel, links and block devices are the node's."""

    @property
    def owns_kernel(self) -> bool:
        """The node's network and UTS namespaces are its own to change (container and metal)."""
        return self is not Platform.PROCESS

    def kernel_param_refusal(self, path: PurePosixPath) -> str | None:
        """Why this node may not write the kernel parameter file ``path`` (``/proc/sys/...`` or
        ``/sys/...``); None when it may.

        A metal node owns its kernel. A container node owns only its network namespace, and
        ``/proc/sys/net`` is that namespace's view: every other key is the host's kernel, shared by
        every node and the host itself. A process node shares even the host's network namespace."""
        if self is Platform.METAL:
            return None
        if self is Platform.CONTAINER:
            if path.is_relative_to("/proc/sys/net"):
                return None
            return (
                "refused: a container node shares the host's kernel and owns only its network namespace "
                "(net.* keys); this key would change the host and every other node"
            )
        return (
            "refused: a process node shares the host's kernel and network namespace; "
            "this key would change the host"
        )

    def kernel_module_refusal(self) -> str | None:
        """Why this node may not load kernel modules (``machine.kernel.modules``); None when it may.

        A module goes into the one kernel there is: only a metal node's kernel is its own. Container
        and process nodes share the host's, where a module would change the host and every node."""
        if self is Platform.METAL:
            return None
        return (
            f"not loaded: a {self.value} node shares the host's kernel; loading a module would change "
            "the host and every other node on it (modules load on metal nodes)"
        )

    def watchdog_refusal(self) -> str | None:
        """Why this node may not arm a hardware watchdog (``WatchdogTimerConfig``); None when it may.

        A watchdog device resets the machine it belongs to: only a metal node's machine is its own.
        On a container or process node ``/dev/watchdog*`` is the host's, and arming it would reset
        the host when the node stops feeding it."""
        if self is Platform.METAL:
            return None
        return (
            f"not armed: a {self.value} node shares the host's devices; its watchdog would reset the host "
            "(watchdogs are armed on metal nodes)"
        )

    @property
    def installs_to_disk(self) -> bool:
        """A config applied to an uninstalled node installs Talos's system disk first (metal)."""
        return self is Platform.METAL

    @property
    def mode(self) -> str:
        """Talos's runtime mode (``metal``, ``cloud``, ``container``): a node sharing the host's
        kernel runs in ``container`` mode, as Talos does in docker."""
        return "metal" if self is Platform.METAL else "container"


_MAX_SOCKET_PATH = 100  # below the 107-byte sun_path limit, with room for the kernel's NUL

# Talos system partitions (labels) and the directory each one is on the container platform.
PARTITIONS: dict[str, str] = {
    "STATE": "system/state",
    "EPHEMERAL": "var",
    "META": "system/meta",
}


@dataclass(frozen=True)
class Layout:
    """A node's root directory and address; maps absolute Talos paths into the root."""

    root: Path
    address: str
    platform: Platform = Platform.PROCESS
    own_netns: bool = False
    """machined runs in a network namespace of its own (a container node): only then may it change
    links, addresses and routes. A process node shares the host's network and changes nothing in it."""
    own_uts: bool = False
    """machined runs in a UTS namespace of its own (a container node): only then does it set the
    kernel's hostname and domain name. A process node shares the host's and never sets them."""
    block_devices: Path | None = None
    """Where the node's disks are listed (``/sys/block`` on metal); None when the node has none of
    its own, and ``talosctl disks`` shows the filesystem holding its root."""
    kernel_log: Path | None = None
    """The node's own kernel log (``/dev/kmsg`` on metal), what ``talosctl dmesg`` reads; None when
    the kernel is the host's and ``dmesg`` shows the node's console log."""
    mount_table: Path | None = None
    """The node's own mount table (``/proc/self/mounts`` on metal), what ``talosctl mounts`` lists;
    None when the mounts are the host's and ``mounts`` shows the system partitions' directories."""

    def kernel_param_refusal(self, path: PurePosixPath) -> str | None:
        """Why this node may not write the kernel parameter file ``path``; None when it may: the
        platform's answer (:meth:`Platform.kernel_param_refusal`), and never ``/proc/sys/net`` of a
        network namespace that is not the node's own (``own_netns``), whatever the platform says."""
        refusal = self.platform.kernel_param_refusal(path)
        if refusal is None and self.platform is not Platform.METAL and not self.own_netns:
            return "refused: this node runs in the host's network namespace; the key would change the host"
        return refusal

    def kernel_module_refusal(self) -> str | None:
        """Why this node may not load kernel modules; None when it may (the platform's answer,
        :meth:`Platform.kernel_module_refusal`)."""
        return self.platform.kernel_module_refusal()

    def watchdog_refusal(self) -> str | None:
        """Why this node may not arm a hardware watchdog; None when it may (the platform's answer,
        :meth:`Platform.watchdog_refusal`)."""
        return self.platform.watchdog_refusal()

    def path(self, talos_path: str) -> Path:
        """``/system/state/config.yaml`` -> ``<root>/system/state/config.yaml``.

        Refuses paths that would leave the root (``..``), so an API path from a user cannot reach
        the host's files.
        """
        pure = PurePosixPath("/") / talos_path
        parts = [part for part in pure.parts[1:] if part not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"path {talos_path!r} escapes the node root")
        return self.root.joinpath(*parts)

    def talos_path(self, host_path: Path) -> str:
        """The Talos path of a file under the root (inverse of :meth:`path`)."""
        relative = host_path.resolve().relative_to(self.root.resolve())
        return "/" + relative.as_posix() if relative.parts else "/"

    def partition(self, label: str) -> Path:
        """The directory standing in for a system partition (``STATE``, ``EPHEMERAL``, ``META``)."""
        try:
            return self.root / PARTITIONS[label]
        except KeyError:
            raise ValueError(
                f"unknown system partition label {label!r}; known: {', '.join(PARTITIONS)}"
            ) from None

    # Talos paths used across machined, named once here.
    @property
    def state_dir(self) -> Path:
        return self.partition("STATE")

    @property
    def config_file(self) -> Path:
        return self.path("/system/state/config.yaml")

    @property
    def node_identity_file(self) -> Path:
        return self.path("/system/state/node-identity.yaml")

    @property
    def kubespan_identity_file(self) -> Path:
        """Talos's ``constants.KubeSpanIdentityFilename`` in STATE."""
        return self.path("/system/state/kubespan-identity.yaml")

    def socket(self, talos_path: str) -> Path:
        """A unix socket's path: under the root, or a short private stand-in when that is too long.

        ``sun_path`` holds 107 bytes; node roots in deep directories (tests, ``~/.talos/clusters``)
        can exceed it, so such sockets live in ``$TMPDIR/ichor-<hash of root>/`` instead.
        """
        path = self.path(talos_path)
        if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
            return path
        digest = hashlib.sha256(os.fsencode(self.root.resolve())).hexdigest()[:16]
        short = Path(tempfile.gettempdir()) / f"ichor-{digest}"
        short.mkdir(mode=0o700, exist_ok=True)
        return short / PurePosixPath(talos_path).name

    @property
    def machined_socket(self) -> Path:
        return self.socket("/system/run/machined/machine.sock")

    @property
    def apid_socket(self) -> Path:
        return self.socket("/system/run/apid/apid.sock")

    @property
    def secrets_dir(self) -> Path:
        return self.path("/system/secrets")

    @property
    def log_dir(self) -> Path:
        return self.path("/var/log")

    @property
    def controller_runtime_log(self) -> Path:
        """The controller runtime's own log (``talosctl logs controller-runtime``)."""
        return self.log_dir / "controller-runtime.log"

    @property
    def console_log(self) -> Path:
        """The node's console (what ``talosctl dmesg`` shows on the container platform)."""
        return self.path("/var/log/console.log")

    @property
    def etcd_data_dir(self) -> Path:
        return self.path("/var/lib/etcd")

    @property
    def etcd_pki_dir(self) -> Path:
        return self.path("/system/secrets/etcd")

    @property
    def etcd_recovery_snapshot(self) -> Path:
        """Where ``talosctl bootstrap --recover-from`` uploads the snapshot."""
        return self.path("/var/lib/etcd.snapshot")

    @property
    def etcd_pid_file(self) -> Path:
        """The running etcd's PID, so the next boot can kill one a crashed machined left behind."""
        return self.path("/system/run/etcd.pid")

    def ensure(self) -> None:
        """Create the directory skeleton a booting node expects (idempotent)."""
        for talos_path in (
            "/system/state",
            "/system/meta",
            "/system/run/machined",
            "/system/run/apid",
            "/system/run/trustd",
            "/system/secrets",
            "/system/config",
            "/var/log",
            "/var/lib",
            "/etc",
        ):
            self.path(talos_path).mkdir(parents=True, exist_ok=True, mode=0o700)
