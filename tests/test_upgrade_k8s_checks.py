"""``upgrade-k8s``'s pre-upgrade checks (``ichor.client.upgrade_k8s_checks``) and ``--endpoint``.

The checks read static pod commands, kubelet args and API listings through a double standing for
the Talos and Kubernetes APIs; the expected tables are Go ``tabwriter`` output written out by hand
from go-kubernetes v0.2.9's ``ComponentRemovedItemsError.Error()``. ``force_endpoint`` is compared
with what Talos 1.7.6's ``K8sRestConfig`` (``net.SplitHostPort`` + client-go) gives.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ichor.client.upgrade_k8s import (
    LiveUpgradeAPI,
    NodeState,
    UpgradeK8sError,
    UpgradeOptions,
    UpgradePath,
    force_endpoint,
    upgrade_kubernetes,
)
from ichor.client.upgrade_k8s_checks import REMOVED, RemovedItems, find_removed, resource_path

CP1, CP2, W1 = "172.20.0.2", "172.20.0.3", "172.20.0.5"


class Checked:
    """Static pod commands, kubelet args and API object counts; every read is recorded."""

    def __init__(self, commands: dict[tuple[str, str], list[str]], kubelets: dict[str, list[str]],
                 counts: dict[str, int] | None = None) -> None:  # fmt: skip
        self.commands, self.kubelets, self.counts = commands, kubelets, counts or {}
        self.reads: list[tuple[str, ...]] = []

    async def static_pod_command(self, node: str, service: str) -> list[str] | None:
        self.reads.append(("pod", node, service))
        return self.commands.get((node, service))

    async def kubelet_args(self, node: str) -> list[str] | None:
        self.reads.append(("kubelet", node))
        return self.kubelets.get(node)

    async def count_resources(self, resource: str) -> int:
        self.reads.append(("list", resource))
        return self.counts.get(resource, 0)


def _run(api: Checked, path: str, workers: tuple[str, ...] = (W1,)) -> tuple[RemovedItems, list[str]]:
    said: list[str] = []
    found = asyncio.run(find_removed(api, path, [CP1, CP2], list(workers), said.append))
    return found, said


def test_1_29_to_1_30_finds_admission_plugin_and_feature_gates_with_talos_table() -> None:
    api = Checked(
        {
            (CP1, "kube-apiserver"): ["/go-runner", "/usr/local/bin/kube-apiserver",
                                      "--enable-admission-plugins=NodeRestriction,SecurityContextDeny",
                                      "--feature-gates=RemoveSelfLink=false,SomethingElse=true"],
            (CP1, "kube-controller-manager"): ["kube-controller-manager", "--feature-gates=KubeletPodResources=true"],
            (CP2, "kube-apiserver"): ["kube-apiserver", "--enable-admission-plugins=NodeRestriction"],
        },
        {CP1: ["--feature-gates=RemoveSelfLink=false"], W1: ["--container-runtime=remote"]},
    )  # fmt: skip
    found, said = _run(api, str(UpgradePath.parse("1.29.7", "1.30.3")))
    assert said == ["checking for removed Kubernetes component flags",
                    "checking for removed Kubernetes API resource versions"]  # fmt: skip
    assert found.admission_plugins == [(CP1, "kube-apiserver", "SecurityContextDeny")]
    assert found.feature_gates == [(CP1, "kube-apiserver", "RemoveSelfLink"),
                                   (CP1, "kube-controller-manager", "KubeletPodResources")]  # fmt: skip
    assert found.flags == [] and found.resources == {}  # the kubelet's args are checked for flags only
    assert found.text() == (
        "\n"
        "NODE         COMPONENT        REMOVED ADMISSION PLUGIN\n"
        "172.20.0.2   kube-apiserver   SecurityContextDeny\n"
        "\n"
        "NODE         COMPONENT                 REMOVED FEATURE GATE\n"
        "172.20.0.2   kube-apiserver            RemoveSelfLink\n"
        "172.20.0.2   kube-controller-manager   KubeletPodResources\n"
    )
    # every control plane's three pods, then every node's kubelet, workers last
    pods = [r for r in api.reads if r[0] == "pod"]
    assert pods == [("pod", n, s) for n in (CP1, CP2)
                    for s in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]  # fmt: skip
    assert [r for r in api.reads if r[0] == "kubelet"] == [
        ("kubelet", CP1),
        ("kubelet", CP2),
        ("kubelet", W1),
    ]


def test_within_one_minor_checks_nothing_and_says_nothing() -> None:
    api = Checked({(CP1, "kube-apiserver"): ["--enable-admission-plugins=SecurityContextDeny"]}, {})
    found, said = _run(api, str(UpgradePath.parse("1.30.2", "1.30.3")))
    assert not found and found.text() == "" and said == [] and api.reads == []


def test_1_24_to_1_25_flags_and_resources_table() -> None:
    api = Checked(
        {
            (CP1, "kube-apiserver"): ["kube-apiserver", "--service-account-api-audiences=x",
                                      "--enable-admission-plugins=PodSecurityPolicy"],
            (CP2, "kube-controller-manager"): ["kube-controller-manager", "--deleting-pods-qps",
                                               "--register-retry-countx=1"],
        },
        {},
        {"podsecuritypolicies.v1beta1.policy": 3},
    )  # fmt: skip
    found, _said = _run(api, "1.24->1.25")
    # ``--deleting-pods-qps`` without a value matches; ``--register-retry-countx`` is another flag
    assert found.flags == [(CP1, "kube-apiserver", "service-account-api-audiences"),
                           (CP2, "kube-controller-manager", "deleting-pods-qps")]  # fmt: skip
    assert found.resources == {"podsecuritypolicies.v1beta1.policy": 3}
    assert found.text().endswith(
        "\n"
        "NODE         COMPONENT                 REMOVED FLAG\n"
        "172.20.0.2   kube-apiserver            service-account-api-audiences\n"
        "172.20.0.3   kube-controller-manager   deleting-pods-qps\n"
        "\n"
        "REMOVED RESOURCE                     COUNT   \n"
        "podsecuritypolicies.v1beta1.policy   3       \n"
    )


def test_only_the_first_feature_gates_argument_counts_and_kubelet_flags_need_the_kubelet_path() -> None:
    api = Checked(
        {(CP1, "kube-scheduler"): ["kube-scheduler", "--feature-gates=A=true", "--feature-gates=RemoveSelfLink=true"]},
        {W1: ["--container-runtime=remote", "--master-service-namespace=default"]},
    )  # fmt: skip
    found, _said = _run(api, "1.29->1.30")
    assert not found
    found, _said = _run(api, "1.26->1.27")
    assert found.flags == [(W1, "kubelet", "container-runtime"), (W1, "kubelet", "master-service-namespace")]
    # without --upgrade-kubelet Talos discovers no workers, so their kubelets go unchecked
    found, _said = _run(api, "1.26->1.27", workers=())
    assert not found


def test_every_path_with_checks_is_a_supported_next_minor_and_resources_parse() -> None:
    for path in REMOVED:
        a, b = path.split("->")
        assert UpgradePath.parse(a, b).is_supported() and int(b.split(".")[1]) == int(a.split(".")[1]) + 1
    assert resource_path("podsecuritypolicies.v1beta1.policy") == "/apis/policy/v1beta1/podsecuritypolicies"
    assert (resource_path("clustercidrs.v1alpha1.networking.k8s.io")
            == "/apis/networking.k8s.io/v1alpha1/clustercidrs")  # fmt: skip
    with pytest.raises(ValueError, match=r"failed to parse group version resource pods\.v1"):
        resource_path("pods.v1")


class Refusing(Checked):
    """A whole cluster double whose only allowed calls are node discovery and the checks' reads."""

    async def nodes(self) -> list[NodeState]:
        return [
            NodeState("cp1", (CP1,), "v1.29.7", True, True),
            NodeState("w1", (W1,), "v1.29.7", True, False),
        ]

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the upgrade went on to {name} after a failed check")

    def retryable(self, exc: BaseException) -> bool:
        return False


