"""A container node's root file system, built in the node's own mount namespace.

The root is a tmpfs (``<state>/<node>.rootfs``, a mount point only the node's mount namespace sees)
holding Talos's paths as real paths, so machined runs with Talos's layout unchanged (root ``/``):

- ``/system/state`` (STATE) and ``/system/meta`` (META), ``/var`` (EPHEMERAL), ``/etc/kubernetes``,
  ``/etc/cri`` and ``/opt/cni`` (the CNI plugins, flannel's installed by its DaemonSet beside them): bind mounts of the node's directories under ``<state>/<node>`` (its disks,
  kept across reboots and seen by ``cluster destroy`` only as files);
- ``/system/run``, ``/tmp``, ``/run``, ``/dev/shm``, and the rest of ``/system`` and ``/etc``:
  tmpfs, as on Talos (lost when the node powers off);
- ``/dev``: the harmless device nodes (null, zero, full, random, urandom, tty) bound from the host,
  and ``/dev/kmsg`` read-only (the kubelet's OOM watcher reads the kernel log; nothing in a node may
  write into the host's);
  ``/sys``: a read-only sysfs of the node's own network namespace, with the node's own cgroup
  hierarchies at ``/sys/fs/cgroup`` (:mod:`._cgroups`); ``/proc``: mounted by each boot's
  PID 1 in its own mount namespace (:func:`enter`), so it shows the node's processes only, with ``/proc/sys`` read-only but
  for ``/proc/sys/net`` (the node's own network namespace): the kernel's other settings are the
  host's, shared by every node, and no node may change them;
- ``/etc/machine-id``: the node's own, made once and kept with its disks (the kubelet reads it);
- ``/etc/os-release``: Talos's, naming the Talos version ``talosctl version`` reports, so the
  kubelet reports the Node's OS image as Talos's does (``Talos (v1.7.6)``), not the host's;
- read-only: the host directories Python and Ichor run from (:func:`host_paths`), at their host
  paths, so the same interpreter, virtualenv, source and etcd binaries run inside.

It must be called in a mount namespace of the node's own (the launcher unshares one first): every
mount here would otherwise land in the host's. It never unmounts anything: the namespace's end
takes all of them with it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from ichor.machinery.constants import OS_RELEASE
from ichor.machinery.errors import MachineryError
from ichor.provision import _cgroups
from ichor.provision import _linux as linux

__all__ = ["DISKS", "SHIPPED_EMPTY", "build", "disk_dirs", "enter", "host_paths", "ship_empty_dirs"]

DISKS = ("system/state", "system/meta", "var", "etc/kubernetes", "etc/cri", "opt/cni")
"""The node's own directories (its disks), bound at the same Talos path inside the node."""
SHIPPED_EMPTY = ("etc/kubernetes/manifests",)
"""Directories Talos's root filesystem ships empty (its Dockerfile's ``mkdir -pv /rootfs/{etc/kubernetes/manifests,
...}``; the rest of that list is under the host's read-only ``/usr`` or made by what uses it here): the
kubelet's static pod directory, which users list (``talosctl ls /etc/kubernetes/manifests``)."""
_TALOS_OWNED = ("/system", "/var", "/etc", "/proc", "/sys", "/dev")
"""Paths the node owns: a host directory under them is not carried in (it would be hidden or land
on the node's disks)."""
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_READ_ONLY_DEVICES = ("kmsg",)
_ETC_FROM_HOST = ("passwd", "group", "nsswitch.conf")
"""Read by libc name lookups (Python's ``pwd``, etcd's resolver); the rest of ``/etc`` is the node's."""


def disk_dirs(node_root: Path) -> list[Path]:
    """Create (if absent) and return the node's disk directories under ``node_root``, with what
    Talos's root filesystem ships empty in them (:func:`ship_empty_dirs`)."""
    dirs = [node_root / d for d in DISKS]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    ship_empty_dirs(node_root)
    return dirs


