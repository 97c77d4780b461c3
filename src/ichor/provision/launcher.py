"""``python -m ichor.provision.launcher``: keep one node process running across reboots.

The node exits with ``EXIT_REBOOT`` to reboot (started again after :data:`REBOOT_PAUSE`),
``EXIT_POWEROFF`` to power off (the launcher exits too); any other exit is a crash, logged and restarted after a pause that
doubles with each crash in a row (:class:`Backoff`), back to the first pause after a run long
enough to count as healthy. SIGTERM to the launcher powers the node off cleanly, also during a
pause.

With ``--container ROOTFS`` the launcher is a container node's runtime
(:mod:`ichor.provision._namespaces`): it moves into the node's own mount, UTS, IPC and network
namespaces (and, with ``--cgroup``, into the node's own cgroups and a cgroup namespace rooted there),
builds the node's root at ROOTFS, waits for ``eth0``, and starts every boot of machined
as PID 1 of a fresh PID namespace rooted there, so a reboot keeps the node's network and disks.

With ``--vm LAUNCH.json`` the node is a QEMU VM (:mod:`ichor.provision._qemu`): QEMU runs with
``-no-reboot``, so a guest reboot ends it with code 0, which counts as a reboot here; the launcher
also serves the node's config for ``talos.config=`` while it runs.

What the launcher is doing is written (atomically) to ``--state-file`` for ``cluster show``:
:class:`~ichor.provision._record.LauncherState`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from ichor.machined.platform import EXIT_POWEROFF, EXIT_REBOOT
from ichor.machinery import proc
from ichor.machinery.files import write_atomic
from ichor.provision._record import POWERED_OFF, RUNNING, WAITING, LauncherState


@dataclass
class Backoff:
    """The pause before restarting a crashed node: ``first``, doubled per crash in a row up to
    ``limit``; a run of ``healthy_run`` seconds or more ends the row."""

    first: float = 1.0
    limit: float = 30.0
    healthy_run: float = 60.0
    crashes: int = 0
    """Crashes in a row, the last one included."""

    def after_crash(self, ran_for: float) -> float:
        if ran_for >= self.healthy_run:
            self.crashes = 0
        self.crashes += 1
        return float(min(self.limit, self.first * 2 ** (self.crashes - 1)))

    def reset(self) -> None:
        self.crashes = 0


class Node(Protocol):
    @property
    def pid(self) -> int: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def signal_group(self, sig: int) -> None: ...


REBOOT_PAUSE = 2.0
"""Seconds a rebooting node stays down, as a machine does. Talos's own ``reboot --wait`` watches
events again 1 s after the services stopped, with no history (``--tail 0``): a node back and
ready within that second is never seen rebooting, and the client waits until its timeout. Only
an ``Unavailable`` answer makes it replay the new boot's events."""


