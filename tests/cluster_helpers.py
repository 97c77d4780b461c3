"""talosctl as a user runs it against a local cluster: a separate process with its own HOME.

Shared by the end-to-end cluster tests; the talosconfig is the one ``cluster create`` merged into
``<home>/.talos/config``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ichor.machinery import proc


def talosctl_in(home: Path, *args: str, timeout: float = 180) -> proc.Completed:
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config")}
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, cwd=home, check=False, timeout=timeout)