def ship_empty_dirs(node_root: Path) -> None:
    """:data:`SHIPPED_EMPTY` under ``node_root`` (a process node's Talos paths map there too)."""
    for shipped in SHIPPED_EMPTY:
        (node_root / shipped).mkdir(parents=True, exist_ok=True, mode=0o755)


def host_paths() -> list[Path]:
    """The host directories the node sees read-only: ``/usr``, the interpreter's installation,
    the virtualenv, every directory on ``sys.path`` (the Ichor source among them) and the etcd
    binaries' directory; none under another, none under a path the node owns."""
    import ichor

    wanted = {Path("/usr"), Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent}
    wanted.add(Path(ichor.__file__).resolve().parent.parent)
    wanted.update(Path(p) for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p))
    try:
        from ichor.etcd import built_bin_dir, find_binaries

        wanted.add(find_binaries().etcd.parent)
        wanted.add(built_bin_dir())
    except MachineryError:
        pass  # a node without etcd binaries says so itself when it needs them
    real = {p.resolve() for p in wanted if p.is_dir()} | {p for p in wanted if p.is_dir()}
    kept = [p for p in real if not any(p.is_relative_to(owned) for owned in _TALOS_OWNED)]
    return sorted(p for p in kept if not any(p != q and p.is_relative_to(q) for q in kept))


def _bind(source: Path, target: Path, *, read_only: bool = False, device: bool = False) -> None:
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    linux.mount(str(source), str(target), None, linux.MS_BIND | linux.MS_REC)
    if read_only:
        flags = linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID
        if not device:  # a device node on a nodev mount cannot be opened at all
            flags |= linux.MS_NODEV
        linux.mount(None, str(target), None, flags)


def _tmpfs(target: Path, mode: int = 0o755, flags: int = linux.MS_NOSUID | linux.MS_NODEV) -> None:
    target.mkdir(parents=True, exist_ok=True)
    linux.mount("tmpfs", str(target), "tmpfs", flags, f"mode={mode:o}")


