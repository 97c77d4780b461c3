"""``talosctl rotate-ca`` (Talos 1.7's CA rotation, 004:614-616) on the session's shared 1+1 Kubernetes
cluster (``k8s_cluster``), the last file on it (``tiers.K8S_ORDER``: it changes both CAs of the cluster):

1. the default run is a dry run: Talos's steps are printed, each node ``skipped (dry-run)``, no
   talosconfig written and neither node's machine config changed;
2. ``--dry-run=false`` rotates the Talos API CA then the Kubernetes API CA with no node losing its
   API: apid is never restarted and keeps accepting TCP connections through every step, no node
   reboots (same boot id), and the Kubernetes Nodes are Ready at the end;
3. afterwards the old talosconfig is refused by both nodes, the one written by ``--output`` works
   against both (through the control plane and directly), a kubeconfig fetched with it
   (``talosctl kubeconfig``) lists both Nodes Ready and trusts the new CA only, and the old
   kubeconfig is refused by the API server.

It then leaves the cluster usable for anything after it: the new talosconfig in the cluster's home,
the new kubeconfig at the shared path, the kube-system pods restarted to pick up the new CA (as the
Talos docs say to). Time budget: about 3 minutes (the rotation itself ~1-2 minutes: six kubelet
restarts per node), 10 minutes at most.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from container_helpers import CONTAINER_NODES, KUBE_NAME, KubeCluster, connects, until

from ichor.machinery import pki, proc, yamlio
from ichor.machinery.clientconfig import TalosConfig

pytestmark = [pytest.mark.e2e, pytest.mark.k8s, CONTAINER_NODES]

DRY_RUN_DONE = "> Dry-run mode enabled, no changes were made to the cluster"


def _config_text(kube: KubeCluster, node: str, *talosconfig: str) -> str:
    done = kube.cluster.talosctl(*talosconfig, "-n", node, "get", "mc", "v1alpha1", "-o", "jsonpath={.spec}")
    assert done.exit_code == 0, done.stdout + done.stderr
    return done.stdout


def _boot_id(kube: KubeCluster, node: str, *talosconfig: str) -> str:
    done = kube.cluster.talosctl(*talosconfig, "-n", node, "read", "/proc/sys/kernel/random/boot_id")
    assert done.exit_code == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _apid_starts(kube: KubeCluster, node: str, *talosconfig: str) -> tuple[int, int]:
    """How many times apid has been prepared and has finished on ``node`` (its service events)."""
    done = kube.cluster.talosctl(*talosconfig, "-n", node, "service", "apid")
    assert done.exit_code == 0, done.stdout + done.stderr
    return done.stdout.count("[Preparing]"), done.stdout.count("[Finished]")


def _ready(kubectl: Path, kubeconfig: Path) -> set[str]:
    done = proc.run([str(kubectl), "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"], check=False,
                    timeout=30)  # fmt: skip
    if done.exit_code != 0:
        return set()
    return {
        n["metadata"]["name"]
        for n in json.loads(done.stdout)["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }


def _kubelet_cert_from(kube: KubeCluster, node: str, talosconfig: tuple[str, ...], ca: bytes) -> bool:
    """The kubelet's newest client certificate on ``node`` (``kubelet-client-<time>.pem``, which
    ``kubelet-client-current.pem`` points at) is signed by ``ca``."""
    listed = kube.cluster.talosctl(*talosconfig, "-n", node, "ls", "/var/lib/kubelet/pki")
    names = sorted(
        w for w in listed.stdout.split() if w.startswith("kubelet-client-2") and w.endswith(".pem")
    )
    if listed.exit_code != 0 or not names:
        return False
    done = kube.cluster.talosctl(*talosconfig, "-n", node, "read", f"/var/lib/kubelet/pki/{names[-1]}")
    return (
        done.exit_code == 0 and "CERTIFICATE" in done.stdout and pki.issued_by_any(done.stdout.encode(), ca)
    )


def _lease_renewed(kubectl: Path, kubeconfig: Path, name: str, since: datetime) -> bool:
    """The kubelet of Node ``name`` renewed its Lease after ``since`` (it authenticates every 10 s)."""
    done = proc.run([str(kubectl), "--kubeconfig", str(kubeconfig), "-n", "kube-node-lease", "get", "lease", name,
                     "-o", "jsonpath={.spec.renewTime}"], check=False, timeout=30)  # fmt: skip
    if done.exit_code != 0 or not done.stdout.strip():
        return False
    return datetime.fromisoformat(done.stdout.strip().replace("Z", "+00:00")) > since


class _APIWatch:
    """Polls TCP :50000 of each node every 0.2 s from a thread, counting refusals."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes, self.refused, self.polls = nodes, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for node in self.nodes:
                if not connects(node, 50000, timeout=2):
                    self.refused.append(f"{node} at {time.strftime('%H:%M:%S')}")
            self.polls += 1
            self._stop.wait(0.2)

    def __enter__(self) -> _APIWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)


