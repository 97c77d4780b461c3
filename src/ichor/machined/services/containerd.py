"""The ``containerd`` (system) and ``cri`` (Kubernetes) services: two real containerd 1.6 processes.

Both run on a node with namespaces of its own (the ``container`` platform), where Talos's paths are
real and ``/run``, ``/system/run`` are the node's own tmpfs. Their pre stage writes the
configuration (:mod:`ichor.machined.cri`): the system containerd's ``/etc/containerd/config.toml``;
for ``cri``, ``/etc/cri/containerd.toml``, ``00-base.part`` and the merge of every ``.part`` into
``/etc/cri/conf.d/cri.toml`` (a registry change rewrites ``01-registries.part``; containerd reads it
when ``cri`` starts, while ``hosts.toml`` files are read per pull). The health check asks the
server's version over its socket. containerd's own output is the service log
(``talosctl logs containerd``, ``talosctl logs cri``).

A process node shares the host's namespaces, ``/run`` and cgroups: a containerd there would be the
host's, so both services are shown ``Skipped`` with the reason and never started.
"""

from __future__ import annotations

import shutil

from ichor.machined import cri
from ichor.machined.platform import Layout, Platform
from ichor.machined.services import HealthCheck, RestartPolicy, Service, process
from ichor.machinery.files import write_atomic

__all__ = ["PROCESS_NODE_REASON", "containerd_services", "skip_reason"]

PROCESS_NODE_REASON = (
    "a process node shares the host's namespaces, /run and cgroups; containerd runs on container nodes "
    "(talosctl cluster create --provisioner container)"
)


def skip_reason(layout: Layout) -> str:
    """Why this node cannot run containerd ("" when it can)."""
    if layout.platform is Platform.PROCESS:
        return PROCESS_NODE_REASON
    if shutil.which("containerd") is None:
        return "containerd is not installed on this machine (Debian: apt-get install -y containerd runc)"
    return ""


def _health(layout: Layout, instance: cri.Instance) -> HealthCheck:
    client = cri.Ctr(layout.path(instance.address))

    async def check() -> None:
        await client.version()

    return HealthCheck(check, initial_delay=0.5, period=5.0, timeout=5.0, startup_period=0.2)


def containerd_services(layout: Layout) -> list[Service]:
    """``containerd`` and ``cri`` for this node (Skipped with the reason where they cannot run)."""
    reason = skip_reason(layout)
    if reason:
        return [
            Service(i.service, lambda _context: None, description=d, skip_reason=reason)
            for i, d in ((cri.SYSTEM, "containerd"), (cri.CRI, "CRI containerd"))
        ]

    async def system_pre() -> None:
        write_atomic(layout.path(cri.SYSTEM.config), cri.system_config(), mode=0o644)
        for path in (cri.SYSTEM.state, cri.SYSTEM.root):
            layout.path(path).mkdir(parents=True, exist_ok=True, mode=0o700)

    async def cri_pre() -> None:
        confd = layout.path(cri.CRI_CONFD)
        confd.mkdir(parents=True, exist_ok=True, mode=0o755)
        layout.path(cri.CRI_HOSTS_DIR).mkdir(parents=True, exist_ok=True, mode=0o755)
        write_atomic(layout.path(cri.CRI.config), cri.cri_config(), mode=0o644)
        write_atomic(confd / cri.CRI_BASE_PART, cri.cri_base_part(), mode=0o644)
        write_atomic(layout.path(cri.CRI_MERGED_CONFIG), cri.merge_parts(confd), mode=0o644)
        for path in (cri.CRI.state, cri.CRI.root):
            layout.path(path).mkdir(parents=True, exist_ok=True, mode=0o700)

    binary = shutil.which("containerd") or "containerd"
    return [
        Service(
            "containerd", process(cri.SYSTEM.args(binary, layout.path)), description="containerd",
            pre=system_pre, restart=RestartPolicy.FOREVER, health_check=_health(layout, cri.SYSTEM),
        ),
        Service(
            "cri", process(cri.CRI.args(binary, layout.path)), description="CRI containerd",
            pre=cri_pre, restart=RestartPolicy.FOREVER, health_check=_health(layout, cri.CRI),
        ),
    ]  # fmt: skip
