"""Each container node's own cgroup subtree, so nothing a node runs lands in the host's hierarchies.

The host's cgroups are v1 (hybrid: v1 controllers, an empty v2 at ``/sys/fs/cgroup/unified``).
containerd with cgroupfs puts a task at ``/<namespace>/<id>`` of every hierarchy it sees; in the
host's that would be ``/sys/fs/cgroup/<ctrl>/system/<id>``, shared by every node. So every node
lives in ``<ctrl>/<own>/ichor/<cluster>/<node>`` of every mounted hierarchy, ``<own>`` being the
cgroup the provisioner itself runs in (``/`` on a plain host: a node never leaves a limit its
caller was put under). The launcher moves itself there (:func:`join`) before it unshares a cgroup
namespace, and the node's root mounts each hierarchy at ``/sys/fs/cgroup/<name>``
(:func:`mount_in`), where the namespace shows the node's subtree as the root.

``--cpus``/``--memory`` (Talos's docker provisioner's ``NanoCPUs``/``Memory``) become the node
directory's CFS quota (period 100 ms, quota = CPUs x period, as Docker sets it) and memory limit
(:func:`limit`): everything the node runs, its containerd, etcd and kubelet included, shares them.

:func:`remove` undoes it bottom-up once the cluster's processes are gone; a task still in a
directory then is the cluster's own leftover (a shim that escaped its PID namespace) and is killed
by PID first. Failures are :class:`~ichor.machinery.errors.MachineryError` naming the directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ichor.machinery.errors import MachineryError
from ichor.provision import _linux as linux

__all__ = [
    "PARENT",
    "Hierarchy",
    "Limits",
    "cluster_dirs",
    "create",
    "hierarchies",
    "join",
    "limit",
    "mount_in",
    "node_dirs",
    "parse_cpus",
    "remove",
]

PARENT = "ichor"
"""Every cluster's subtree hangs under ``<own>/ichor`` in each hierarchy."""
_NOT_CONTROLLERS = {"rw", "ro", "xattr", "noprefix", "clone_children", "cpuset_v2_mode", "nosuid", "nodev"}
_CPUSET_FILES = ("cpuset.cpus", "cpuset.mems")
"""A v1 cpuset cgroup takes no task until these are set; a new one starts empty."""
REMOVE_TIMEOUT = 5.0


@dataclass(frozen=True)
class Hierarchy:
    mount: Path
    """Where the host mounts it (``/sys/fs/cgroup/cpu``)."""
    options: str
    """The v1 controllers as mount options (``cpu``, ``cpu,cpuacct``, ``name=systemd``); ``""`` for v2."""
    own: str
    """The caller's cgroup in it, relative to the mount (``""`` at its root)."""

    @property
    def version(self) -> int:
        return 2 if not self.options else 1

    @property
    def name(self) -> str:
        """The directory under the node's ``/sys/fs/cgroup``: the host's, when it mounts it there."""
        if self.mount.parent == Path("/sys/fs/cgroup"):
            return self.mount.name
        return self.options or "unified"

    def base(self) -> Path:
        return self.mount / self.own if self.own else self.mount


def hierarchies(mountinfo: str, proc_cgroup: str) -> list[Hierarchy]:
    """The mounted hierarchies and the caller's cgroup in each, from ``/proc/self/mountinfo`` and
    ``/proc/self/cgroup``. A hierarchy the process is in but nobody mounted is left out: it can
    neither be entered here nor seen by the node."""
    own: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            own[",".join(sorted(parts[1].split(","))) if parts[1] else ""] = parts[2]
    found: list[Hierarchy] = []
    seen: set[str] = set()
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        after = fields[fields.index("-") + 1 :]
        fstype, super_options = after[0], after[2] if len(after) > 2 else ""
        if fstype == "cgroup2":
            key = ""
        elif fstype == "cgroup":
            wanted = [o for o in super_options.split(",") if o not in _NOT_CONTROLLERS]
            key = ",".join(sorted(o for o in wanted if not o.startswith("release_agent=")))
        else:
            continue
        if key in seen or key not in own:
            continue
        root, mount = fields[3], Path(fields[4].replace("\\040", " "))
        path = Path(own[key])
        if not path.is_relative_to(root):
            continue  # our cgroup is outside what this mount shows
        seen.add(key)
        found.append(Hierarchy(mount, key, str(path.relative_to(root)).strip("/").removeprefix(".")))
    return found


def current() -> list[Hierarchy]:
    return hierarchies(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())


def cluster_dirs(found: Iterable[Hierarchy], cluster: str) -> list[Path]:
    return [h.base() / PARENT / cluster for h in found]


