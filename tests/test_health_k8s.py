"""The Kubernetes stages of ``talosctl health``: names, order, waiting texts, SKIP, no-kubelet nodes."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from ichor.api.gen.machine import machine_pb2
from ichor.client.health import (
    CHECK_NAMES,
    KUBERNETES_CHECKS,
    NODE_CHECKS,
    ClusterInfo,
    HealthCheckError,
    wait_for,
)
from ichor.client.health_k8s import CONTROL_PLANE_PODS, _with_endpoint, kubernetes_checks
from ichor.kubeapi import KubeConnectionError

INFO = ClusterInfo(["10.5.0.2"], ["10.5.0.3"])


class FakeTalos:
    """``with_node(n).machine.ServiceList``, ``.cosi.Get`` (MachineStatuses) and ``.list_resources``
    (StaticPodStatuses: the control plane's three by default) per node."""

    def __init__(self, kubelet: dict[str, str], stage: str = "running", ready: bool = True) -> None:
        self.kubelet, self.stage, self.ready = kubelet, stage, ready
        self.static_pods = {
            "10.5.0.2": [f"kube-system/{app}-kx-controlplane-1" for app in CONTROL_PLANE_PODS]
        }

    def with_node(self, node: str) -> Any:
        async def service_list(_: Any) -> Any:
            reply = machine_pb2.ServiceListResponse()
            state = self.kubelet.get(node)
            if state:
                svc = reply.messages.add().services.add(id="kubelet", state=state)
                svc.health.healthy = state == "Running"
                if state == "Skipped":
                    svc.events.events.add(msg="process nodes run no kubelet")
            return reply

        async def get(_: Any) -> Any:
            ready = "true" if self.ready else "false"
            spec = f"stage: {self.stage}\nstatus:\n  ready: {ready}\n  unmetConditions: []\n"
            return SimpleNamespace(resource=SimpleNamespace(spec=SimpleNamespace(yaml_spec=spec)))

        async def list_resources(namespace: str, rtype: str) -> list[Any]:
            assert (namespace, rtype) == ("k8s", "StaticPodStatuses.kubernetes.talos.dev")
            return [SimpleNamespace(metadata=SimpleNamespace(id=i)) for i in self.static_pods.get(node, [])]

        return SimpleNamespace(
            machine=SimpleNamespace(ServiceList=service_list),
            cosi=SimpleNamespace(Get=get),
            list_resources=list_resources,
        )


def _node(name: str, ip: str, *, ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _pod(name: str, node: str, *, phase: str = "Running", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


class FakeKube:
    """An API server's lists, keyed by path; ``down`` makes every GET a connection error."""

    def __init__(self) -> None:
        self.down = False
        self.nodes = [_node("kx-controlplane-1", "10.5.0.2"), _node("kx-worker-1", "10.5.0.3")]
        self.pods: dict[str, list[dict[str, Any]]] = {
            app: [_pod(f"{app}-kx-controlplane-1", "kx-controlplane-1")]
            for app in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
        }
        self.pods["kube-proxy"] = [
            _pod("kube-proxy-a", "kx-controlplane-1"),
            _pod("kube-proxy-b", "kx-worker-1"),
        ]
        self.pods["kube-dns"] = [_pod("coredns-1", "kx-worker-1"), _pod("coredns-2", "kx-worker-1")]
        self.daemonsets = [{"status": {"desiredNumberScheduled": 2}}]
        self.replicasets = [{"spec": {"replicas": 2}}]

    async def get(self, path: str) -> Any:
        if self.down:
            raise KubeConnectionError("cannot connect to https://10.5.0.2:6443: Connection refused")
        if path == "/api/v1/nodes":
            return {"items": self.nodes}
        if "/daemonsets" in path:
            return {"items": self.daemonsets}
        if "/replicasets" in path:
            return {"items": self.replicasets}
        app = path.split("labelSelector=k8s-app%3D", 1)[1]
        return {"items": self.pods.get(app, [])}


def _run(
    talos: FakeTalos, kube: FakeKube, seconds: float = 0.05
) -> tuple[list[str], HealthCheckError | None]:
    lines: list[str] = []

    async def get_kube() -> FakeKube:
        return kube

    async def no_sleep(_: float) -> None:
        await asyncio.sleep(0)

    now = [0.0]

    def clock() -> float:
        now[0] += 0.01
        return now[0]

    checks = kubernetes_checks(talos, INFO, kube=get_kube)
    try:
        asyncio.run(
            wait_for(
                checks, timeout=timedelta(seconds=seconds), report=lines.append, clock=clock, sleep=no_sleep
            )
        )
    except HealthCheckError as exc:
        return lines, exc
    return lines, None


def test_stage_names_and_order_are_talos_1_7s() -> None:
    assert CHECK_NAMES[4:] == (*NODE_CHECKS, *KUBERNETES_CHECKS)
    assert NODE_CHECKS == ("apid to be ready", "all nodes memory sizes", "all nodes disk sizes")
    assert KUBERNETES_CHECKS[2:] == (
        "all k8s nodes to report",
        "all k8s nodes to report ready",
        "all control plane static pods to be running",
        "all control plane components to be ready",
        "kube-proxy to report ready",
        "coredns to report ready",
        "all k8s nodes to report schedulable",
    )


def test_a_healthy_cluster_passes_every_kubernetes_stage() -> None:
    lines, error = _run(FakeTalos({"10.5.0.2": "Running", "10.5.0.3": "Running"}), FakeKube())
    assert error is None
    assert lines == [f"waiting for {name}: OK" for name in KUBERNETES_CHECKS]


def test_process_nodes_without_kubelet_fail_at_once_saying_so() -> None:
    lines, error = _run(FakeTalos({"10.5.0.2": "Skipped"}), FakeKube(), seconds=60)
    assert error is not None and error.hint and "etcd stages above" in error.hint
    assert str(error).startswith("kubelet to be healthy: the nodes run no Kubernetes: no kubelet on any")
    assert "10.5.0.2: process nodes run no kubelet" in str(error)
    assert len(lines) == 1


@pytest.mark.parametrize(
    ("breaks", "waiting"),
    [
        (lambda t, k: setattr(t, "kubelet", {"10.5.0.2": "Preparing"}),
         "waiting for kubelet to be healthy: 10.5.0.2: service kubelet is Preparing"),
        (lambda t, k: setattr(t, "stage", "booting"),
         "waiting for all nodes to finish boot sequence: 10.5.0.2, 10.5.0.3: machine stage is booting, not running"),
        (lambda t, k: setattr(t, "ready", False),
         "waiting for all nodes to finish boot sequence: 10.5.0.2, 10.5.0.3: machine is not ready"),
        (lambda t, k: setattr(k, "down", True),
         "waiting for all k8s nodes to report: Kubernetes API not answering yet"),
        (lambda t, k: k.nodes.pop(),
         "waiting for all k8s nodes to report: some nodes have not reported: ['10.5.0.3']"),
        (lambda t, k: t.static_pods["10.5.0.2"].pop(),
         "waiting for all control plane static pods to be running: 10.5.0.2: missing static pods: "
         "[kube-system/kube-scheduler]"),
        (lambda t, k: t.static_pods.clear(),
         "waiting for all control plane static pods to be running: 10.5.0.2: missing static pods: "
         "[kube-system/kube-apiserver kube-system/kube-controller-manager kube-system/kube-scheduler]"),
        # the mirror pods come later (the kubelet's resync after the Node registers): stage 6 waits
        (lambda t, k: k.pods["kube-scheduler"].clear(),
         "waiting for all control plane components to be ready: kube-scheduler on kx-controlplane-1: no pod"),
        (lambda t, k: k.pods["kube-apiserver"][0]["status"].update(phase="Pending"),
         "waiting for all control plane components to be ready: kube-apiserver on kx-controlplane-1: Pending"),
        (lambda t, k: k.pods["kube-apiserver"][0]["status"].update(conditions=[]),
         "waiting for all control plane components to be ready: kube-apiserver on kx-controlplane-1: not ready"),
        (lambda t, k: k.nodes.__setitem__(0, _node("kx-controlplane-1", "10.5.0.2", ready=False)),
         "waiting for all k8s nodes to report ready: some nodes are not ready: ['kx-controlplane-1']"),
        (lambda t, k: k.pods["kube-proxy"].pop(),
         "waiting for kube-proxy to report ready: expected number of pods for k8s-app=kube-proxy to be 2, got 1"),
        (lambda t, k: k.pods["kube-dns"][1]["status"].update(conditions=[]),
         "waiting for coredns to report ready: some pods are not ready: ['coredns-2']"),
        (lambda t, k: k.nodes.__setitem__(1, _node("kx-worker-1", "10.5.0.3", unschedulable=True)),
         "waiting for all k8s nodes to report schedulable: some nodes are not schedulable: ['kx-worker-1']"),
    ],
)  # fmt: skip
def test_each_stage_waits_saying_what_for(breaks: Any, waiting: str) -> None:
    talos, kube = FakeTalos({"10.5.0.2": "Running", "10.5.0.3": "Running"}), FakeKube()
    breaks(talos, kube)
    lines, error = _run(talos, kube)
    assert error is not None and str(error).startswith("timed out waiting for")
    assert error.hint and "talosctl service kubelet" in error.hint
    assert any(line.startswith(waiting) for line in lines), lines


def test_no_kube_proxy_or_coredns_is_a_skip_not_a_failure() -> None:
    kube = FakeKube()
    kube.daemonsets, kube.replicasets = [], []
    lines, error = _run(FakeTalos({"10.5.0.2": "Running"}), kube)
    assert error is None
    assert "waiting for kube-proxy to report ready: SKIP" in lines
    assert "waiting for coredns to report ready: SKIP" in lines


@pytest.mark.parametrize(
    ("endpoint", "server"),
    [
        ("192.168.1.5", "https://192.168.1.5:6443"),
        ("lb.example:8443", "https://lb.example:8443"),
        ("https://[fd00::1]", "https://[fd00::1]:6443"),
    ],
)
def test_k8s_endpoint_replaces_the_kubeconfig_host(endpoint: str, server: str) -> None:
    assert _with_endpoint("https://10.5.0.2:6443", endpoint) == server
