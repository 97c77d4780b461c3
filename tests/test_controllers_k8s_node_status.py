"""NodeStatuses, NodeCordonedSpecs and KubeletLifecycles (issue 25 §3): Talos 1.7's view of the node
in Kubernetes, the cordon around shutdown/upgrade/reset, and the kubelet's lifecycle marker.

The NodeStatus comes from a fake API server read with the kubelet's kubeconfig (as Talos's
watcher reads it); the cordon is applied to the ``Node`` as Talos's ``ApplyCordoned`` does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from controller_helpers import run, running
from kube_helpers import PKI, Reply, fake_apiserver, json_reply, status_reply

from ichor.machined.controllers.k8s import kubelet_lifecycle, node_cordoned, node_status, nodes
from ichor.machined.cosi import WAIT_STATUSES, EmptySpec, Registry, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MACHINE_STATUS_ID,
    MACHINE_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_LABEL_SPECS,
    SERVICES,
    MachineStage,
    MachineStatusSpec,
    MachineStatusStatus,
    MachineTypeSpec,
    NodeLabelSpecSpec,
    ServiceSpec,
    register_node_types,
)
from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID, KubernetesSecretsSpec
from ichor.machined.resources._k8s_status import (
    KUBELET_LIFECYCLES,
    NODE_CORDONED_ID,
    NODE_CORDONED_SPECS,
    NODE_STATUSES,
    NodeStatusSpec,
)
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES, NodenameSpec
from ichor.machined.resources._protoenc import EMPTY_SPECS, encode_spec, message_class


def _node(ready: str, *, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "cp-1", "labels": {"kubernetes.io/hostname": "cp-1"},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]},
    }  # fmt: skip


def test_node_status_reads_readiness_cordon_labels_and_annotations_from_the_node() -> None:
    assert node_status.node_status(_node("True")) == NodeStatusSpec(
        nodename="cp-1", node_ready=True, unschedulable=False, labels={"kubernetes.io/hostname": "cp-1"},
        annotations={"node.alpha.kubernetes.io/ttl": "0"},
    )  # fmt: skip
    assert node_status.node_status(_node("Unknown", unschedulable=True)).node_ready is False
    assert node_status.node_status(_node("False", unschedulable=True)).unschedulable is True
    assert node_status.node_status({"metadata": {"name": "w-1"}}) == NodeStatusSpec(nodename="w-1")


def test_node_status_follows_the_node_through_the_kubelets_kubeconfig(tmp_path: Path) -> None:
    stored: dict[str, Any] = {}
    seen: list[str] = []

    async def handler(method: str, target: str, body: bytes) -> Reply:
        seen.append(f"{method} {target}")
        if not stored:
            return status_reply(404, "NotFound", 'nodes "cp-1" not found')
        return json_reply(200, stored)

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            controller = node_status.NodeStatusController(Layout(tmp_path, "127.0.0.1"), poll=0.05)
            async with running(controller) as state:
                state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="cp-1")))
                # no kubelet kubeconfig yet: a wait naming it, no status
                await assert_resource(
                    state,
                    WAIT_STATUSES,
                    controller.name,
                    lambda r: r.spec.waiting_for == "kubelet kubeconfig",
                )
                (tmp_path / "etc/kubernetes").mkdir(parents=True)
                (tmp_path / "etc/kubernetes/kubeconfig-kubelet").write_text(PKI.kubeconfig(url))
                await assert_no_resource(state, WAIT_STATUSES, controller.name, timeout=5)
                assert state.list("k8s", NODE_STATUSES) == []  # not registered yet: no status
                stored.update(_node("False"))
                await assert_resource(
                    state, NODE_STATUSES, "cp-1", lambda r: r.spec.node_ready is False, timeout=5
                )
                stored.update(_node("True", unschedulable=True))
                await assert_resource(
                    state,
                    NODE_STATUSES,
                    "cp-1",
                    lambda r: r.spec.node_ready and r.spec.unschedulable,
                    timeout=5,
                )
                # the node is deleted from Kubernetes: the status goes
                stored.clear()
                await assert_no_resource(state, NODE_STATUSES, "cp-1", timeout=5)
        assert seen and all(s == "GET /api/v1/nodes/cp-1" for s in seen)  # it only reads

    run(main)


def _status(state: Any, stage: MachineStage) -> None:
    spec = MachineStatusSpec(stage, MachineStatusStatus(ready=stage is MachineStage.RUNNING))
    current = state.list("runtime", MACHINE_STATUSES)
    if current:
        state.update(current[0].with_spec(spec))
    else:
        state.create(MACHINE_STATUSES.new(MACHINE_STATUS_ID, spec))


def test_the_node_is_cordoned_while_shutting_down_upgrading_or_resetting_as_talos() -> None:
    async def main() -> None:
        async with running(node_cordoned.node_cordoned_spec_controller()) as state:
            _status(state, MachineStage.RUNNING)
            await assert_no_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID)
            for stage in (MachineStage.SHUTTING_DOWN, MachineStage.UPGRADING, MachineStage.RESETTING):
                _status(state, stage)
                await assert_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID, lambda r: True)
                _status(state, MachineStage.RUNNING)
                await assert_no_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID)
            # rebooting leaves the cordon as it was (Talos changes it only in the stages above)
            _status(state, MachineStage.UPGRADING)
            await assert_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID, lambda r: True)
            _status(state, MachineStage.REBOOTING)
            _status(state, MachineStage.MAINTENANCE)
            await asyncio.sleep(0.1)  # the controller saw both stages
            await assert_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID, lambda r: True)
            _status(state, MachineStage.BOOTING)
            await assert_no_resource(state, NODE_CORDONED_SPECS, NODE_CORDONED_ID)

    run(main)


def test_apply_cordons_with_talos_annotation_and_uncordons_only_its_own_cordon() -> None:
    node = {"metadata": {"name": "cp-1", "annotations": {}}, "spec": {}}
    cordoned = nodes.apply_to_node(node, {}, [], cordoned=True)
    assert cordoned["spec"]["unschedulable"] is True
    assert cordoned["metadata"]["annotations"] == {"talos.dev/cordoned": "true"}
    assert nodes.apply_to_node(cordoned, {}, [], cordoned=True) == cordoned  # nothing more to write
    released = nodes.apply_to_node(cordoned, {}, [])
    assert "unschedulable" not in released["spec"] and released["metadata"]["annotations"] == {}
    # cordoned by hand (kubectl cordon): no annotation, so Talos leaves it cordoned
    by_hand = {"metadata": {"name": "cp-1"}, "spec": {"unschedulable": True}}
    assert nodes.apply_to_node(by_hand, {}, [])["spec"]["unschedulable"] is True


def _node_store(stored: dict[str, Any], puts: list[dict[str, Any]]) -> Any:
    """A fake API server's handler for one Node: 404 while ``stored`` is empty, else GET answers it
    and PUT replaces it (recorded in ``puts``)."""

    async def handler(method: str, target: str, body: bytes) -> Reply:
        if not stored:
            return status_reply(404, "NotFound", 'nodes "cp-1" not found')
        if method == "PUT":
            puts.append(json.loads(body))
            stored.clear()
            stored.update(puts[-1])
        return json_reply(200, stored)

    return handler


def _control_plane_with_admin(state: Any, url: str) -> None:
    state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.CONTROLPLANE))
    state.create(
        K8S_SECRETS.new(K8S_SECRETS_ID, KubernetesSecretsSpec(localhost_admin_kubeconfig=PKI.kubeconfig(url)))
    )


def test_node_apply_puts_the_cordon_on_the_node_while_the_spec_exists(tmp_path: Path) -> None:
    stored: dict[str, Any] = {"metadata": {"name": "cp-1", "resourceVersion": "1"}, "spec": {}, "status": {}}
    puts: list[dict[str, Any]] = []
    handler = _node_store(stored, puts)

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            controller = nodes.NodeApplyController(
                Layout(tmp_path, "127.0.0.1"), first_retry=0.05, resync=0.05
            )
            async with running(controller) as state:
                _control_plane_with_admin(state, url)
                state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="cp-1")))
                state.create(NODE_CORDONED_SPECS.new(NODE_CORDONED_ID, EmptySpec()))
                await _until(lambda: any(p["spec"].get("unschedulable") for p in puts))
                state.destroy("k8s", NODE_CORDONED_SPECS, NODE_CORDONED_ID)
                await _until(lambda: not puts[-1]["spec"].get("unschedulable"))
        assert puts[0]["metadata"]["annotations"]["talos.dev/cordoned"] == "true"
        assert "talos.dev/cordoned" not in puts[-1]["metadata"].get("annotations", {})

    run(main)


def test_node_apply_labels_a_node_as_soon_as_its_registration_shows_not_after_the_backoff(
    tmp_path: Path,
) -> None:
    """The kubelet registers the Node while NodeApply backs off (30 s at most): the NodeStatus that
    appears wakes it, so the control-plane label lands at once (``upgrade-k8s`` finds control planes
    by it, Talos's way)."""
    stored: dict[str, Any] = {}  # no Node until the kubelet registers it
    puts: list[dict[str, Any]] = []
    handler = _node_store(stored, puts)

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            # a backoff far longer than the test: only the NodeStatus can wake it in time
            controller = nodes.NodeApplyController(
                Layout(tmp_path, "127.0.0.1"), first_retry=60, max_retry=60
            )
            async with running(controller) as state:
                _control_plane_with_admin(state, url)
                state.create(NODE_LABEL_SPECS.new(nodes.CONTROL_PLANE_ROLE, NodeLabelSpecSpec(
                    key=nodes.CONTROL_PLANE_ROLE, value="")))  # fmt: skip
                state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="cp-1")))
                await _until(lambda: bool(state.list(WAIT_STATUSES.default_namespace, WAIT_STATUSES)))
                stored.update(
                    {"metadata": {"name": "cp-1", "resourceVersion": "1"}, "spec": {}, "status": {}}
                )
                state.create(NODE_STATUSES.new("cp-1", NodeStatusSpec(nodename="cp-1", node_ready=False)))
                await _until(lambda: bool(puts), timeout=5.0)
        assert puts[0]["metadata"]["labels"] == {nodes.CONTROL_PLANE_ROLE: ""}

    run(main)