class Launcher:
    """The restart loop, with its clocks and the way it starts a node injectable for tests."""

    def __init__(
        self,
        start_node: Callable[[], Node],
        state_file: Path | None,
        log: Path,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        pid: int = 0,
        grace: float = 30.0,
        reboot_pause: float | None = None,
    ) -> None:
        self.start_node = start_node
        self.state_file = state_file
        self.log = log
        self.backoff = backoff or Backoff()
        self.clock, self.wall, self.sleep = clock, wall, sleep
        self.pid = pid
        self.grace = grace
        self.reboot_pause = REBOOT_PAUSE if reboot_pause is None else reboot_pause
        self.stopping_since: float | None = None
        self.node: Node | None = None

    def stop(self) -> None:
        """Power the node off (safe inside a signal handler: it only signals)."""
        self.stopping_since = self.stopping_since or self.clock()
        if self.node is not None:
            self.node.signal_group(signal.SIGTERM)

    def run(self) -> int:
        last_exit: int | None = None
        while self.stopping_since is None:
            started = self.clock()
            self.node = self.start_node()
            if self.stopping_since is not None:  # stopped while the node was starting
                self.node.signal_group(signal.SIGTERM)
            self._record(RUNNING, last_exit)
            code = self._wait(self.node)
            last_exit = code
            if self.stopping_since is not None or code == EXIT_POWEROFF:
                break
            if code == EXIT_REBOOT:
                self.backoff.reset()
                delay = self.reboot_pause
            else:
                delay = self.backoff.after_crash(self.clock() - started)
                with self.log.open("a") as log:
                    log.write(f"launcher: node exited with code {code}; restarting in {delay:.1f}s\n")
            self._record(WAITING, code, restart_at=self.wall() + delay)
            # In short steps: a SIGTERM during the pause powers off at once.
            until = self.clock() + delay
            while self.stopping_since is None and (left := until - self.clock()) > 0:
                self.sleep(min(0.2, left))
        self._record(POWERED_OFF, last_exit)
        return 0

    def _record(self, state: str, last_exit: int | None, restart_at: float = 0.0) -> None:
        if self.state_file is None:
            return
        node_pid = self.node.pid if self.node is not None and state == RUNNING else 0
        record = LauncherState(self.pid, state, node_pid, self.backoff.crashes, last_exit, restart_at)
        write_atomic(self.state_file, json.dumps(asdict(record)), mode=0o600)

    def _wait(self, node: Node) -> int:
        """The node's exit code; SIGKILL its group if it ignores a stop for ``grace`` seconds."""
        while True:
            try:
                return node.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                since = self.stopping_since
                if since is not None and self.clock() - since > self.grace:
                    node.signal_group(signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.provision.launcher")
    parser.add_argument("--root", type=Path)
    parser.add_argument("--address")
    parser.add_argument("--vm", type=Path, metavar="LAUNCH.json",
                        help="run a QEMU VM described by this file instead of machined (qemu nodes)")  # fmt: skip
    parser.add_argument("--log", required=True, type=Path, help="where the node's output goes")
    parser.add_argument("--state-file", type=Path, help="where to write what the launcher is doing")
    parser.add_argument("--container", type=Path, metavar="ROOTFS",
                        help="run the node in namespaces of its own, with its root built at ROOTFS")  # fmt: skip
    parser.add_argument("--hostname", help="the container node's initial hostname (--container)")
    parser.add_argument("--config", type=Path, help="the machine config the container node boots with")
    parser.add_argument("--cgroup", metavar="CLUSTER/NODE",
                        help="the container node's cgroup directory (made by the provisioner) to join in every hierarchy")  # fmt: skip
    parser.add_argument("--extension", action="append", default=[], metavar="DIR",
                        help="a system extension to layer into the container node (repeatable)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.vm is None and (args.root is None or args.address is None):
        parser.error("--root and --address are required (unless --vm)")
    machined = [sys.executable, "-m", "ichor.machined", "--address", str(args.address)]
    start_node: Callable[[], Node]
    close: Callable[[], None] = lambda: None  # noqa: E731
    if args.vm is not None:
        from ichor.provision._qemu import vm_node_starter

        start_node, close = vm_node_starter(args.vm)
    elif args.container is None:

        def start_node() -> Node:
            return proc.start([*machined, "--root", str(args.root)], output=args.log)

    else:
        from ichor.provision import _cgroups
        from ichor.provision._namespaces import NodeNamespaces

        found: list[_cgroups.Hierarchy] = []
        if args.cgroup is not None:
            found = _cgroups.current()
            cluster, _, node_name = args.cgroup.partition("/")
            _cgroups.join(_cgroups.node_dirs(found, cluster, node_name))
        namespaces = NodeNamespaces(args.container, args.root, args.hostname or "talos", cgroups=found)
        namespaces.enter()
        from ichor.provision._extensions import layer

        layer(args.container, args.extension)
        inside = [*machined, "--root", "/", "--platform", "container"]
        if args.config is not None:
            # Into the node's tmpfs: STATE keeps it once machined has loaded it, as Talos's
            # docker nodes boot from their USERDATA.
            (args.container / "system/config").mkdir(parents=True, exist_ok=True)
            (args.container / "system/config/user-data").write_bytes(args.config.read_bytes())
            inside += ["--config", "/system/config/user-data"]
        namespaces.wait_for_interface()

        def start_node() -> Node:
            return namespaces.start(inside, args.log)

    launcher = Launcher(start_node, args.state_file, args.log, pid=os.getpid())

    def on_term(signum: int, frame: FrameType | None) -> None:
        launcher.stop()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        return launcher.run()
    finally:
        close()


if __name__ == "__main__":
    sys.exit(main())
