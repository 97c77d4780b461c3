"""``talosctl why``'s walk on a fake node (graph, resources, waits, services), and the transform
runner's wait on a missing named input that the walk follows."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller_helpers import apply, config
from google.protobuf import timestamp_pb2

from ichor.api.gen.inspectapi import inspect_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.client import why
from ichor.client.why import Chain, Edge, NodeView, ResourceRef, ServiceView, Wait
from ichor.machined.controllers.k8s import kubelet as area
from ichor.machined.cosi import (
    WAIT_STATUSES,
    ControllerContext,
    Input,
    Registry,
    ResourceType,
    Runtime,
    SkipReconcile,
    State,
    TransformController,
    assert_no_resource,
    assert_resource,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    HostnameStatusSpec,
    NodeAddressSpec,
    register_node_types,
)
from ichor.machined.server._cosi import resource_to_proto
from ichor.machined.server._inspect import dependency_edges

_AGE = re.compile(r"\((\d+h\d+m|\d+[sm])\)")
NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
NODE = "10.5.0.2"

KSPEC = "KubeletSpecs.kubernetes.talos.dev"
NODEIPS = "NodeIPs.kubernetes.talos.dev"
NODEIPCFG = "NodeIPConfigs.kubernetes.talos.dev"
ADDRS = "NodeAddresses.net.talos.dev"
TIME = "TimeStatuses.v1alpha1.talos.dev"
PODS = "StaticPods.kubernetes.talos.dev"
APICFG = "APIServerConfigs.kubernetes.talos.dev"

GRAPH = [
    Edge("k8s.KubeletSpecController", KSPEC, "k8s", output=True),
    Edge("k8s.KubeletSpecController", NODEIPS, "k8s", output=False, id="kubelet"),
    Edge("k8s.NodeIPController", NODEIPS, "k8s", output=True),
    Edge("k8s.NodeIPController", NODEIPCFG, "k8s", output=False, id="kubelet"),
    Edge("k8s.NodeIPController", ADDRS, "network", output=False, id="routed-no-k8s"),
    Edge("network.NodeAddressController", ADDRS, "network", output=True),
    Edge("time.SyncController", TIME, "runtime", output=True),
    Edge("k8s.ControlPlaneStaticPodController", PODS, "k8s", output=True),
    Edge("k8s.ControlPlaneStaticPodController", APICFG, "k8s", output=False),
    Edge("k8s.HandWritten", "Things.ichor.dev", "x", output=True),
    Edge("k8s.HandWritten", NODEIPCFG, "k8s", output=False, id="other"),
]


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def view(
    *,
    waits: list[Wait] = (),
    services: list[ServiceView] = (),
    present: list[ResourceRef] = (),  # type: ignore[assignment]
) -> NodeView:
    resources: dict[str, list[ResourceRef]] = {}
    base = [ResourceRef(NODEIPCFG, "k8s", "kubelet", "k8s.NodeIPConfigController"),
            ResourceRef(ADDRS, "network", "routed-no-k8s", "network.NodeAddressController")]  # fmt: skip
    for ref in [*base, *present]:
        resources.setdefault(ref.type, []).append(ref)
    return NodeView(NODE, GRAPH, resources, list(waits), {s.id: s for s in services}, NOW)


def lines(chain: Chain) -> list[str]:
    return why.render(chain, NOW)


KUBELET_WAITING = ServiceView("kubelet", "Waiting", None, "Waiting for kubelet spec", ago(150))
KUBELET_WAIT = Wait("service-kubelet", "v1alpha1.ServiceController", "service kubelet: time sync, kubelet spec",
                    "Waiting for time sync, kubelet spec", ago(125))  # fmt: skip
NODE_IP_REASON = (
    "no address of this node matches machine.kubelet.nodeIP.validSubnets ['10.9.0.0/16'] "
    "(node addresses: 10.5.0.2) (fix machine.kubelet.nodeIP.validSubnets to include one of the node's addresses)"
)


def test_kubelet_waiting_for_its_spec_walks_down_to_the_valid_subnets_key() -> None:
    synced = ResourceRef(TIME, "runtime", "node", "time.SyncController", ago(600))
    chain = why.why_service(view(
        present=[synced],
        services=[KUBELET_WAITING],
        waits=[KUBELET_WAIT,
               Wait("k8s.KubeletSpecController", "k8s.KubeletSpecController", "NodeIPs/kubelet",
                    "NodeIPs/kubelet does not exist yet", ago(120)),
               Wait("k8s.NodeIPController", "k8s.NodeIPController", "node IP", NODE_IP_REASON, ago(119))],
    ), "kubelet")  # fmt: skip
    assert not chain.ok
    # The met condition (time sync) is passed over: the chain follows the one that is not met.
    assert lines(chain) == [
        "kubelet Waiting (2m): Waiting for kubelet spec",
        "<- k8s.KubeletSpecController waits on NodeIPs/kubelet (2m)",
        "<- k8s.NodeIPController waits on node IP (1m): " + NODE_IP_REASON,
        "fix: fix machine.kubelet.nodeIP.validSubnets to include one of the node's addresses",
    ]
    assert chain.root.subject == "k8s.NodeIPController"
    doc = chain.as_json(NOW)
    assert doc["fix"].startswith("fix machine.kubelet.nodeIP.validSubnets") and doc["chain"][0]["age"] == "2m"


def test_a_service_waiting_on_a_stopped_service_ends_with_starting_it_on_that_node() -> None:
    chain = why.why_service(view(
        services=[ServiceView("kubelet", "Waiting", None, 'Waiting for service "cri" to be "up"', ago(40)),
                  ServiceView("cri", "Finished", None, "Service finished successfully", ago(30))],
        waits=[Wait("service-kubelet", "v1alpha1.ServiceController", 'service kubelet: service "cri" to be "up"',
                    "", ago(30))],
    ), "kubelet")  # fmt: skip
    assert lines(chain) == [
        'kubelet Waiting (30s): Waiting for service "cri" to be "up"',
        "<- cri Finished (30s): Service finished successfully",
        f"fix: start it: talosctl -n {NODE} service cri start",
    ]


def test_a_running_healthy_service_is_ok_and_a_failing_health_check_is_the_cause() -> None:
    ok = why.why_service(
        view(services=[ServiceView("etcd", "Running", True, "Health check successful", ago(5))]), "etcd"
    )
    assert ok.ok and lines(ok) == ["etcd Running (OK) (5s): Health check successful"]
    bad = why.why_service(
        view(services=[ServiceView("etcd", "Running", False, "Health check failed: x", ago(5))]), "etcd"
    )
    assert not bad.ok and lines(bad) == [
        "etcd Running (Fail) (5s): Health check failed: x",
        f"fix: etcd on {NODE} fails its health check: see talosctl -n {NODE} logs etcd",
    ]


def test_an_extension_waiting_for_a_file_nothing_creates_names_the_file_and_its_depends() -> None:
    chain = why.why_service(view(
        services=[ServiceView("ext-waiter", "Waiting", None, 'Waiting for file "/var/run/never" to exist', ago(70))],
        waits=[Wait("service-ext-waiter", "v1alpha1.ServiceController",
                    'service ext-waiter: file "/var/run/never" to exist', "", ago(65))],
    ), "ext-waiter")  # fmt: skip
    assert lines(chain) == [
        'ext-waiter Waiting (1m): Waiting for file "/var/run/never" to exist',
        '<- file "/var/run/never" never appears (1m): nothing on this node creates it',
        "fix: create /var/run/never on the node, or remove it from the depends of ext-waiter "
        "(its spec in /usr/local/etc/containers)",
    ]


def test_time_sync_follows_the_time_status_to_the_unreachable_server() -> None:
    chain = why.why_service(view(
        present=[ResourceRef(TIME, "runtime", "node", "time.SyncController", ago(300))],
        services=[ServiceView("etcd", "Waiting", None, "Waiting for time sync", ago(20))],
        waits=[Wait("service-etcd", "v1alpha1.ServiceController", "service etcd: time sync", "", ago(20)),
               Wait("time.SyncController", "time.SyncController", "time sync", "10.5.0.1: timed out", ago(18))],
    ), "etcd")  # fmt: skip
    assert lines(chain) == [
        "etcd Waiting (20s): Waiting for time sync",
        "<- time.SyncController waits on time sync (18s): 10.5.0.1: timed out",
        "fix: make a time server in machine.time.servers reachable from the node",
    ]


def test_an_image_pull_through_a_mirror_that_is_down_names_the_mirror_and_its_key() -> None:
    message = ('retrying pull of image ghcr.io/siderolabs/kubelet:v1.30.3 in 4s (attempt 2 failed): failed to pull '
               'image "ghcr.io/siderolabs/kubelet:v1.30.3": mirror 10.5.0.1:5999: connection refused')  # fmt: skip
    chain = why.why_service(
        view(services=[ServiceView("kubelet", "Preparing", None, message, ago(9))]), "kubelet"
    )
    assert lines(chain) == [
        f"kubelet Preparing (9s): {message}",
        'fix: bring up the registry mirror 10.5.0.1:5999, or fix machine.registries.mirrors["ghcr.io"]',
    ]
    error = (
        'failed to pull image "ghcr.io/siderolabs/kubelet:v1.30.3": mirror 10.5.0.1:5999: connection refused'
    )
    preparing = why.why_service(view(
        services=[ServiceView("kubelet", "Preparing", None, "Running pre state", ago(130))],
        waits=[Wait("kubelet", "", "image ghcr.io/siderolabs/kubelet:v1.30.3", error, ago(125))],
    ), "kubelet")  # fmt: skip
    assert lines(preparing) == [
        "kubelet Preparing (2m): Running pre state",
        f"<- kubelet waits on image ghcr.io/siderolabs/kubelet:v1.30.3 (2m): {error}",
        'fix: bring up the registry mirror 10.5.0.1:5999, or fix machine.registries.mirrors["ghcr.io"]',
    ]
    assert (
        why.registry_of("nginx:1") == "docker.io"
        and why.registry_of("localhost:5000/a/b") == "localhost:5000"
    )


def test_a_forbidden_extra_arg_is_the_static_pod_controllers_wait_with_the_key_to_remove() -> None:
    reason = ("cluster.apiServer.extraArgs.etcd-servers: the argument etcd-servers is set by Talos and cannot be "
              "overridden: remove cluster.apiServer.extraArgs.etcd-servers from the machine config")  # fmt: skip
    chain = why.why_resource(view(waits=[Wait("k8s.ControlPlaneStaticPodController", "k8s.ControlPlaneStaticPodController",
                                              "control plane static pods", reason, ago(3))]), PODS, "kube-apiserver")  # fmt: skip
    assert lines(chain) == [
        f"k8s.ControlPlaneStaticPodController waits on control plane static pods (3s): {reason}",
        "fix: remove cluster.apiServer.extraArgs.etcd-servers from the machine config",
    ]


def test_a_controller_that_records_no_wait_is_walked_through_its_missing_named_input() -> None:
    chain = why.why_resource(view(), "Things.ichor.dev", "a")
    assert lines(chain) == [
        "k8s.HandWritten waits on NodeIPConfigs/other",
        "<- NodeIPConfigs/other does not exist: no controller on this node produces it",
    ]
    present = why.why_resource(view(present=[ResourceRef(KSPEC, "k8s", "kubelet", "k8s.KubeletSpecController", ago(61))]),
                               KSPEC, None)  # fmt: skip
    assert present.ok and lines(present) == [
        "KubeletSpecs/kubelet exists (owner k8s.KubeletSpecController) (1m)"
    ]


def test_waits_that_point_back_at_each_other_end_the_chain_instead_of_looping() -> None:
    graph = [Edge("A", "As.x", "x", True), Edge("A", "Bs.x", "x", False, "b"),
             Edge("B", "Bs.x", "x", True), Edge("B", "As.x", "x", False, "a")]  # fmt: skip
    waits = [Wait("A", "A", "Bs/b", "Bs/b does not exist yet", ago(5)), Wait("B", "B", "As/a", "", ago(4))]
    chain = why.why_resource(NodeView(NODE, graph, {}, waits, {}, NOW), "As.x", "a")
    assert lines(chain) == [
        "A waits on Bs/b (5s)",
        "<- B waits on As/a (4s)",
        "<- As/a is already on this chain: the waits form a cycle",
    ]


def test_config_keys_and_conditions_are_read_out_of_reasons() -> None:
    assert why.config_key("no address matches machine.kubelet.nodeIP.validSubnets ['10.9.0.0/16']") == (
        "machine.kubelet.nodeIP.validSubnets"
    )
    assert (
        why.config_key("machine.network.interfaces[0].vip.ip is outside")
        == "machine.network.interfaces[0].vip.ip"
    )
    assert why.config_key("connection refused") is None
    assert why._split_conditions('service "cri" to be "up", time sync, file "/a, b" to exist') == [
        'service "cri" to be "up"', "time sync", 'file "/a, b" to exist']  # fmt: skip
    assert why.age(ago(3725), NOW) == "1h2m" and why.age(None, NOW) == "?"


def test_a_failing_health_stage_heads_the_chain_of_the_node_that_holds_it_back() -> None:
    below = why.why_service(
        view(services=[ServiceView("etcd", "Finished", None, "Service finished successfully", ago(12))]),
        "etcd",
    )
    chain = why.health_chain("etcd to be healthy", f"{NODE}: service etcd is Finished", below)
    assert lines(chain) == [
        f'health stage "etcd to be healthy" fails: {NODE}: service etcd is Finished',
        f"<- {NODE}: etcd Finished (12s): Service finished successfully",
        f"fix: start it: talosctl -n {NODE} service etcd start",
    ]
    assert why.stage_subjects("etcd to be healthy") == [("service", "etcd", "control planes")]
    assert why.stage_subjects("kubelet to be healthy")[0] == ("service", "kubelet", "all")


@dataclasses.dataclass(frozen=True)
class Spec:
    text: str = ""


INS = ResourceType("Ins.test.ichor.dev", "runtime", Spec)
OUTS = ResourceType("Outs.test.ichor.dev", "runtime", Spec)


def test_the_transform_runner_waits_on_a_missing_named_input_and_clears_it_when_it_comes() -> None:
    def derive(ctx: ControllerContext) -> dict[str, Spec]:
        found = ctx.get_or_none(INS, "one")
        if found is None:
            raise SkipReconcile
        return {"out": Spec(found.spec.text)}

    async def main() -> None:
        state = State()
        runtime = Runtime(state)
        runtime.register(TransformController("test.OutController", inputs=[Input(INS, id="one")], output=OUTS,
                                             map_inputs=derive))  # fmt: skip
        task = asyncio.create_task(runtime.run())
        try:
            wait = await assert_resource(
                state, WAIT_STATUSES, "test.OutController", lambda r: r.spec.waiting_for == "Ins/one"
            )
            assert (
                wait.spec.reason == "Ins/one does not exist yet"
                and wait.metadata.owner == "test.OutController"
            )
            state.create(INS.new("one", Spec("hi")))
            await assert_resource(state, OUTS, "out", lambda r: r.spec.text == "hi")
            await assert_no_resource(state, WAIT_STATUSES, "test.OutController")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


def test_real_kubelet_controllers_with_a_wrong_valid_subnet_chain_to_the_key(tmp_path: Path) -> None:
    """The kubelet's controllers as a node runs them; the view read by :func:`ichor.client.why.gather`
    from the answers the node's API handlers would give (graph edges, resources, waits, services)."""

    async def main() -> None:
        state = State()
        registry = Registry()
        register_node_types(registry)
        runtime = Runtime(state, registry=registry)
        for controller in area.kubelet_controllers(Layout(tmp_path, "10.5.0.2")):
            runtime.register(controller)
        task = asyncio.create_task(runtime.run())
        try:
            state.create(HOSTNAME_STATUSES.new(HOSTNAME_STATUS_ID, HostnameStatusSpec("cp-1", "lab")))
            addresses = NodeAddressSpec((ipaddress.ip_interface("10.5.0.2/24"),))
            state.create(NODE_ADDRESSES.new(f"{NODE_ADDRESS_ROUTED_ID}-no-k8s", addresses))
            apply(state, config(extra_machine="  kubelet: {nodeIP: {validSubnets: ['10.9.0.0/16']}}\n"))
            await assert_resource(state, WAIT_STATUSES, "k8s.NodeIPController", lambda r: True)
            await assert_resource(
                state,
                WAIT_STATUSES,
                "k8s.KubeletSpecController",
                lambda r: r.spec.waiting_for == "NodeIPs/kubelet",
            )
            view = await why.gather(_FakeClient(state, runtime), NODE)
            assert view.services["kubelet"] == ServiceView("kubelet", "Waiting", None, "Waiting for kubelet spec",
                                                           datetime(2026, 11, 26, 11, 58, tzinfo=UTC))  # fmt: skip
            now = view.now
            chain = why.why_resource(view, KSPEC, None)
            assert [_AGE.sub("(AGE)", x) for x in why.render(chain, now)] == [
                "k8s.KubeletSpecController waits on NodeIPs/kubelet (AGE)",
                "<- k8s.NodeIPController waits on node IP (AGE): no address of this node matches "
                "machine.kubelet.nodeIP.validSubnets ['10.9.0.0/16', '!10.244.0.0/16', '!10.96.0.0/12'] (node "
                "addresses: 10.5.0.2) (fix "
                "machine.kubelet.nodeIP.validSubnets to include one of the node's addresses)",
                "fix: fix machine.kubelet.nodeIP.validSubnets to include one of the node's addresses",
            ]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