async def _until(condition: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def test_kubelet_lifecycle_exists_while_the_kubelet_service_does() -> None:
    async def main() -> None:
        async with running(kubelet_lifecycle.kubelet_lifecycle_controller()) as state:
            await assert_no_resource(state, KUBELET_LIFECYCLES, "kubelet")
            service = state.create(SERVICES.new("kubelet", ServiceSpec(running=False, healthy=False)))
            await asyncio.sleep(0.1)
            assert state.list("k8s", KUBELET_LIFECYCLES) == []  # registered, never started: none
            service = state.update(service.with_spec(ServiceSpec(running=True, healthy=False)))
            await assert_resource(
                state, KUBELET_LIFECYCLES, "kubelet", lambda r: r.metadata.namespace == "k8s"
            )
            state.update(service.with_spec(ServiceSpec(running=False, healthy=False)))  # restarting
            await asyncio.sleep(0.1)
            assert [r.id for r in state.list("k8s", KUBELET_LIFECYCLES)] == ["kubelet"]  # kept
            state.destroy("runtime", SERVICES, "kubelet")
            await assert_no_resource(state, KUBELET_LIFECYCLES, "kubelet")

    run(main)


def test_definitions_columns_and_typed_specs_are_talos() -> None:
    registry = Registry()
    register_node_types(registry)
    status = registry.get("NodeStatuses.kubernetes.talos.dev").spec
    assert (status.default_namespace, [(c.name, c.json_path) for c in status.print_columns]) == (
        "k8s", [("Ready", "{.nodeReady}"), ("Unschedulable", "{.unschedulable}")],
    )  # fmt: skip
    cordoned = registry.get("NodeCordonedSpecs.k8s.talos.dev").spec
    assert (cordoned.default_namespace, cordoned.sensitive, cordoned.print_columns) == ("k8s", True, ())
    lifecycle = registry.get("KubeletLifecycles.kubernetes.talos.dev").spec
    assert (lifecycle.default_namespace, lifecycle.print_columns) == ("k8s", ())
    # Talos's empty structs: no bytes on the wire
    assert {"NodeCordonedSpecs.k8s.talos.dev", "KubeletLifecycles.kubernetes.talos.dev"} <= EMPTY_SPECS
    # NodeStatusSpec by Talos's field numbers
    spec = NodeStatusSpec(
        nodename="cp-1", node_ready=True, unschedulable=True, labels={"a": "b"}, annotations={"c": "d"}
    )
    message = message_class("talos.resource.definitions.k8s.NodeStatusSpec")()
    message.ParseFromString(encode_spec("NodeStatuses.kubernetes.talos.dev", spec))
    by_number = {f.number: v for f, v in message.ListFields()}
    assert by_number[1] == "cp-1" and by_number[2] is True and by_number[3] is True
    assert dict(by_number[4]) == {"a": "b"} and dict(by_number[5]) == {"c": "d"}
