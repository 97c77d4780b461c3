"""``upgrade-k8s``'s plan (``ichor.client.upgrade_k8s``) against a simulated cluster.

The double below stands for the Talos and Kubernetes APIs only: each node's machine config is real
YAML patched by the real code; a patched image makes the node's component config version move on,
and the static pod (or kubelet) takes a few polls to come back with it, on a virtual clock. What is
checked is what a user sees: Talos's printed lines, the order nodes are touched (never the next
control plane before this one's pod is back, talos#14227), a dry run changing nothing, a failure
naming its node and component, and a re-run resuming without patching what is done.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from ichor.client import upgrade_k8s
from ichor.client.upgrade_k8s import (
    KubeletState,
    NodeState,
    Pace,
    PodState,
    SyncResult,
    UnimplementedError,
    UpgradeK8sError,
    UpgradeOptions,
    UpgradePath,
    detect_lowest_version,
    manifest_diff,
    patch_machine_config,
    rollout_problem,
    upgrade_kubernetes,
)

OLD, NEW = "1.30.2", "1.30.3"
config_image = functools.lru_cache(maxsize=None)(upgrade_k8s.config_image)  # the double reads configs often
SERVICES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
REPO = {
    "kube-apiserver": "registry.k8s.io/kube-apiserver",
    "kube-controller-manager": "registry.k8s.io/kube-controller-manager",
    "kube-scheduler": "registry.k8s.io/kube-scheduler",
    "kube-proxy": "registry.k8s.io/kube-proxy",
    "kubelet": "ghcr.io/siderolabs/kubelet",
}


def _config(control_plane: bool, version: str = OLD) -> str:
    lines = ["version: v1alpha1", "machine:", f"  type: {'controlplane' if control_plane else 'worker'}",
             "  kubelet:", f"    image: {REPO['kubelet']}:v{version}", "cluster:"]  # fmt: skip
    if control_plane:
        for service, key in zip(SERVICES, ("apiServer", "controllerManager", "scheduler"), strict=True):
            lines += [f"  {key}:", f"    image: {REPO[service]}:v{version}"]
        lines += ["  proxy:", f"    image: {REPO['kube-proxy']}:v{version}"]
    else:
        lines += ["  network:", "    dnsDomain: cluster.local"]
    return "\n".join(lines) + "\n"


class Clock:
    def __init__(self, cluster: FakeCluster) -> None:
        self.now, self.cluster = 0.0, cluster

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.cluster.tick()
        await asyncio.sleep(0)

    def monotonic(self) -> float:
        return self.now


class FakeCluster:
    """The Talos + Kubernetes APIs of a cluster of ``planes`` control planes and ``workers`` workers."""

    def __init__(self, planes: int = 3, workers: int = 1, *, delay: int = 2, kubelet_delay: int = 2) -> None:
        self.planes = [f"10.5.0.{i + 2}" for i in range(planes)]
        self.workers = [f"10.5.0.{i + 10}" for i in range(workers)]
        self.configs = {n: _config(n in self.planes) for n in self.planes + self.workers}
        self.versions = {(n, s): 1 for n in self.planes for s in SERVICES}
        # Per (node, service): (config version the pod runs, ticks until it is Ready).
        self.pods: dict[tuple[str, str], tuple[int, int]] = {
            (n, s): (1, 0) for n in self.planes for s in SERVICES
        }
        self.kubelets = {n: OLD for n in self.planes + self.workers}
        self.kubelet_events: dict[str, list[tuple[float, str]]] = {
            n: [(1.0, "Running")] for n in self.kubelets
        }
        self.kubelet_pending: dict[str, int] = {}
        self.delay, self.kubelet_delay = delay, kubelet_delay
        self.broken: set[tuple[str, str]] = set()
        """(node, service) whose pod never becomes Ready."""
        self.rebump: set[tuple[str, str]] = set()
        """(node, service) whose config changes once more right after the patch (another change)."""
        self.log: list[tuple[str, ...]] = []
        self.applied: list[str] = []
        self.synced: list[tuple[str, bool]] = []
        self.clock = Clock(self)

    @property
    def pace(self) -> Pace:
        return Pace(sleep=self.clock.sleep, monotonic=self.clock.monotonic, poll=1.0)

    def tick(self) -> None:
        for key in list(self.rebump):
            if self.pods[key][0] == self.versions[key] and self.versions[key] > 1:
                self.rebump.discard(key)
                self.versions[key] += 1
                self.pods[key] = (self.versions[key], self.delay)
        for key, (version, wait) in list(self.pods.items()):
            if wait > 0 and key not in self.broken:
                self.pods[key] = (version, wait - 1)
                if wait == 1:
                    self.log.append(("ready", key[0], key[1]))
        for node, wait in list(self.kubelet_pending.items()):
            if wait <= 1:
                del self.kubelet_pending[node]
                self.kubelet_events[node].append((self.clock.now + 100, "Running"))
                self.kubelets[node] = NEW
                self.log.append(("ready", node, "kubelet"))
            else:
                self.kubelet_pending[node] = wait - 1

    # --- UpgradeAPI ---
    async def nodes(self) -> list[NodeState]:
        return [NodeState(f"node-{n}", (n,), f"v{self.kubelets[n]}", n not in self.kubelet_pending, n in self.planes)
                for n in self.planes + self.workers]  # fmt: skip

    async def machine_config(self, node: str) -> str:
        return self.configs[node]

    async def apply_config(self, node: str, text: str) -> None:
        old = self.configs[node]
        self.configs[node] = text
        self.applied.append(node)
        for component in (*SERVICES, "kube-proxy", "kubelet"):
            if config_image(old, component) == config_image(text, component):
                continue
            self.log.append(("patch", node, component))
            if component in SERVICES:
                self.versions[(node, component)] += 1
                self.pods[(node, component)] = (self.versions[(node, component)], self.delay)
            elif component == "kubelet":
                self.kubelet_events[node].append((self.clock.now + 50, "Finished"))
                self.kubelet_pending[node] = self.kubelet_delay

    async def component_config(self, node: str, service: str) -> tuple[str, str]:
        return str(self.versions[(node, service)]), config_image(self.configs[node], service)

    async def static_pods(self, service: str) -> list[PodState]:
        return [PodState(node, str(version), wait == 0 and (node, s) not in self.broken)
                for (node, s), (version, wait) in self.pods.items() if s == service]  # fmt: skip

    async def kubelet(self, node: str) -> KubeletState:
        return KubeletState(node not in self.kubelet_pending, tuple(self.kubelet_events[node]))

    async def kubelet_image(self, node: str) -> str:
        return config_image(self.configs[node], "kubelet")

    async def pull_image(self, node: str, namespace: str, reference: str) -> None:
        if node in self.workers:
            raise UnimplementedError("not implemented")
        self.log.append(("pull", node, namespace, reference))

    async def pod_images(self) -> list[tuple[str, str, str]]:
        return [(s, s, config_image(self.configs[n], s)) for n in self.planes for s in SERVICES]

    async def manifests(self, node: str) -> list[dict[str, Any]]:
        return [{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"}},
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}}]  # fmt: skip

    async def sync_object(self, obj: dict[str, Any], dry_run: bool) -> SyncResult:
        self.synced.append((obj["metadata"]["name"], dry_run))
        changed = obj["kind"] == "DaemonSet"
        return SyncResult(f"{obj['apiVersion']}.{obj['kind']}/kube-system/{obj['metadata']['name']}",
                          "--- a\n+++ b" if changed else "", not changed)  # fmt: skip

    async def rollout_pending(self, obj: dict[str, Any]) -> str | None:
        return None

    def retryable(self, exc: BaseException) -> bool:
        return False


def _run(cluster: FakeCluster, **options: Any) -> list[str]:
    lines: list[str] = []
    opts = UpgradeOptions(UpgradePath.parse(OLD, NEW), with_docs=False, with_examples=False, **options)
    asyncio.run(upgrade_kubernetes(cluster, opts, printf=lines.append, pace=cluster.pace))
    return lines


def test_control_planes_one_at_a_time_each_pod_back_before_the_next() -> None:
    cluster = FakeCluster(planes=3, workers=1)
    lines = _run(cluster)
    steps = [e for e in cluster.log if e[0] in ("patch", "ready")]
    expected: list[tuple[str, ...]] = []
    for service in SERVICES:
        for node in cluster.planes:
            expected += [("patch", node, service), ("ready", node, service)]
    expected += [("patch", node, "kube-proxy") for node in cluster.planes]
    for node in cluster.planes + cluster.workers:
        expected += [("patch", node, "kubelet"), ("ready", node, "kubelet")]
    assert steps == expected
    assert all(config_image(cluster.configs[n], "kubelet").endswith(f":v{NEW}") for n in cluster.configs)
    assert lines[:2] == ['discovered controlplane nodes ["10.5.0.2" "10.5.0.3" "10.5.0.4"]',
                         'discovered worker nodes ["10.5.0.10"]']  # fmt: skip
    assert ' > "10.5.0.10": pre-pulling ghcr.io/siderolabs/kubelet:v1.30.3' in lines
    assert ' < "10.5.0.10": not implemented, skipping' in lines
    at = lines.index('updating "kube-apiserver" to version "1.30.3"')
    assert lines[at:at + 8] == [
        'updating "kube-apiserver" to version "1.30.3"',
        ' > "10.5.0.2": starting update',
        " > update kube-apiserver: v1.30.2 -> 1.30.3",
        ' > "10.5.0.2": machine configuration patched',
        ' > "10.5.0.2": waiting for kube-apiserver pod update',
        ' > "10.5.0.2": kube-apiserver: pod is not ready, waiting',
        ' < "10.5.0.2": successfully updated',
        ' > "10.5.0.3": starting update',
    ]  # fmt: skip
    assert " > update kubelet: 1.30.2 -> 1.30.3" in lines
    assert ' > "10.5.0.10": waiting for kubelet restart' in lines
    assert lines[lines.index("updating manifests") :] == [
        "updating manifests",
        " > processing manifest apps/v1.DaemonSet/kube-system/kube-proxy",
        "--- a\n+++ b",
        " < applied successfully",
        " > processing manifest v1.ServiceAccount/kube-system/coredns",
        " < no changes",
        "waiting for all manifests to be applied",
        " > waiting for apps/v1.DaemonSet/kube-system/kube-proxy",
    ]
    assert cluster.synced == [("kube-proxy", False), ("coredns", False)]


def test_dry_run_prints_the_plan_and_changes_nothing() -> None:
    cluster = FakeCluster(planes=2, workers=1)
    before = dict(cluster.configs)
    lines = _run(cluster, dry_run=True, pre_pull_images=False)
    assert cluster.applied == [] and cluster.configs == before
    assert lines.count(" > skipped in dry-run") == 3 * 2 + 2 + 3  # 3 pods x 2 planes, proxy x 2, kubelet x 3
    assert " > update kube-scheduler: v1.30.2 -> 1.30.3" in lines
    assert not any("machine configuration patched" in line for line in lines)
    assert " < dry run, change skipped" in lines and "waiting for all manifests to be applied" not in lines
    assert cluster.synced == [("kube-proxy", True), ("coredns", True)]


def test_a_pod_that_does_not_come_back_stops_naming_node_and_component_and_a_rerun_resumes() -> None:
    cluster = FakeCluster(planes=3, workers=0)
    cluster.broken.add(("10.5.0.3", "kube-controller-manager"))
    with pytest.raises(UpgradeK8sError) as failed:
        _run(cluster, pre_pull_images=False)
    err = failed.value
    assert err.node == "10.5.0.3" and err.component == "kube-controller-manager"
    assert str(err).startswith(
        'failed updating service "kube-controller-manager": error updating node "10.5.0.3": '
    )
    assert "re-run" in (err.hint or "")
    # The third control plane's controller manager was never touched: the second one is not back.
    assert ("patch", "10.5.0.4", "kube-controller-manager") not in cluster.log
    patched_before = [e for e in cluster.log if e[0] == "patch"]

    cluster.broken.clear()
    cluster.log.clear()
    cluster.applied.clear()
    lines = _run(cluster, pre_pull_images=False)
    patched = [e for e in cluster.log if e[0] == "patch"]
    # Nothing done before is patched again; the stuck node is waited for, not re-patched.
    assert not set(patched) & set(patched_before)
    assert ("patch", "10.5.0.4", "kube-controller-manager") in patched
    assert ' > "10.5.0.2": starting update' in lines
    assert all(config_image(cluster.configs[n], s).endswith(NEW) for n in cluster.planes for s in SERVICES)


def test_a_finished_upgrade_run_again_patches_nothing() -> None:
    cluster = FakeCluster(planes=1, workers=1)
    _run(cluster, pre_pull_images=False)
    cluster.applied.clear()
    lines = _run(cluster, pre_pull_images=False)
    assert cluster.applied == cluster.planes  # kube-proxy's patch is re-applied, as Talos does
    assert not any(line.startswith(" > update ") for line in lines)


def test_kubelet_step_waits_for_the_node_and_names_it_on_timeout() -> None:
    cluster = FakeCluster(planes=1, workers=1, kubelet_delay=500)  # the kubelet never comes back in time
    with pytest.raises(UpgradeK8sError) as failed:
        _run(cluster, pre_pull_images=False)
    assert failed.value.component == "kubelet"
    assert failed.value.node == "10.5.0.2"  # the first control plane, before any worker
    assert str(failed.value).startswith(
        'failed upgrading kubelet: error updating node "10.5.0.2": kubelet did not'
    )


def test_without_upgrade_kubelet_the_kubelets_stay() -> None:
    cluster = FakeCluster(planes=1, workers=1)
    lines = _run(cluster, upgrade_kubelet=False)
    assert "skipped updating kubelet" in lines
    assert all(config_image(t, "kubelet").endswith(OLD) for t in cluster.configs.values())
    assert not any(line.startswith("discovered worker nodes") for line in lines)


def test_upgrade_path_rules_and_lowest_version() -> None:
    assert UpgradePath.parse("v1.29.5", "1.30.3").is_supported()
    assert UpgradePath.parse("1.30.3", "1.30.2").is_supported()  # within a minor, either way (Talos)
    assert not UpgradePath.parse("1.28.0", "1.30.3").is_supported()
    cluster = FakeCluster(planes=1, workers=0)
    opts = UpgradeOptions(UpgradePath.parse("1.28.0", "1.30.3"))
    with pytest.raises(
        UpgradeK8sError, match=r'unsupported upgrade path 1\.28->1\.30 \(from "1\.28\.0" to "1\.30\.3"\)'
    ):
        asyncio.run(upgrade_kubernetes(cluster, opts, printf=lambda _l: None, pace=cluster.pace))
    with pytest.raises(UpgradeK8sError, match="error creating upgrade path"):
        UpgradePath.parse("latest", "1.30.3")
    cluster.configs["10.5.0.2"] = patch_machine_config(cluster.configs["10.5.0.2"], "kube-scheduler",
                                                       "registry.k8s.io/kube-scheduler:v1.29.1", with_docs=False)  # fmt: skip
    assert asyncio.run(detect_lowest_version(cluster)) == "1.29.1"


def test_manifest_diff_ignores_what_the_server_sets_and_rollout_checks() -> None:
    wanted = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "a", "namespace": "kube-system"},
    }
    current = {**wanted, "metadata": {**wanted["metadata"], "uid": "u", "resourceVersion": "7",
               "annotations": {"kubernetes.io/x": "y"}}, "secrets": [{"name": "t"}]}  # fmt: skip
    assert manifest_diff("v1.ServiceAccount/kube-system/a", current, wanted) == ""
    changed = {**wanted, "metadata": {**wanted["metadata"], "labels": {"k": "v"}}}
    diff = manifest_diff("p", current, changed)
    assert diff.startswith("--- a/p\n+++ b/p") and "+  labels:" in diff.replace("    ", "  ")
    ds = {"kind": "DaemonSet", "metadata": {"name": "kube-proxy", "generation": 2},
          "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1,
                     "currentNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2}}  # fmt: skip
    assert rollout_problem(ds) == "expected current number up-to-date for kube-proxy to be 2, got 2"
    ds["status"]["updatedNumberScheduled"] = 2
    assert rollout_problem(ds) is None
    dep = {
        "kind": "Deployment",
        "metadata": {"name": "coredns", "generation": 3},
        "status": {"observedGeneration": 2},
    }
    assert rollout_problem(dep) == "deployment coredns generation 3 != observed generation 2"


def test_a_config_that_moves_on_again_during_the_wait_is_followed() -> None:
    cluster = FakeCluster(planes=2, workers=0)
    cluster.rebump.add(("10.5.0.2", "kube-apiserver"))
    lines = _run(cluster, pre_pull_images=False, upgrade_kubelet=False)
    assert cluster.versions[("10.5.0.2", "kube-apiserver")] == 3 and not cluster.rebump
    assert lines.count(' < "10.5.0.2": successfully updated') == 3


class FakeKube:
    """The few Kubernetes API calls :class:`LiveUpgradeAPI` makes, over stored objects."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects, self.calls = objects, list[tuple[str, str]]()

    async def resource_for(self, api_version: str, kind: str) -> Any:
        from ichor.kubeapi import APIResource

        plural = {"DaemonSet": "daemonsets", "ServiceAccount": "serviceaccounts"}[kind]
        return APIResource(api_version, kind, plural, True)

    async def get(self, path: str) -> Any:
        from ichor.kubeapi import KubeNotFoundError

        self.calls.append(("GET", path))
        if path == "/api/v1/nodes":
            return self.objects["nodes"]
        if path.startswith("/api/v1/namespaces/kube-system/pods?labelSelector="):
            return self.objects["pods"]
        if path not in self.objects:
            raise KubeNotFoundError(f"GET {path}: 404 NotFound", code=404, reason="NotFound")
        return self.objects[path]

    async def put(self, path: str, body: Any) -> Any:
        self.calls.append(("PUT", path))
        stored = dict(self.objects[path.split("?")[0]])
        return {**body, "metadata": {**body["metadata"], "uid": stored["metadata"].get("uid")}}

    async def post(self, path: str, body: Any) -> Any:
        self.calls.append(("POST", path))
        return body


