"""controllers/k8s/nodes.py: Talos 1.7's node labels and taints, from the config to NodeLabelSpecs and
NodeTaintSpecs, and applied to the Node object through a fake API server (ownership annotations,
waits with the reason, conflicts retried)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller_helpers import apply, config, run, running
from kube_helpers import PKI, Reply, fake_apiserver, json_reply, status_reply

from ichor.machined.controllers.k8s import nodes
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_LABEL_SPECS,
    NODE_TAINT_SPECS,
    MachineTypeSpec,
    NodeLabelSpecSpec,
    NodeTaintSpecSpec,
)
from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID, KubernetesSecretsSpec
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES, NodenameSpec

CP = nodes.CONTROL_PLANE_ROLE
EXTRA = (
    "  nodeLabels: {topology.kubernetes.io/zone: rack-1}\n"
    "  nodeTaints: {dedicated: 'storage:NoExecute', gpu: NoSchedule}\n"
)


def _ids(state: Any, rtype: Any) -> set[str]:
    return {r.id for r in state.list("k8s", rtype)}


def test_control_plane_gets_the_role_label_and_taint_plus_the_configs() -> None:
    async def main() -> None:
        async with running(nodes.node_label_spec_controller(), nodes.node_taint_spec_controller()) as state:
            apply(state, config(extra_machine=EXTRA))
            await assert_resource(state, NODE_LABEL_SPECS, CP, lambda r: r.spec == NodeLabelSpecSpec(CP, ""))
            await assert_resource(
                state, NODE_LABEL_SPECS, "topology.kubernetes.io/zone", lambda r: r.spec.value == "rack-1"
            )
            await assert_resource(
                state, NODE_TAINT_SPECS, CP, lambda r: r.spec == NodeTaintSpecSpec(CP, "NoSchedule", "")
            )
            await assert_resource(
                state, NODE_TAINT_SPECS, "dedicated",
                lambda r: r.spec == NodeTaintSpecSpec("dedicated", "NoExecute", "storage"),
            )  # fmt: skip
            await assert_resource(state, NODE_TAINT_SPECS, "gpu", lambda r: r.spec.effect == "NoSchedule")
            # allowSchedulingOnControlPlanes drops the taint, not the label; a dropped key goes
            apply(state, config() + "  allowSchedulingOnControlPlanes: true\n")
            await assert_no_resource(state, NODE_TAINT_SPECS, CP)
            await assert_no_resource(state, NODE_LABEL_SPECS, "topology.kubernetes.io/zone")
            assert _ids(state, NODE_LABEL_SPECS) == {CP}
            assert _ids(state, NODE_TAINT_SPECS) == set()

    run(main)


def test_a_worker_gets_only_what_its_config_says() -> None:
    async def main() -> None:
        async with running(nodes.node_label_spec_controller(), nodes.node_taint_spec_controller()) as state:
            apply(state, config(type="worker", extra_machine=EXTRA))
            await assert_resource(state, NODE_TAINT_SPECS, "gpu", lambda r: r.spec.value == "")
            await assert_resource(state, NODE_LABEL_SPECS, "topology.kubernetes.io/zone", lambda r: True)
            assert _ids(state, NODE_LABEL_SPECS) == {"topology.kubernetes.io/zone"}
            assert _ids(state, NODE_TAINT_SPECS) == {"dedicated", "gpu"}

    run(main)


def _node(
    labels: dict[str, str], taints: list[dict[str, str]], annotations: dict[str, str] | None = None
) -> dict:  # type: ignore[type-arg]
    meta: dict[str, Any] = {"name": "cp-1", "resourceVersion": "7", "labels": labels}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"taints": taints} if taints else {},
    }


def test_apply_takes_what_is_free_and_never_touches_what_someone_else_set() -> None:
    node = _node(
        {"kubernetes.io/hostname": "cp-1", "tier": "theirs"},
        [
            {"key": "theirs", "effect": "NoExecute"},
            {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
        ],
    )
    taints = [NodeTaintSpecSpec(CP, "NoSchedule"), NodeTaintSpecSpec("dedicated", "NoSchedule", "storage")]
    out = nodes.apply_to_node(node, {CP: "", "tier": "ours", "zone": "a"}, taints)
    meta = out["metadata"]
    assert meta["labels"] == {"kubernetes.io/hostname": "cp-1", "tier": "theirs", CP: "", "zone": "a"}
    assert json.loads(meta["annotations"][nodes.OWNED_LABELS]) == [CP, "zone"]
    # a taint with our key but another value is someone else's: kept as it is, not owned
    assert out["spec"]["taints"] == [
        {"key": "theirs", "effect": "NoExecute"},
        {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
        {"key": CP, "effect": "NoSchedule"},
    ]
    assert json.loads(meta["annotations"][nodes.OWNED_TAINTS]) == [CP]
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "cp-1", "tier": "theirs"}, "input changed"
    # applied again: nothing to change; then the config drops the zone label and the taint
    assert nodes.apply_to_node(out, {CP: "", "tier": "ours", "zone": "a"}, taints) == out
    again = nodes.apply_to_node(out, {CP: ""}, [])
    assert again["metadata"]["labels"] == {"kubernetes.io/hostname": "cp-1", "tier": "theirs", CP: ""}
    assert nodes.OWNED_TAINTS not in again["metadata"]["annotations"]
    assert [t["key"] for t in again["spec"]["taints"]] == ["theirs", "dedicated"]


def test_an_owned_label_follows_the_config_and_a_garbled_annotation_owns_nothing() -> None:
    node = _node({"zone": "a", "kept": "x"}, [], {nodes.OWNED_LABELS: '["zone"]'})
    assert nodes.apply_to_node(node, {"zone": "b"}, [])["metadata"]["labels"] == {"zone": "b", "kept": "x"}
    garbled = _node({"zone": "a"}, [], {nodes.OWNED_LABELS: "not json"})
    assert nodes.apply_to_node(garbled, {}, [])["metadata"]["labels"] == {"zone": "a"}


def _seed(state: Any, kubeconfig: str) -> None:
    state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.CONTROLPLANE))
    state.create(
        K8S_SECRETS.new(K8S_SECRETS_ID, KubernetesSecretsSpec(localhost_admin_kubeconfig=kubeconfig))
    )
    state.create(NODE_LABEL_SPECS.new(CP, NodeLabelSpecSpec(CP, "")))
    state.create(NODE_TAINT_SPECS.new(CP, NodeTaintSpecSpec(CP, "NoSchedule")))


def test_apply_waits_for_the_node_then_writes_labels_and_taints(tmp_path: Path) -> None:
    stored: dict[str, Any] = {}
    puts: list[dict[str, Any]] = []
    conflicts = [1]

    async def handler(method: str, target: str, body: bytes) -> Reply:
        assert target.startswith("/api/v1/nodes/cp-1"), target
        if not stored:
            return status_reply(404, "NotFound", 'nodes "cp-1" not found')
        if method == "PUT":
            if conflicts:
                conflicts.pop()
                stored["metadata"]["resourceVersion"] = "8"  # the kubelet wrote in between
                return status_reply(409, "Conflict", "the object has been modified")
            obj = json.loads(body)
            assert obj["metadata"]["resourceVersion"] == "8"
            puts.append(obj)
            stored.update(obj)
        return json_reply(200, stored)

    async def main() -> None:
        async with fake_apiserver(handler) as url:
            controller = nodes.NodeApplyController(Layout(tmp_path, "127.0.0.1"), first_retry=0.05)
            async with running(controller) as state:
                name = controller.name
                _seed(state, PKI.kubeconfig(url))
                await assert_resource(state, WAIT_STATUSES, name, lambda r: r.spec.waiting_for == "nodename")
                state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="cp-1")))
                await assert_resource(
                    state, WAIT_STATUSES, name,
                    lambda r: r.spec.waiting_for == "node" and "has not registered node 'cp-1'" in r.spec.reason,
                    timeout=5,
                )  # fmt: skip
                stored.update(_node({"kubernetes.io/hostname": "cp-1"}, []))
                await assert_no_resource(state, WAIT_STATUSES, name, timeout=5)
        assert len(puts) == 1
        assert puts[0]["metadata"]["labels"] == {"kubernetes.io/hostname": "cp-1", CP: ""}
        assert puts[0]["spec"]["taints"] == [{"key": CP, "effect": "NoSchedule"}]
        assert puts[0]["metadata"]["annotations"] == {
            nodes.OWNED_LABELS: f'["{CP}"]',
            nodes.OWNED_TAINTS: f'["{CP}"]',
        }

    run(main)


def test_an_unreachable_api_server_or_missing_credentials_is_a_wait_with_the_reason(tmp_path: Path) -> None:
    async def main() -> None:
        controller = nodes.NodeApplyController(Layout(tmp_path, "127.0.0.1"), first_retry=0.05)
        async with running(controller) as state:
            name = controller.name
            state.create(NODENAMES.new(NODENAME_ID, NodenameSpec(nodename="w-1")))
            await assert_resource(state, WAIT_STATUSES, name, lambda r: r.spec.waiting_for == "machine type")
            state.create(MACHINE_TYPES.new(MACHINE_TYPE_ID, MachineTypeSpec.WORKER))
            await assert_resource(
                state, WAIT_STATUSES, name,
                lambda r: r.spec.waiting_for == "kubelet kubeconfig" and "kubeconfig-kubelet" in r.spec.reason,
            )  # fmt: skip
            # the kubelet's own kubeconfig names its client pair by path, read inside the node root
            (tmp_path / "etc/kubernetes").mkdir(parents=True)
            pki_dir = tmp_path / "var/lib/kubelet/pki"
            pki_dir.mkdir(parents=True)
            (pki_dir / "kubelet-client-current.pem").write_bytes(PKI.admin.crt + PKI.admin.key)
            text = (
                PKI.kubeconfig("https://127.0.0.1:1")
                .replace(
                    "client-certificate-data:",
                    "client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    x:",
                )
                .replace(
                    "client-key-data:", "client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n    y:"
                )
            )
            (tmp_path / "etc/kubernetes/kubeconfig-kubelet").write_text(text)
            await assert_resource(
                state, WAIT_STATUSES, name,
                lambda r: r.spec.waiting_for == "kubernetes API" and "cannot connect to https://127.0.0.1:1" in r.spec.reason,
                timeout=5,
            )  # fmt: skip

    run(main)