def test_upgrade_stops_before_pre_pull_with_the_table() -> None:
    api = Refusing({(CP1, "kube-apiserver"): ["kube-apiserver", "--enable-admission-plugins=SecurityContextDeny"]},
                   {CP1: [], W1: []})  # fmt: skip
    said: list[str] = []
    options = UpgradeOptions(UpgradePath.parse("1.29.7", "1.30.3"), dry_run=True)
    with pytest.raises(UpgradeK8sError) as failed:
        asyncio.run(upgrade_kubernetes(api, options, printf=said.append))  # type: ignore[arg-type]
    assert str(failed.value).startswith(
        "\nNODE         COMPONENT        REMOVED ADMISSION PLUGIN\n172.20.0.2   kube-apiserver   SecurityContextDeny\n"
    )
    assert failed.value.removed is not None and failed.value.removed.admission_plugins
    assert said == ['discovered controlplane nodes ["172.20.0.2"]', 'discovered worker nodes ["172.20.0.5"]',
                    "checking for removed Kubernetes component flags",
                    "checking for removed Kubernetes API resource versions"]  # fmt: skip


class FakeKube:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    async def get(self, path: str) -> Any:
        from ichor.kubeapi import KubeNotFoundError

        if path not in self.answers:
            raise KubeNotFoundError(
                f"the server could not find the requested resource ({path})", code=404, reason="NotFound"
            )
        return self.answers[path]