def node_dirs(found: Iterable[Hierarchy], cluster: str, node: str) -> list[Path]:
    for name in (cluster, node):
        if not name or "/" in name or name in (".", ".."):
            raise MachineryError(
                f"{name!r} cannot name a cgroup", hint="use a cluster --name of letters, digits and '-'"
            )
    return [h.base() / PARENT / cluster / node for h in found]


def create(found: Iterable[Hierarchy], cluster: str, node: str) -> list[Path]:
    """Make the node's directory in every hierarchy (cpuset's limits copied down level by level)."""
    made = []
    for hierarchy in found:
        target = hierarchy.base() / PARENT / cluster / node
        level = hierarchy.base()
        for part in target.relative_to(level).parts:
            parent, level = level, level / part
            try:
                level.mkdir(exist_ok=True)
                for name in _CPUSET_FILES:
                    if (level / name).exists() and not (level / name).read_text().strip():
                        (level / name).write_text((parent / name).read_text())
            except OSError as exc:
                raise MachineryError(
                    f"cannot make cgroup {level}: {exc.strerror}",
                    hint="container nodes need root and writable cgroup hierarchies under /sys/fs/cgroup",
                ) from exc
        made.append(target)
    return made


CFS_PERIOD_US = 100_000
"""Docker's CFS period: ``--cpus 1.5`` is a quota of 150 ms every 100 ms."""
MIN_CFS_QUOTA_US = 1_000
"""The kernel refuses a smaller quota (``EINVAL``)."""


def parse_cpus(text: str, *, flag: str = "--cpus") -> int:
    """A share of CPUs as a rational number (``2.0``, ``0.5``, ``3/2``) in nano CPUs, as Talos's
    ``parseCPUShare``; its errors name ``flag``."""
    try:
        cpus = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise MachineryError(
            f"error parsing {flag}: failed to parsing as a rational number: {text}",
            hint=f"pass {flag} as a share of CPUs, e.g. {flag} 2.0 or {flag} 0.5",
        ) from None
    nano = cpus * 1_000_000_000
    if nano.denominator != 1:
        raise MachineryError(f"error parsing {flag}: value is too precise", hint=f"e.g. {flag} 1.5")
    if nano <= 0:
        raise MachineryError(f"{flag} {text}: a node needs a share of CPUs above 0", hint=f"e.g. {flag} 1.5")
    return int(nano)


@dataclass(frozen=True)
class Limits:
    """One node's limits; 0 is none."""

    nano_cpus: int = 0
    memory: int = 0
    """Bytes."""

    @classmethod
    def of(cls, cpus: str, memory_mb: int) -> Limits:
        """From the record's ``--cpus`` text and ``--memory`` MiB ("" and 0: no limit)."""
        return cls(parse_cpus(cpus) if cpus else 0, memory_mb * 1024 * 1024)

    @property
    def cfs_quota_us(self) -> int:
        return self.nano_cpus * CFS_PERIOD_US // 1_000_000_000