class _FakeClient:
    """The calls :func:`ichor.client.why.gather` makes, answered from a live state and runtime as
    the node's handlers answer them (the same protos)."""

    def __init__(self, state: State, runtime: Runtime) -> None:
        self.state, self.runtime = state, runtime
        self.inspect, self.machine = self, self

    def with_node(self, node: str) -> _FakeClient:
        return self

    async def ControllerRuntimeDependencies(self, request: object) -> Any:
        edges = dependency_edges(self.runtime.registered())
        dependency = inspect_pb2.ControllerRuntimeDependency(edges=edges)
        return inspect_pb2.ControllerRuntimeDependenciesResponse(messages=[dependency])

    async def ServiceList(self, request: object) -> Any:
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(datetime(2026, 11, 26, 11, 58))
        event = machine_pb2.ServiceEvent(msg="Waiting for kubelet spec", state="Waiting", ts=ts)
        info = machine_pb2.ServiceInfo(id="kubelet", state="Waiting", events=machine_pb2.ServiceEvents(events=[event]),
                                       health=machine_pb2.ServiceHealth(unknown=True))  # fmt: skip
        return machine_pb2.ServiceListResponse(messages=[machine_pb2.ServiceList(services=[info])])

    async def list_resources(self, namespace: str, rtype: str) -> list[Any]:
        return [resource_to_proto(r) for r in self.state.list(namespace, rtype)]


def test_every_health_stage_but_the_node_level_ones_says_what_to_walk_from() -> None:
    from ichor.client.health import CHECK_NAMES, NODE_CHECKS, REACHABLE

    self_explained = {REACHABLE, NODE_CHECKS[1], NODE_CHECKS[2]}  # the reason names the node and the fix
    for stage in CHECK_NAMES:
        assert bool(why.stage_subjects(stage)) is (stage not in self_explained), stage
    alone = why.health_chain(REACHABLE, f"{NODE}: not answering yet", None)
    assert lines(alone) == [f'health stage "{REACHABLE}" fails: {NODE}: not answering yet']