def test_the_live_api_reads_nodes_and_pods_and_syncs_only_what_differs() -> None:
    from ichor.client.upgrade_k8s import LiveUpgradeAPI

    ready = [{"type": "Ready", "status": "True"}]
    kube = FakeKube({
        "nodes": {"items": [
            {"metadata": {"name": "cp", "labels": {"node-role.kubernetes.io/control-plane": ""}},
             "status": {"addresses": [{"type": "InternalIP", "address": "10.5.0.2"},
                                      {"type": "Hostname", "address": "cp"}],
                        "nodeInfo": {"kubeletVersion": "v1.30.2"}, "conditions": ready}},
            {"metadata": {"name": "w"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.5.0.3"}],
                                                   "nodeInfo": {"kubeletVersion": "v1.30.3"}, "conditions": []}},
        ]},
        "pods": {"items": [{"metadata": {"annotations": {"talos.dev/config-version": "4"}},
                            "status": {"hostIP": "10.5.0.2", "conditions": ready}}]},
        "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy": {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "uid": "u1", "resourceVersion": "9"},
            "spec": {"image": "registry.k8s.io/kube-proxy:v1.30.2"}},
    })  # fmt: skip
    api = LiveUpgradeAPI.__new__(LiveUpgradeAPI)
    api.kube = kube
    nodes = asyncio.run(api.nodes())
    assert [(n.addresses, n.kubelet_version, n.ready, n.control_plane) for n in nodes] == [
        (("10.5.0.2",), "v1.30.2", True, True),
        (("10.5.0.3",), "v1.30.3", False, False),
    ]
    assert asyncio.run(api.static_pods("kube-apiserver")) == [PodState("10.5.0.2", "4", True)]
    assert ("GET", "/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-apiserver") in kube.calls

    proxy = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
             "spec": {"image": "registry.k8s.io/kube-proxy:v1.30.3"}}  # fmt: skip
    kube.calls.clear()
    dry = asyncio.run(api.sync_object(proxy, True))
    assert dry.path == "apps/v1.DaemonSet/kube-system/kube-proxy" and not dry.skipped
    assert "-  image: registry.k8s.io/kube-proxy:v1.30.2" in dry.diff.replace("    ", "  ")
    assert [c for c in kube.calls if c[0] == "PUT"] == [
        ("PUT", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy?dryRun=All")
    ]
    kube.calls.clear()
    applied = asyncio.run(api.sync_object(proxy, False))
    assert (
        applied.diff == dry.diff
        and ("PUT", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy") in kube.calls
    )
    same = {**proxy, "spec": {"image": "registry.k8s.io/kube-proxy:v1.30.2"}}
    kube.calls.clear()
    assert asyncio.run(api.sync_object(same, False)).skipped
    assert len([c for c in kube.calls if c[0] == "PUT"]) == 1  # the dry run only
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "new", "namespace": "kube-system"},
    }
    kube.calls.clear()
    created = asyncio.run(api.sync_object(account, False))
    assert not created.skipped and created.diff.startswith("--- a/v1.ServiceAccount/kube-system/new")
    assert ("POST", "/api/v1/namespaces/kube-system/serviceaccounts") in kube.calls
