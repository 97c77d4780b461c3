"""A cluster's own image registry (``cluster create --with-registry``, an Ichor extension): Debian's
``docker-registry`` serving plain http on the CIDR's first address, port 5000, the Air-gapped guide's
"internal registry" run for the user.

For container nodes that address is the bridge's gateway, the one address every node reaches and
nothing outside the machine does; for process nodes it is the loopback address the discovery
service also uses. The registry stores under the cluster's state directory (``registry/``), logs
every request to ``registry.log`` (the combined-format access log proves which host pulled what)
and carries the cluster's marks, so ``cluster show``/``destroy`` find it and destroy stops it by
PID like every other process of the cluster.

This module starts the registry and waits until it answers; pushing images to it is
:mod:`ichor.images`'s.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from ichor.images import MirrorSpec, parse_mirror, registry_answers
from ichor.machinery import proc
from ichor.machinery.errors import MachineryError
from ichor.provision._network import wait_until_logged
from ichor.provision._processes import tags

__all__ = ["REGISTRY_PORT", "check_installed", "mirrors_for", "registry_log", "start_registry"]

REGISTRY_PORT = 5000
REGISTRY_HINT = "install it (Debian: `apt-get install -y docker-registry`; `bash run.sh` does it as root)"


def registry_log(state_dir: Path) -> Path:
    return state_dir / "registry.log"


def mirrors_for(hosts_text: str, address: str, *, flag: str = "--with-registry") -> list[MirrorSpec]:
    """``--with-registry docker.io,ghcr.io``: a mirror entry per host, each to the cluster's registry."""
    hosts = [h.strip() for h in hosts_text.split(",") if h.strip()]
    if not hosts:
        raise MachineryError(
            f"{flag} {hosts_text!r} names no registry to mirror",
            hint=f"pass the registries whose images the cluster's registry serves, e.g. {flag} docker.io,ghcr.io",
        )
    return [parse_mirror(f"{host}=http://{address}:{REGISTRY_PORT}", flag=flag) for host in hosts]


def check_installed() -> str:
    """The ``docker-registry`` binary; refused, saying how to install it, when there is none."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise MachineryError(
            "docker-registry (the cluster's image registry) is not installed", hint=REGISTRY_HINT
        )
    return binary


def _config(state_dir: Path, address: str) -> Path:
    config = state_dir / "registry.yml"
    # The secret signs upload state between requests of one registry; a fresh one per cluster.
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n"
        f"storage:\n  filesystem:\n    rootdirectory: {state_dir / 'registry'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: {address}:{REGISTRY_PORT}\n  secret: {secrets.token_hex(16)}\n"
        "  headers:\n    X-Content-Type-Options: [nosniff]\n"
    )
    config.chmod(0o600)
    return config


def start_registry(state_dir: Path, address: str) -> tuple[str, proc.Background]:
    """``docker-registry serve`` on ``address:5000``, marked as the cluster's; waits until ``/v2/``
    answers. Returns ``host:port`` and the process."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise MachineryError(
            "docker-registry (the cluster's image registry) is not installed", hint=REGISTRY_HINT
        )
    endpoint = f"{address}:{REGISTRY_PORT}"
    log = registry_log(state_dir)
    # Started again (the registry came back): only what this run logs counts.
    since = log.stat().st_size if log.exists() else 0
    child = proc.start([binary, "serve", str(_config(state_dir, address))], output=log, env=tags(state_dir),
                       hint=REGISTRY_HINT)  # fmt: skip
    wait_until_logged(
        child, log, f"listening on {endpoint}", f"the cluster's registry did not start on {endpoint}",
        hint=f"see {log}; is port {REGISTRY_PORT} on {address} in use?", since=since,
    )  # fmt: skip
    if not registry_answers(endpoint):
        child.stop(timeout=2)
        raise MachineryError(
            f"the cluster's registry listens on {endpoint} but http://{endpoint}/v2/ does not answer 200",
            hint=f"see {log}",
        )
    return endpoint, child