def _controllers(hierarchy: Hierarchy, directory: Path) -> set[str]:
    if hierarchy.version == 1:
        return set(hierarchy.options.split(","))
    try:
        return set((directory / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _enable_v2(hierarchy: Hierarchy, directory: Path, wanted: set[str]) -> None:
    """cgroup v2 hands a controller to a directory only when every ancestor's
    ``cgroup.subtree_control`` enables it; enable those the hierarchy has, from its base down."""
    available = _controllers(hierarchy, hierarchy.base()) & wanted
    level = hierarchy.base()
    for part in directory.relative_to(level).parts:
        for name in sorted(available):
            try:
                (level / "cgroup.subtree_control").write_text(f"+{name}\n")
            except OSError as exc:
                raise MachineryError(
                    f"cannot enable the {name} controller in {level}: {exc.strerror}",
                    hint="leave --cpus/--memory out, or run create from a cgroup whose subtree may use them",
                ) from exc
        level = level / part


def _write(path: Path, value: str, flag: str) -> None:
    try:
        path.write_text(f"{value}\n")
    except OSError as exc:
        raise MachineryError(
            f"{flag}: cannot write {value} to {path}: {exc.strerror}",
            hint=f"leave {flag} out, or give a value this machine accepts (see {path.parent})",
        ) from exc


def limit(found: Iterable[Hierarchy], dirs: Iterable[Path], limits: Limits) -> list[str]:
    """Write ``limits`` into a node's directories (``dirs``, one per hierarchy of ``found``, as
    :func:`create` returns them); returns what was set. A limit no mounted hierarchy can take is
    refused, naming the controller."""
    if limits.nano_cpus and limits.cfs_quota_us < MIN_CFS_QUOTA_US:
        raise MachineryError(
            f"--cpus {limits.nano_cpus / 1e9:g} is below the kernel's smallest CFS quota "
            f"({MIN_CFS_QUOTA_US} us every {CFS_PERIOD_US} us: 0.01 CPUs)",
            hint="pass --cpus 0.01 or more",
        )
    done: list[str] = []
    cpu_set = memory_set = False
    for hierarchy, directory in zip(found, dirs, strict=True):
        wanted = {n for n, on in (("cpu", limits.nano_cpus), ("memory", limits.memory)) if on}
        if not wanted:
            break
        if hierarchy.version == 2:
            _enable_v2(hierarchy, directory, wanted)
        controllers = _controllers(hierarchy, directory)
        if limits.nano_cpus and "cpu" in controllers and not cpu_set:
            if hierarchy.version == 1:
                _write(directory / "cpu.cfs_period_us", str(CFS_PERIOD_US), "--cpus")
                _write(directory / "cpu.cfs_quota_us", str(limits.cfs_quota_us), "--cpus")
            else:
                _write(directory / "cpu.max", f"{limits.cfs_quota_us} {CFS_PERIOD_US}", "--cpus")
            cpu_set = True
            done.append(
                f"CPU limit {limits.nano_cpus / 1e9:g} ({limits.cfs_quota_us} us every {CFS_PERIOD_US} us)"
            )
        if limits.memory and "memory" in controllers and not memory_set:
            name = "memory.limit_in_bytes" if hierarchy.version == 1 else "memory.max"
            _write(directory / name, str(limits.memory), "--memory")
            memory_set = True
            done.append(f"memory limit {limits.memory // (1024 * 1024)} MiB ({name})")
    for asked, was_set, controller, flag in (
        (limits.nano_cpus, cpu_set, "cpu", "--cpus"),
        (limits.memory, memory_set, "memory", "--memory"),
    ):
        if asked and not was_set:
            raise MachineryError(
                f"{flag}: no cgroup hierarchy on this machine has the {controller} controller the limit needs",
                hint=f"leave {flag} out (container nodes then share this machine's {controller} unlimited)",
            )
    return done


def join(dirs: Iterable[Path], pid: int = 0) -> None:
    """Move ``pid`` (0: the caller) into each directory."""
    for directory in dirs:
        try:
            (directory / "cgroup.procs").write_text(f"{pid or os.getpid()}\n")
        except OSError as exc:
            raise MachineryError(
                f"cannot move PID {pid or os.getpid()} into cgroup {directory}: {exc.strerror}",
                hint="the provisioner makes it before starting the launcher; see `talosctl cluster create`'s output",
            ) from exc


def mount_in(rootfs: Path, found: Iterable[Hierarchy]) -> None:
    """The node's ``/sys/fs/cgroup``: a tmpfs with each hierarchy mounted in it. Called inside the
    node's mount and cgroup namespaces, so each mount's root is the node's own directory."""
    target = rootfs / "sys/fs/cgroup"
    flags = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
    linux.mount("tmpfs", str(target), "tmpfs", flags, "mode=755")
    for hierarchy in found:
        (target / hierarchy.name).mkdir()
        if hierarchy.version == 2:
            linux.mount("cgroup2", str(target / hierarchy.name), "cgroup2", flags)
        else:
            linux.mount("cgroup", str(target / hierarchy.name), "cgroup", flags, hierarchy.options)
    # Nothing but the hierarchies may be added there, as on Talos.
    linux.mount(None, str(target), None, linux.MS_REMOUNT | linux.MS_RDONLY | flags)


def _tasks(directory: Path) -> list[int]:
    try:
        return [int(pid) for pid in (directory / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove(
    dirs: Iterable[Path],
    *,
    kill: Callable[[int, int], None] = os.kill,
    sleep: Callable[[float], None] = time.sleep,
    timeout: float = REMOVE_TIMEOUT,
) -> list[str]:
    """Remove each cluster directory and everything under it, deepest first, then the ``ichor``
    parent if nothing else is in it. Returns what was done (the tasks killed); raises naming the
    first directory that would not go."""
    done: list[str] = []
    for top in dirs:
        if not top.is_dir():
            continue
        below = sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True)
        for directory in below:
            deadline = time.monotonic() + timeout
            while tasks := _tasks(directory):
                for pid in tasks:
                    with contextlib.suppress(ProcessLookupError):
                        kill(pid, signal.SIGKILL)
                done.append(f"killed leftover PID(s) {' '.join(map(str, tasks))} in {directory}")
                if time.monotonic() > deadline:
                    break
                sleep(0.05)
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise MachineryError(
                    f"cannot remove cgroup {directory}: {exc.strerror}",
                    hint=f"see what is still in it: `cat {directory}/cgroup.procs`; remove it with `rmdir` once empty",
                ) from exc
        with contextlib.suppress(OSError):
            top.parent.rmdir()  # the shared ichor parent, once no other cluster is under it
    return done
