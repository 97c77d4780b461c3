"""What ``talosctl cluster create`` waits for once etcd is bootstrapped, as ``talosctl health``
runs it (:mod:`ichor.client.health`).

Talos's ``cluster create`` waits (``--wait``, ``--wait-timeout 20m``) for every stage of the health
check. Container nodes with ``--kubernetes-images local`` run Kubernetes from images served by the
cluster's own registry, so create waits for all of it too. The others wait for the etcd stages only
and say why: process nodes run no kubelet, and with ``--kubernetes-images upstream`` the nodes pull
the public images, which may take long or, with no route to the registries, never finish (the
Kubernetes stages are ``talosctl health``'s to check then).

``--skip-boot-phase-finished-check`` (Talos 1.7) waits for Talos's pre-boot-sequence stages only;
``--skip-k8s-node-readiness-check`` (Talos 1.8's, accepted here) for those and the control plane's
components, not for the Nodes to report Ready (:func:`narrow`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from ichor.client.health import ETCD_CHECKS, KUBERNETES_CHECKS, NODE_CHECKS, REACHABLE

if TYPE_CHECKING:
    from ichor.client.health import ClusterInfo
    from ichor.machinery.clientconfig import GlobalOptions

__all__ = [
    "K8S_COMPONENTS",
    "PRE_BOOT_SEQUENCE",
    "REACHABLE",
    "WaitPlan",
    "narrow",
    "split_plan",
    "wait_healthy",
    "wait_plan",
]

PRE_BOOT_SEQUENCE = (
    *ETCD_CHECKS,
    *NODE_CHECKS,
    "kubelet to be healthy",
    "all nodes to finish boot sequence",
)
"""Talos's ``check.PreBootSequenceChecks`` (despite its name, its last stage is the boot sequence)."""
K8S_COMPONENTS = (
    "all k8s nodes to report",
    "all control plane static pods to be running",
    "all control plane components to be ready",
)
"""Talos 1.8's ``check.K8sComponentsReadinessChecks``."""


@dataclass(frozen=True)
class WaitPlan:
    stages: tuple[str, ...]
    """The health stages create waits for, in ``talosctl health``'s order."""
    skipped: str = ""
    """Why the Kubernetes stages are left out (empty when they are waited for)."""

    @property
    def kubernetes(self) -> bool:
        return bool(set(self.stages) & set(KUBERNETES_CHECKS))


def wait_plan(*, container: bool, kubernetes_images: str, why_not: str = "") -> WaitPlan:
    """The stages to wait for on a cluster of ``container`` (or process) nodes whose Kubernetes
    images are ``kubernetes_images`` (``local`` or ``upstream``); ``why_not``: the Kubernetes stages
    are left out, for that reason."""
    talos = (*ETCD_CHECKS, *NODE_CHECKS)
    if why_not:
        return WaitPlan(talos, why_not)
    if not container:
        return WaitPlan(
            talos, "process nodes run no Kubernetes (no kubelet); the etcd stages are their health"
        )
    if kubernetes_images != "local":
        return WaitPlan(
            talos,
            f"--kubernetes-images {kubernetes_images} leaves the nodes to pull Kubernetes from the public "
            "registries, which this machine may never reach; check it with `talosctl health` (or pass "
            "--kubernetes-images local to have create wait for it)",
        )
    return WaitPlan((*talos, *KUBERNETES_CHECKS))


def narrow(
    plan: WaitPlan, *, skip_boot_phase_finished: bool = False, skip_node_readiness: bool = False
) -> WaitPlan:
    """``plan`` without the stages ``--skip-boot-phase-finished-check`` (Talos 1.7: the pre-boot
    sequence stages only) or ``--skip-k8s-node-readiness-check`` (Talos 1.8: those and the control
    plane's components) leave out."""
    if skip_boot_phase_finished:
        kept: tuple[str, ...] = PRE_BOOT_SEQUENCE
    elif skip_node_readiness:
        kept = (*PRE_BOOT_SEQUENCE, *K8S_COMPONENTS)
    else:
        return plan
    return WaitPlan(tuple(s for s in plan.stages if s in kept), plan.skipped)


def split_plan(plan: WaitPlan) -> tuple[WaitPlan, WaitPlan]:
    """``plan``'s etcd and node stages and its Kubernetes stages (create reports each part when it passes)."""
    return (
        WaitPlan(tuple(n for n in plan.stages if n not in KUBERNETES_CHECKS), plan.skipped),
        WaitPlan(tuple(n for n in plan.stages if n in KUBERNETES_CHECKS)),
    )


async def wait_healthy(
    options: GlobalOptions,
    info: ClusterInfo,
    plan: WaitPlan,
    timeout: float,
    progress: Callable[[str], None],
) -> None:
    """Wait for ``plan``'s stages of ``talosctl health`` over ``info``'s nodes, the Kubernetes ones
    through the first control plane's admin kubeconfig, within ``timeout`` seconds (at least one)."""
    from ichor.client import Client
    from ichor.client.health import cluster_checks, wait_for

    async with Client.from_options(options, connect_timeout=3) as client:
        checks = [c for c in cluster_checks(client, info) if c.name in plan.stages]
        await wait_for(checks, timeout=timedelta(seconds=max(timeout, 1.0)), report=progress, interval=0.5)