def build(rootfs: Path, node_root: Path, cgroups: Sequence[_cgroups.Hierarchy] = ()) -> None:
    """Mount the node's root at ``rootfs`` (an empty directory) from its disks under ``node_root``,
    with ``cgroups`` mounted at ``/sys/fs/cgroup`` (in the node's cgroup namespace: its own subtree)."""
    # Nothing mounted from here on may propagate back to the host's mount namespace.
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    rootfs.mkdir(parents=True, exist_ok=True)
    _tmpfs(rootfs, flags=0)
    for link in ("bin", "sbin", "lib", "lib64", "lib32"):
        host = Path("/") / link
        if host.is_symlink():
            (rootfs / link).symlink_to(os.readlink(host))
    _lib_modules(rootfs)
    # /tmp and /run first: a checkout or virtualenv under /tmp (a CI clone) is bound on top of them,
    # not hidden under them.
    _tmpfs(rootfs / "tmp", 0o1777)
    _tmpfs(rootfs / "run")
    for path in host_paths():
        _bind(path, rootfs / path.relative_to("/"), read_only=True)

    _tmpfs(rootfs / "dev")
    for device in _DEVICES:
        if Path("/dev", device).exists():
            _bind(Path("/dev", device), rootfs / "dev" / device)
    for device in _READ_ONLY_DEVICES:
        if Path("/dev", device).exists():
            _bind(Path("/dev", device), rootfs / "dev" / device, read_only=True, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        (rootfs / "dev" / name).symlink_to(target)
    _tmpfs(rootfs / "dev/shm", 0o1777)
    (rootfs / "proc").mkdir()
    (rootfs / "sys").mkdir()
    flags = linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
    linux.mount("sysfs", str(rootfs / "sys"), "sysfs", flags)
    if cgroups:
        _cgroups.mount_in(rootfs, cgroups)

    for disk in disk_dirs(node_root):
        _bind(disk, rootfs / disk.relative_to(node_root))
    _tmpfs(rootfs / "system/run")
    for name in _ETC_FROM_HOST:
        if Path("/etc", name).is_file():
            shutil.copyfile(Path("/etc", name), rootfs / "etc" / name)
    # Shared within the node (the host's mounts stay private to it, made so above): the kubelet's
    # volume mounts (/var/lib/kubelet, rshared in its container) must reach containerd, as on Talos.
    linux.mount(None, str(rootfs), None, linux.MS_REC | linux.MS_SHARED)
    (rootfs / "etc/machine-id").write_text(_machine_id(node_root) + "\n")
    (rootfs / "etc/os-release").write_text(OS_RELEASE)
    (rootfs / "etc/hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")


def _lib_modules(rootfs: Path) -> None:
    """A ``/lib/modules`` the node can mount from (kube-proxy's DaemonSet asks for it): with ``/lib`` a
    link into the host's read-only ``/usr`` and no modules there (a host whose kernel has none on
    disk), ``/lib`` becomes a directory of the node's own, linking every entry of ``/usr/lib``, with an
    empty ``modules``."""
    lib = rootfs / "lib"
    if not lib.is_symlink() or os.readlink(lib).strip("/") != "usr/lib" or Path("/usr/lib/modules").exists():
        return
    lib.unlink()
    lib.mkdir()
    for entry in sorted(Path("/usr/lib").iterdir()):
        (lib / entry.name).symlink_to(entry)
    (lib / "modules").mkdir()


def _machine_id(node_root: Path) -> str:
    """The node's machine id (32 hex digits), made on its first boot and kept beside its disks."""
    kept = node_root / "machine-id"
    try:
        text = kept.read_text().strip()
    except FileNotFoundError:
        text = ""
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        text = os.urandom(16).hex()
        kept.write_text(text + "\n")
    return text


def enter(rootfs: Path) -> None:
    """Become the node: in a mount namespace of this boot's own, mount ``/proc`` for this PID
    namespace (``/proc/sys`` read-only but for ``net``) and make ``rootfs`` the namespace's root.

    The root is pivoted, not chrooted into: joining a mount namespace (``setns``) puts the joiner at
    the namespace's root mount, and under a chroot that mount is the host's ``/``. runc's ``exec``
    joins the container's namespace, made from the node's, so every ``kubectl exec`` landed in the
    host's root file system rather than the container's. The boot's namespace is a slave of the
    launcher's (it sees the disks mounted there; its own mounts end with it, as on a reboot) and
    shared again below its new root (the kubelet's volume mounts reach containerd, as on Talos).

    Runs in a new boot's PID 1 between fork and exec (the launcher's ``preexec``), so it does no
    more than a few system calls.
    """
    linux.unshare(linux.CLONE_NEWNS)
    # pivot_root refuses a shared root or new root: the boot receives the launcher's mounts only.
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_SLAVE)
    proc_dir = str(rootfs / "proc")
    linux.mount("proc", proc_dir, "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    # The kernel settings under /proc/sys are the host's (but for net, this namespace's own): a
    # read-only bind over them keeps everything in the node, root or not, from changing them.
    sysctls, net = f"{proc_dir}/sys", f"{proc_dir}/sys/net"
    linux.mount(sysctls, sysctls, None, linux.MS_BIND | linux.MS_REC)
    linux.mount(
        None,
        sysctls,
        None,
        linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV,
    )
    linux.mount(net, net, None, linux.MS_BIND | linux.MS_REC)
    # A bind of a read-only mount is read-only too: net (this namespace's own) is made writable again.
    linux.mount(None, net, None, linux.MS_BIND | linux.MS_REMOUNT | linux.MS_NOSUID | linux.MS_NODEV)
    # pivot_root(".", "."): the old root is stacked under the new one, then detached (as runc does).
    os.chdir(rootfs)
    linux.pivot_root(".", ".")
    linux.umount(".", linux.MNT_DETACH)
    os.chdir("/")
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_SHARED)
