"""talosctl as a user runs it against a local cluster: a separate process with its own HOME.

Shared by the end-to-end cluster tests; the talosconfig is the one ``cluster create`` merged into
``<home>/.talos/config``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ichor.machinery import proc

_USER_CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
"""The real user's cache, read at import (before any test moves HOME): the etcd and Kubernetes that
``bash run.sh`` built live there, and a cluster made from a session fixture (set up before the
per-test HOME isolation) must find them too instead of building them again in its own HOME."""


def cli_env(home: Path) -> dict[str, str]:
    """The environment of talosctl run as a user in ``home`` (PYTHONPATH kept: a checkout run with
    ``PYTHONPATH=src`` tests its own code, not the installed one's; the real user's build cache)."""
    env = {"HOME": str(home), "TALOSCONFIG": str(home / ".talos/config"), "XDG_CACHE_HOME": _USER_CACHE}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def talosctl_in(home: Path, *args: str, timeout: float = 180) -> proc.Completed:
    env = cli_env(home)
    return proc.run([sys.executable, "-m", "ichor", *args], env=env, cwd=home, check=False, timeout=timeout)


def json_documents(text: str) -> list[dict[str, Any]]:
    """The objects of ``talosctl get -o json``'s output: one JSON object per resource, one after
    another (not a list)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        item, at = decoder.raw_decode(text, at)
        found.append(item)
    return found


NO_TALOS_GO_TYPE = frozenset({
    "DiscoveryStatuses.cluster.ichor.dev",
    "WaitStatuses.runtime.ichor.dev",
    "RegistriesConfigs.cri.talos.dev",
    "DNSUpstreams.net.talos.dev",
})  # fmt: skip
"""Types a node serves that Talos 1.7's Go client has no type for (``talos-cosi-check``'s NOTYPE): Ichor's
own, and two Talos keeps internal (no protobuf registration: DNSUpstreams holds a live proxy)."""
