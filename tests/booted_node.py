"""The session's one booted control plane node process (``booted_node`` in conftest.py), shared by
the read-only and the self-restoring end-to-end files (introspection, edit, patch, netstat, support):
configured from a generated controlplane.yaml in STATE, its API answering ``version``."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster_helpers import talosctl_in
from conftest import LOOPBACK_DISCOVERY
from test_e2e_node import NodeProcess

from ichor.machinery import proc

BOOT_TIMEOUT = 30


class Node:
    """A booted node and the talosctl arguments that reach it."""

    def __init__(self, process: NodeProcess, home: Path) -> None:
        self.process = process
        self.home = home
        self.base = ("--talosconfig", str(home / "talosconfig"), "-e", process.address, "-n", process.address)

    def talosctl(self, *args: str) -> proc.Completed:
        return talosctl_in(self.home, *self.base, *args, timeout=60)


@contextmanager
def booted(home: Path) -> Iterator[Node]:
    """A configured control plane node process under ``home``, stopped by PID on exit."""
    address = f"127.{random.randint(100, 199)}.{random.randint(0, 255)}.{random.randint(2, 250)}"
    generated = talosctl_in(
        home, "gen", "config", "inspect", f"https://{address}:6443", "--config-patch", LOOPBACK_DISCOVERY
    )
    assert generated.exit_code == 0, generated.stderr
    process = NodeProcess(home / "node", address)
    state = process.root / "system/state"
    state.mkdir(parents=True)
    (state / "config.yaml").write_text((home / "controlplane.yaml").read_text())
    (state / "config.yaml").chmod(0o600)
    process.start()
    try:
        process.wait_console("booting as controlplane")
        node = Node(process, home)
        deadline = time.monotonic() + BOOT_TIMEOUT
        while node.talosctl("version").exit_code != 0:
            assert time.monotonic() < deadline, "the node's API did not come up"
            time.sleep(0.3)
        yield node
    finally:
        process.stop()