def test_live_api_counts_listed_objects_and_a_404_as_none() -> None:
    kube = FakeKube({"/apis/policy/v1beta1/podsecuritypolicies": {"items": [{}, {}]}})
    api = LiveUpgradeAPI.__new__(LiveUpgradeAPI)
    api.kube = kube
    assert asyncio.run(api.count_resources("podsecuritypolicies.v1beta1.policy")) == 2
    assert asyncio.run(api.count_resources("clustercidrs.v1alpha1.networking.k8s.io")) == 0


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("10.5.0.2", "https://10.5.0.2:6443"),  # no port: Talos's 6443, not the kubeconfig's
        ("10.5.0.2:7443", "https://10.5.0.2:7443"),
        ("https://cp.example.org:443", "https://cp.example.org:443"),
        ("https://cp.example.org", "https://cp.example.org:6443"),
        ("fd00::2", "https://[fd00::2]:6443"),  # too many colons: the whole text is the host
        ("[fd00::2]:7443", "https://[fd00::2]:7443"),
        ("http://10.5.0.2", "http://10.5.0.2"),  # SplitHostPort -> ("http", "//10.5.0.2"); a URL to client-go
    ],
)
def test_force_endpoint_as_talos(endpoint: str, url: str) -> None:
    assert force_endpoint(endpoint) == url


class FakeTalos:
    """``Talos.with_node(node).get(type, id)`` over resources encoded by the node's own encoder."""

    def __init__(self, specs: dict[tuple[str, str, str], Any]) -> None:
        self.specs, self.node = specs, ""

    def with_node(self, node: str) -> FakeTalos:
        other = FakeTalos(self.specs)
        other.node = node
        return other

    async def get(self, type_: str, resource_id: str) -> list[Any]:
        from ichor.client._talos import ResourceNotFoundError
        from ichor.client._types import Resource
        from ichor.machined.cosi._resource import spec_to_yaml

        spec = self.specs.get((self.node, type_, resource_id))
        if spec is None:
            raise ResourceNotFoundError(self.node, f"{type_} {resource_id!r} not found")
        text = spec if isinstance(spec, str) else spec_to_yaml(spec)
        return [Resource(self.node, "k8s", type_, resource_id, "1", "", "running", None, None, {}, {}, (),
                         text, b"", None)]  # fmt: skip


def test_live_api_reads_static_pod_commands_and_kubelet_args_as_the_node_encodes_them() -> None:
    from ichor.machined.resources._k8s import StaticPodSpec
    from ichor.machined.resources._kubelet import KubeletSpecSpec

    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "kube-apiserver", "command": ["/go-runner", "--enable-admission-plugins=SecurityContextDeny"]}]}}  # fmt: skip
    talos = FakeTalos({
        (CP1, "StaticPods.kubernetes.talos.dev", "kube-apiserver"): StaticPodSpec(pod),
        (CP2, "StaticPods.kubernetes.talos.dev", "kube-apiserver"): "pod:\n  spec:\n    containers:\n"
                                                                   "      - command: [kube-apiserver, --x=1]\n",
        (CP1, "KubeletSpecs.kubernetes.talos.dev", "kubelet"): KubeletSpecSpec(image="k", args=("--a=b",)),
    })  # fmt: skip
    api = LiveUpgradeAPI.__new__(LiveUpgradeAPI)
    api.talos = talos  # type: ignore[assignment]
    assert (
        asyncio.run(api.static_pod_command(CP1, "kube-apiserver")) == pod["spec"]["containers"][0]["command"]
    )  # type: ignore[index]
    # Talos's own shape (``pod:`` then the manifest) reads the same
    assert asyncio.run(api.static_pod_command(CP2, "kube-apiserver")) == ["kube-apiserver", "--x=1"]
    assert asyncio.run(api.static_pod_command(CP1, "kube-scheduler")) is None
    assert asyncio.run(api.kubelet_args(CP1)) == ["--a=b"]
    assert asyncio.run(api.kubelet_args(W1)) is None