def test_rotate_ca_dry_run_then_both_cas_rolled_without_a_node_losing_its_api(
    k8s_cluster: KubeCluster, tmp_path: Path
) -> None:
    kube, cluster = k8s_cluster, k8s_cluster.cluster
    cp, worker = kube.cp, kube.worker
    home_config = cluster.home / ".talos" / "config"
    old_talosconfig = tmp_path / "old-talosconfig"
    old_talosconfig.write_bytes(home_config.read_bytes())
    new_talosconfig = tmp_path / "new-talosconfig"
    old = ("--talosconfig", str(old_talosconfig))
    new = ("--talosconfig", str(new_talosconfig))
    configs = {node: _config_text(kube, node, *old) for node in (cp, worker)}
    boots = {node: _boot_id(kube, node, *old) for node in (cp, worker)}
    apid = {node: _apid_starts(kube, node, *old) for node in (cp, worker)}
    assert len(_ready(kube.kubectl, kube.kubeconfig)) == 2

    # 1. The default is a dry run: the steps are printed and nothing changes.
    dry = cluster.talosctl(*old, "-n", cp, "rotate-ca", timeout=120)
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    assert "> Starting Talos API PKI rotation, dry-run mode true..." in dry.stdout
    assert "> Starting Kubernetes API PKI rotation, dry-run mode true..." in dry.stdout
    assert f'  - control plane nodes: ["{cp}"]\n  - worker nodes: ["{worker}"]' in dry.stdout
    assert f"  - {worker}: skipped (dry-run)" in dry.stdout
    assert dry.stdout.count(DRY_RUN_DONE) == 2
    assert not (cluster.home / "talosconfig").exists()
    assert {node: _config_text(kube, node, *old) for node in (cp, worker)} == configs

    # 2. The rotation, both CAs, with apid watched throughout.
    with _APIWatch([cp, worker]) as watch:
        started = time.monotonic()
        done = cluster.talosctl(*old, "-n", cp, "rotate-ca", "--dry-run=false", "-o", str(new_talosconfig),
                                timeout=600)  # fmt: skip
        took = time.monotonic() - started
    print(f"rotate-ca (Talos + Kubernetes CAs, 1+1 nodes): {took:.1f}s\n{done.stdout}\n{done.stderr}")
    assert done.exit_code == 0, done.stdout + done.stderr
    for line in (
        "> Adding new Talos CA as accepted...",
        "> Verifying connectivity with new client cert, but old server CA:",
        "> Verifying direct connectivity with new PKI:",
        "> Removing old Talos CA from the accepted CAs...",
        f'> Writing new talosconfig to "{new_talosconfig}"',
        "> Making new Kubernetes CA the issuing CA, old Kubernetes CA the accepted CA...",
        " - OK (2 nodes ready)",
        "> Kubernetes CA rotation done, new 'kubeconfig' can be fetched with `talosctl kubeconfig`.",
    ):
        assert line in done.stdout
    assert watch.polls > 10 and not watch.refused, f"apid refused connections: {watch.refused}"
    assert {node: _boot_id(kube, node, *new) for node in (cp, worker)} == boots
    assert {node: _apid_starts(kube, node, *new) for node in (cp, worker)} == apid

    # 3. The old talosconfig is refused by both nodes, the new one works with both.
    for node in (cp, worker):
        refused = cluster.talosctl(*old, "-e", node, "-n", node, "version", timeout=60)
        assert refused.exit_code != 0, f"{node} still accepts the old CA: {refused.stdout}"
        direct = cluster.talosctl(*new, "-e", node, "-n", node, "version", timeout=60)
        assert direct.exit_code == 0, direct.stdout + direct.stderr
    both = cluster.talosctl(*new, "-n", f"{cp},{worker}", "version", timeout=60)
    assert both.exit_code == 0 and both.stdout.count("NODE:") == 2, both.stdout + both.stderr

    # The node's configs now hold the new CAs, and only those.
    new_context = yamlio.to_plain(
        yamlio.load_documents(new_talosconfig.read_text(), source="new talosconfig")[0]
    )
    context_name = new_context["context"]
    new_os_ca = base64.b64decode(new_context["contexts"][context_name]["ca"])
    cp_config = yamlio.to_plain(yamlio.load_documents(_config_text(kube, cp, *new), source="cp config")[0])
    assert base64.b64decode(cp_config["machine"]["ca"]["crt"]) == new_os_ca
    assert not cp_config["machine"].get("acceptedCAs") and not cp_config["cluster"].get("acceptedCAs")
    new_k8s_ca = base64.b64decode(cp_config["cluster"]["ca"]["crt"])

    # A kubeconfig from the new PKI lists both Nodes Ready; the old kubeconfig is refused.
    kubeconfig = tmp_path / "kubeconfig"
    fetched = cluster.talosctl(*new, "-n", cp, "kubeconfig", str(kubeconfig), "--force")
    assert fetched.exit_code == 0, fetched.stdout + fetched.stderr
    doc = yamlio.to_plain(yamlio.load_documents(kubeconfig.read_text(), source="kubeconfig")[0])
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]) == new_k8s_ca
    client_crt = base64.b64decode(doc["users"][0]["user"]["client-certificate-data"])
    assert pki.issued_by_any(client_crt, new_k8s_ca)
    until(
        "both Nodes Ready with the new kubeconfig", lambda: len(_ready(kube.kubectl, kubeconfig)) == 2, 180, 2
    )
    # Each kubelet joined again with a client certificate from the new CA, and renews its Lease with it.
    rotated = datetime.now(UTC)
    for node, name in ((cp, f"{KUBE_NAME}-controlplane-1"), (worker, f"{KUBE_NAME}-worker-1")):
        until(
            f"{name}'s kubelet certificate from the new CA",
            lambda node=node: _kubelet_cert_from(kube, node, new, new_k8s_ca),
            120,
            2,
        )
        until(
            f"{name}'s Lease renewed",
            lambda name=name: _lease_renewed(kube.kubectl, kubeconfig, name, rotated),
            60,
            2,
        )
    stale = proc.run([str(kube.kubectl), "--kubeconfig", str(kube.kubeconfig), "get", "nodes"], check=False,
                     timeout=30)  # fmt: skip
    assert stale.exit_code != 0, "the API server still accepts the old kubeconfig"

    # Leave the cluster usable: new credentials where the other tests look, kube-system pods restarted.
    home = TalosConfig.load(home_config)
    fresh = TalosConfig.load(new_talosconfig).contexts[context_name]
    for context in home.contexts.values():
        context.ca, context.crt, context.key = fresh.ca, fresh.crt, fresh.key
    home.save(home_config)
    kube.kubeconfig.write_bytes(kubeconfig.read_bytes())
    # The API server can still restart after rotate-ca returns (a CI run's delete met "unexpected
    # EOF", then "connection refused"), so the delete is retried, as a user would.
    deadline = time.monotonic() + 120
    while (restarted := kube.run("-n", "kube-system", "delete", "pods", "--all", "--wait=false")).exit_code:
        assert time.monotonic() < deadline, restarted.stdout + restarted.stderr
        time.sleep(2)
