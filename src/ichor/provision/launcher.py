"""``python -m ichor.provision.launcher``: keep one node process running across reboots.

The node exits with ``EXIT_REBOOT`` to reboot (started again at once), ``EXIT_POWEROFF`` to power
off (the launcher exits too); any other exit is a crash, logged and restarted after a pause that
grows with repeated crashes. SIGTERM to the launcher powers the node off cleanly.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from ichor.machined.platform import EXIT_POWEROFF, EXIT_REBOOT
from ichor.machinery import proc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ichor.provision.launcher")
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--address", required=True)
    parser.add_argument("--log", required=True, type=Path, help="where the node's output goes")
    args = parser.parse_args(argv)

    stopping_since: float | None = None
    node: proc.Background | None = None

    def on_term(signum: int, frame: FrameType | None) -> None:
        # Only signal here: waiting inside a handler would deadlock with the main loop's wait.
        nonlocal stopping_since
        stopping_since = stopping_since or time.monotonic()
        if node is not None:
            node.signal_group(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    crashes = 0
    while stopping_since is None:
        node = proc.start(
            [sys.executable, "-m", "ichor.machined", "--root", str(args.root), "--address", args.address],
            output=args.log,
        )
        code = _wait(node, lambda: stopping_since)
        if stopping_since is not None or code == EXIT_POWEROFF:
            return 0
        if code == EXIT_REBOOT:
            crashes = 0
            continue
        crashes += 1
        delay = min(30.0, 0.5 * 2**crashes)
        with args.log.open("a") as log:
            log.write(f"launcher: node exited with code {code}; restarting in {delay:.1f}s\n")
        time.sleep(delay)
    return 0


def _wait(node: proc.Background, stopping_since: Callable[[], float | None], grace: float = 30.0) -> int:
    """The node's exit code; SIGKILL its group if it ignores a stop for ``grace`` seconds."""
    while True:
        try:
            return node.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            since = stopping_since()
            if since is not None and time.monotonic() - since > grace:
                node.signal_group(signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
