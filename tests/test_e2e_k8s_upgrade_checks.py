"""``talosctl upgrade-k8s``'s pre-upgrade checks and ``--endpoint`` on the session's shared 1+1 cluster (``k8s_cluster``).

A ``--dry-run`` of the cross-minor path 1.29 -> 1.30 (the cluster runs 1.30.3, so nothing is to be
patched): Talos 1.7.6 runs go-kubernetes's checks for that path, reading every control plane's
static pod commands and every node's kubelet args through the Talos API and asking the API server
for the removed resources; a clean cluster passes them and the dry run goes on. ``--endpoint`` is
given as ``https://<control plane>`` without a port: Talos's rule puts 6443 there. Nothing in the
cluster changes (the machine configs are compared). The refusal tables themselves are unit-tested
(``tests/test_upgrade_k8s_checks.py``): a 1.30 control plane cannot run with what 1.30 removed.

Time budget: 30 s on the shared cluster (measured 4 s: one dry run, the manifests diffed on the API server).
"""

from __future__ import annotations

import pytest
from container_helpers import CONTAINER_NODES, KubeCluster

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]


def test_cross_minor_dry_run_runs_talos_checks_through_the_endpoint(k8s_cluster: KubeCluster) -> None:
    cluster = k8s_cluster.cluster
    cp, worker = cluster.address(2), cluster.address(3)
    before = cluster.talosctl("-n", cp, "get", "machineconfig", "-o", "yaml").stdout
    dry = cluster.talosctl("-n", cp, "upgrade-k8s", "--from", "1.29.7", "--to", "1.30.3", "--dry-run",
                           "--pre-pull-images=false", "--endpoint", f"https://{cp}", timeout=300)  # fmt: skip
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[:4] == [
        f'discovered controlplane nodes ["{cp}"]',
        f'discovered worker nodes ["{worker}"]',
        "checking for removed Kubernetes component flags",
        "checking for removed Kubernetes API resource versions",
    ], dry.stdout
    assert lines[4] == 'updating "kube-apiserver" to version "1.30.3"', dry.stdout
    assert " > update " not in dry.stdout  # already at 1.30.3 everywhere
    assert "updating manifests" in dry.stdout
    after = cluster.talosctl("-n", cp, "get", "machineconfig", "-o", "yaml").stdout
    assert _spec(after) == _spec(before)


def _spec(yaml_text: str) -> str:
    """The machine config's spec part of ``get machineconfig -o yaml`` (the metadata carries times)."""
    return yaml_text[yaml_text.find("spec:") :]
