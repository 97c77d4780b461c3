"""talosctl as a user runs it against a local cluster: a separate process with its own HOME.

Shared by the end-to-end cluster tests; the talosconfig is the one ``cluster create`` merged into
``<home>/.talos/config``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ichor.machinery import proc


def cli_env(home: Path) -> dict[str, str]:
    """The environment of talosctl run as a user in ``home`` (PYTHONPATH kept: a checkout run with
    ``PYTHONPATH=src`` tests its own code, not the installed one's)."""
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def talosctl_in(home: Path, *args: str, timeout: float = 180) -> proc.Completed:
    env = cli_env(home)
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, cwd=home, check=False, timeout=timeout)
