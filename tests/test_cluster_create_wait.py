"""What ``talosctl cluster create`` waits for (``--wait``, ``--wait-timeout``): every stage of
``talosctl health`` where the nodes run Kubernetes from local images, the etcd stages elsewhere."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from ichor.client.health import CHECK_NAMES, ETCD_CHECKS, KUBERNETES_CHECKS, NODE_CHECKS, REACHABLE
from ichor.provision import _cluster
from ichor.provision._wait import WaitPlan, split_plan, wait_plan


def test_container_nodes_with_local_images_wait_for_every_stage_as_talos_does() -> None:
    plan = wait_plan(container=True, kubernetes_images="local")
    assert plan.stages == tuple(n for n in CHECK_NAMES if n != REACHABLE)
    assert plan.stages[-1] == "all k8s nodes to report schedulable"
    assert plan.kubernetes and plan.skipped == ""
    etcd, kubernetes = split_plan(plan)
    assert (etcd.stages, kubernetes.stages) == ((*ETCD_CHECKS, *NODE_CHECKS), KUBERNETES_CHECKS)
    assert not etcd.kubernetes and kubernetes.kubernetes


@pytest.mark.parametrize(
    ("container", "images", "why"),
    [(False, "local", "process nodes run no Kubernetes"), (True, "upstream", "--kubernetes-images local")],
)
def test_nodes_without_local_kubernetes_wait_for_etcd_and_say_why(
    container: bool, images: str, why: str
) -> None:
    plan = wait_plan(container=container, kubernetes_images=images)
    assert plan.stages == (*ETCD_CHECKS, *NODE_CHECKS)
    assert not plan.kubernetes and not set(plan.stages) & set(KUBERNETES_CHECKS)
    assert why in plan.skipped
    assert split_plan(plan) == (plan, WaitPlan(()))


@pytest.mark.parametrize(
    ("wait", "expected"), [(True, WaitPlan((*ETCD_CHECKS, *NODE_CHECKS))), (False, None)]
)
def test_create_hands_the_plan_to_bring_up_unless_told_not_to_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait: bool, expected: WaitPlan | None
) -> None:
    seen: list[object] = []

    def bring_up(record: object, patches: object, talosconfig: Path, timeout: float, bootstrap: bool,
                 plan: WaitPlan | None, progress: object) -> None:  # fmt: skip
        seen.append((timeout, plan.stages if plan else None))

    monkeypatch.setattr(_cluster, "_bring_up", bring_up)
    _cluster.create(name="w", cidr=f"127.{random.randint(60, 99)}.{random.randint(0, 255)}.0/24",
                    controlplanes=1, workers=0, state=tmp_path / "clusters", talosconfig=tmp_path / "tc",
                    progress=lambda _: None, wait=wait, wait_timeout=42.0)  # fmt: skip
    assert seen == [(42.0, expected.stages if expected else None)]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--wait-timeout", "soon"], "--wait-timeout"),
        (["--wait=maybe"], "--wait"),
    ],
)
def test_wrong_wait_flags_are_refused_naming_the_flag(
    tmp_path: Path, talosctl: Any, args: list[str], error: str
) -> None:
    result = talosctl("--talosconfig", str(tmp_path / "tc"), "cluster", "create", "--provisioner", "process",
                      "--state", str(tmp_path / "clusters"), *args)  # fmt: skip
    assert result.exit_code != 0
    assert error in result.stderr, result.stderr
    assert not (tmp_path / "clusters").exists()
