"""The pure helpers of ``benchmarks/kubernetes.py`` and ``benchmarks/kubefloor.py``: reading
``kubectl get nodes``, naming a node's processes, walking a process tree, reading create's
progress, laying out the memory table. The benchmark itself is run by hand (root, minutes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_kubernetes", BENCHMARKS / "kubernetes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_nodes_reads_ready_and_not_ready(bench: ModuleType) -> None:
    from kubefloor import parse_nodes

    text = (
        "floor    Ready                      <none>   3s   v1.30.3\n"
        "worker   NotReady                   <none>   1s   v1.30.3\n"
        "cp       Ready,SchedulingDisabled   control-plane   9s   v1.30.3\n"
    )
    assert parse_nodes(text) == {"floor": True, "worker": False, "cp": True}
    assert parse_nodes("No resources found\n") == {}
    assert parse_nodes("") == {}
    assert parse_nodes("NAME STATUS ROLES AGE VERSION\nfloor NotReady <none> 1s v1.30.3\n") == {
        "floor": False
    }


@pytest.mark.parametrize(
    ("argv", "component"),
    [
        (["/work/.venv/bin/python", "-m", "ichor.machined", "--root", "/"], "machined"),
        (["/usr/bin/containerd", "--address", "/system/run/containerd/containerd.sock"], "containerd"),
        (["/usr/bin/containerd", "--address", "/run/containerd/containerd.sock"], "cri"),
        (["/usr/bin/containerd"], "cri"),
        (["/usr/bin/containerd", "--address"], "cri"),
        (["/root/.cache/ichor/etcd/v3.5.13/bin/etcd", "--name=cp"], "etcd"),
        (["/usr/local/bin/kubelet", "--config=/etc/kubernetes/kubelet.yaml"], "kubelet"),
        (["kube-apiserver", "--etcd-servers=https://localhost:2379"], "kube-apiserver"),
        (["/opt/bin/flanneld", "--ip-masq"], "flannel"),
        (["/coredns", "-conf", "/etc/coredns/Corefile"], "coredns"),
        (["/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io"], "runtime"),
        (["/pause"], "runtime"),
        (["/bin/sh", "-c", "sleep 1"], "other"),
        ([], "other"),
    ],
)
def test_component_of_names_each_process(bench: ModuleType, argv: list[str], component: str) -> None:
    assert bench.component_of(argv) == component


def test_descendants_walks_the_whole_subtree_and_nothing_else(bench: ModuleType) -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert bench.descendants(10, parents) == [10, 11, 12, 13]
    assert bench.descendants(21, parents) == [21]
    assert bench.descendants(99, parents) == [99]


def test_parse_stage_reads_only_passed_stages(bench: ModuleType) -> None:
    assert bench.parse_stage("waiting for etcd to be healthy: OK\n") == "etcd to be healthy"
    assert bench.parse_stage("waiting for kubelet to be healthy: service kubelet is Running (3s)") is None
    assert bench.parse_stage("creating bridge talos0 with gateway 10.5.0.1") is None


def test_memory_table_rows_per_component_with_the_floor_beside(bench: ModuleType) -> None:
    mib = 1 << 20
    nodes = {"cp": {"machined": 90 * mib, "etcd": 40 * mib}, "worker": {"machined": 80 * mib}}
    lines = list(bench.memory_table(nodes, {"cp": 200 * mib, "worker": None}, {"etcd": 30 * mib}))
    assert lines[0].split() == ["component", "(RSS", "MiB)", "cp", "worker", "floor"]
    assert lines[1].split() == ["machined", "(+apid,", "trustd)", "90.0", "80.0", "-"]
    assert lines[2].split() == ["etcd", "40.0", "-", "30.0"]
    assert lines[3].split() == ["sum", "of", "RSS", "130.0", "80.0", "30.0"]
    assert lines[4].split() == ["node", "memory", "cgroup", "200.0", "-"]


def test_memory_table_keeps_long_node_names_apart(bench: ModuleType) -> None:
    names = ["kubebench20883-controlplane-1", "kubebench20883-worker-1"]
    nodes = {name: {"kubelet": 90 << 20} for name in names}
    header, kubelet, *_ = bench.memory_table(nodes, dict.fromkeys(names, None), {})
    assert header.split()[3:] == [*names, "floor"]
    assert kubelet.split() == ["kubelet", "90.0", "90.0", "-"]


def test_phases_come_from_create_lines_and_the_table_has_median_floor_and_ratio(bench: ModuleType) -> None:
    stages = [("etcd to be healthy", 6.0), (bench.API_ANSWERS, 12.0), ("all k8s nodes to report", 33.0),
              ("all k8s nodes to report ready", 34.5), ("coredns to report ready", 52.0)]  # fmt: skip
    one = bench.phases_of(stages, 52.6)
    assert one == {"etcd healthy": 6.0, bench.API_ANSWERS: 12.0, "nodes registered": 33.0, "nodes Ready": 34.5,
                   "coredns ready": 52.0, bench.CREATE: 52.6}  # fmt: skip
    # No line between "not answering" and OK: the API answered when the nodes had reported.
    assert bench.phases_of([("all k8s nodes to report", 30.0)], 40.0)[bench.API_ANSWERS] == 30.0
    two = {**one, "nodes Ready": 40.5, bench.CREATE: 60.0}
    three = {**one, "nodes Ready": 36.5, bench.CREATE: 50.0}
    lines = list(bench.phase_table([one, two, three], {"apiserver ready": 3.0, "node registered": 3.1,
                                                       "node Ready": 3.2}))  # fmt: skip
    assert lines[0].split() == ["phase", "(s", "since", "create)", "run", "1", "run", "2", "run", "3", "median",
                                "floor", "ratio"]  # fmt: skip
    rows = {line[:30].strip(): line[30:].split() for line in lines[1:]}
    assert rows["nodes Ready"] == ["34.50", "40.50", "36.50", "36.50", "3.20", "11.4x"]
    assert rows["etcd healthy"] == ["6.00", "6.00", "6.00", "6.00", "-", "-"]
    assert rows["kube-proxy ready"] == ["-", "-", "-", "-", "-", "-"]
    assert rows[bench.CREATE] == ["52.60", "60.00", "50.00", "52.60", "3.20", "16.4x"]
