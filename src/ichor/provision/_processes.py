"""Finding and ending the processes of a local cluster, and no other process.

Every process a cluster runs (its discovery service, each node's launcher, the node's machined and
whatever machined starts, such as etcd) carries the cluster's state directory in its environment
(``ICHOR_CLUSTER``) and, for a node's processes, the node's name (``ICHOR_NODE``); children inherit
both, whatever becomes of their parent. :func:`find` scans ``/proc`` for them, so a machined whose
launcher died, or an etcd whose machined died, is still found.

A process is known by its PID *and* its start time (``/proc/<pid>/stat``), and is signalled through
a pidfd opened and then checked against that start time: a PID the kernel has since given to
another process is never signalled.

This module decides nothing: what to stop and in which order is :mod:`ichor.provision._cluster`'s.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLUSTER_ENV", "NODE_ENV", "ClusterProcess", "ProcessId", "find", "signal_and_wait", "tags"]

CLUSTER_ENV = "ICHOR_CLUSTER"
"""Names the state directory of the cluster a process belongs to."""
NODE_ENV = "ICHOR_NODE"
"""Names the node a process belongs to (absent for the cluster's discovery service)."""


def _stat_fields(pid: int) -> list[bytes] | None:
    """``/proc/<pid>/stat`` from the state field on (the command name may hold spaces and ')')."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()


@dataclass(frozen=True)
class ProcessId:
    """A process as the kernel knows it: PID and start time (clock ticks after boot)."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        """The live process with ``pid`` now; None when there is none (or only a zombie)."""
        fields = _stat_fields(pid) if pid > 0 else None
        # fields[0] is the state; the start time is stat's field 22, fields[19] here.
        if fields is None or len(fields) < 20 or fields[0] in (b"Z", b"X"):
            return None
        return cls(pid, int(fields[19]))

    def alive(self) -> bool:
        """True while this very process runs (not another one that was given its PID)."""
        return ProcessId.of(self.pid) == self


@dataclass(frozen=True)
class ClusterProcess:
    """A process of a cluster found by :func:`find`."""

    id: ProcessId
    node: str
    """The node's name; empty for the cluster's discovery service."""
    command: tuple[str, ...]

    @property
    def role(self) -> str:
        """What the process is, in the words ``cluster show`` uses."""
        if "ichor.provision.launcher" in self.command:
            return "launcher"
        if "ichor.machined" in self.command:
            return "machined"
        if "ichor.discovery" in self.command:
            return "discovery service"
        return Path(self.command[0]).name if self.command else "process"

    def describe(self) -> str:
        where = f" of {self.node}" if self.node else ""
        return f"{self.role}{where} (PID {self.id.pid})"


def tags(state_dir: Path, node: str | None = None) -> dict[str, str]:
    """The environment that marks a process (and its children) as the cluster's."""
    marks = {CLUSTER_ENV: str(state_dir)}
    if node:
        marks[NODE_ENV] = node
    return marks


def _environment(pid: int) -> dict[bytes, bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {key: value for key, _, value in pairs}


def find(state_dir: Path) -> list[ClusterProcess]:
    """Every live process marked as the cluster's, by PID (Linux ``/proc``)."""
    wanted = str(state_dir).encode()
    found: list[ClusterProcess] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        env = _environment(int(entry))
        if env.get(CLUSTER_ENV.encode()) != wanted:
            continue
        identity = ProcessId.of(int(entry))
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = tuple(part.decode(errors="replace") for part in f.read().split(b"\0") if part)
        except OSError:
            continue
        if identity is not None:
            node = env.get(NODE_ENV.encode(), b"").decode(errors="replace")
            found.append(ClusterProcess(identity, node, argv))
    return sorted(found, key=lambda p: p.id.pid)


@contextlib.contextmanager
def _pidfds(processes: Iterable[ProcessId]) -> Iterator[dict[ProcessId, int | None]]:
    """A pidfd per process still running as recorded (None where the kernel has no pidfds)."""
    fds: dict[ProcessId, int | None] = {}
    try:
        for process in processes:
            try:
                fd: int | None = os.pidfd_open(process.pid)
            except ProcessLookupError:
                continue
            except OSError:
                fd = None
            # Checked after opening: from here on the descriptor cannot name another process.
            if process.alive():
                fds[process] = fd
            elif fd is not None:
                os.close(fd)
        yield fds
    finally:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)


def _send(process: ProcessId, fd: int | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        elif process.alive():
            os.kill(process.pid, sig)


def signal_and_wait(processes: Iterable[ProcessId], sig: int, timeout: float) -> list[ProcessId]:
    """Send ``sig`` to each process still running as recorded and wait up to ``timeout`` seconds
    for all of them to end; returns those still running."""
    with _pidfds(processes) as fds:
        for process, fd in fds.items():
            _send(process, fd, sig)
        deadline = time.monotonic() + timeout
        waiting = dict(fds)
        while waiting and (left := deadline - time.monotonic()) > 0:
            with_fd = {fd: p for p, fd in waiting.items() if fd is not None}
            if len(with_fd) == len(waiting):
                # A pidfd turns readable when its process ends: no polling loop.
                poller = select.poll()
                for fd in with_fd:
                    poller.register(fd, select.POLLIN)
                for fd, _ in poller.poll(left * 1000):
                    waiting.pop(with_fd[fd], None)
            else:
                time.sleep(min(0.1, left))
                waiting = {p: fd for p, fd in waiting.items() if p.alive()}
        return [p for p in waiting if p.alive()]
