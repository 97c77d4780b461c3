"""Area ``k8s``, the node's labels and taints, as Talos 1.7 applies them to its Kubernetes ``Node``.

* ``k8s.NodeLabelSpecController``: MachineConfig -> NodeLabelSpecs (one per key):
  ``machine.nodeLabels``, plus ``node-role.kubernetes.io/control-plane: ""`` on control planes;
* ``k8s.NodeTaintSpecController``: MachineConfig -> NodeTaintSpecs (one per key):
  ``machine.nodeTaints`` (``value:effect`` or ``effect``), plus
  ``node-role.kubernetes.io/control-plane:NoSchedule`` on control planes unless
  ``cluster.allowSchedulingOnControlPlanes``;
* ``k8s.NodeApplyController``: NodeLabelSpecs + NodeTaintSpecs + NodeCordonedSpecs + Nodename -> the ``Node`` object,
  once the kubelet has registered it. Control planes write with the localhost admin kubeconfig,
  workers with the kubelet's own (``/etc/kubernetes/kubeconfig-kubelet``; the NodeRestriction
  admission plugin then limits what a worker may set). The annotations ``talos.dev/owned-labels``
  and ``talos.dev/owned-taints`` (JSON lists of keys) record what Talos set, so a key dropped from
  the config is removed from the node and nothing set by someone else is: a label or taint already
  there with another value is left alone unless owned. Waits (node name, credentials, no ``Node``
  yet, API server unreachable) say why; a conflict is retried at once, anything else with backoff,
  and the node is checked again every :data:`RESYNC` seconds; the ``Node``'s registration (its
  NodeStatus appearing) wakes it at once, so a new node is labelled seconds after the kubelet
  registers it, not after the backoff (``upgrade-k8s`` finds control planes by that label). While a NodeCordonedSpec exists (the
  machine shuts down, upgrades or resets) the ``Node`` is cordoned (``spec.unschedulable`` and the
  annotation ``talos.dev/cordoned: "true"``); once it is gone, a node Talos cordoned is uncordoned,
  one cordoned by someone else (no annotation) is left so.

Talos 1.7 does not add ``node.kubernetes.io/exclude-from-external-load-balancers`` here (later
versions' generated configs carry it in ``machine.nodeLabels``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ichor import kubeapi
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config, machine_type_of
from ichor.machined.cosi import Controller, ControllerContext, Input, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_LABEL_SPECS,
    NODE_TAINT_SPECS,
    NodeLabelSpecSpec,
    NodeTaintSpecSpec,
)
from ichor.machined.resources._k8s import K8S_SECRETS, K8S_SECRETS_ID
from ichor.machined.resources._k8s_status import NODE_CORDONED_SPECS, NODE_STATUSES
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES
from ichor.machinery.config import parse_taint

from .kubelet_render import KUBECONFIG as KUBELET_KUBECONFIG
from .manifest_apply import ADMIN_KUBECONFIG, FIELD_MANAGER

__all__ = [
    "CONTROL_PLANE_ROLE",
    "CORDONED",
    "OWNED_LABELS",
    "OWNED_TAINTS",
    "RESYNC",
    "NodeApplyController",
    "apply_to_node",
    "node_label_spec_controller",
    "node_taint_spec_controller",
]

CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
OWNED_LABELS = "talos.dev/owned-labels"
OWNED_TAINTS = "talos.dev/owned-taints"
CORDONED = "talos.dev/cordoned"
RESYNC = 60.0
"""Seconds between checks of an applied node (someone may have removed a label Talos owns)."""
_CONFLICT_RETRIES = 5

ClientFactory = Callable[[kubeapi.Kubeconfig], kubeapi.KubeClient]


def node_label_spec_controller() -> TransformController[NodeLabelSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodeLabelSpecSpec]:
        config = active_config(ctx)
        labels = {
            str(k): str(v or "")
            for k, v in ((config.machine.node_labels or {}) if config.machine else {}).items()
        }
        if machine_type_of(config).is_control_plane:
            labels[CONTROL_PLANE_ROLE] = ""
        return {key: NodeLabelSpecSpec(key=key, value=value) for key, value in labels.items()}

    return TransformController(
        "k8s.NodeLabelSpecController", inputs=[ACTIVE_CONFIG], output=NODE_LABEL_SPECS, map_inputs=derive
    )


def node_taint_spec_controller() -> TransformController[NodeTaintSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NodeTaintSpecSpec]:
        config = active_config(ctx)
        taints: dict[str, NodeTaintSpecSpec] = {}
        schedulable = bool(config.cluster is not None and config.cluster.allow_scheduling_on_control_planes)
        if machine_type_of(config).is_control_plane and not schedulable:
            taints[CONTROL_PLANE_ROLE] = NodeTaintSpecSpec(key=CONTROL_PLANE_ROLE, effect="NoSchedule")
        for key, text in ((config.machine.node_taints or {}) if config.machine else {}).items():
            value, effect = parse_taint(str(text or ""))
            taints[str(key)] = NodeTaintSpecSpec(key=str(key), effect=effect, value=value)
        return taints

    return TransformController(
        "k8s.NodeTaintSpecController", inputs=[ACTIVE_CONFIG], output=NODE_TAINT_SPECS, map_inputs=derive
    )


def _owned(annotations: Mapping[str, Any], key: str) -> set[str]:
    try:
        keys = json.loads(str(annotations.get(key) or "[]"))
    except ValueError:
        return set()  # not Talos's: own nothing rather than remove what we cannot account for
    return {str(k) for k in keys} if isinstance(keys, list) else set()


def apply_to_node(
    node: Mapping[str, Any],
    labels: Mapping[str, str],
    taints: Sequence[NodeTaintSpecSpec],
    *,
    cordoned: bool = False,
) -> dict[str, Any]:
    """``node`` with ``labels``, ``taints`` and the cordon applied and the ownership annotations
    updated (a copy)."""  # fmt: skip
    out = copy.deepcopy(dict(node))
    meta = out.setdefault("metadata", {})
    node_labels: dict[str, str] = meta.get("labels") or {}
    annotations: dict[str, str] = meta.get("annotations") or {}
    owned_labels, owned_taints = _owned(annotations, OWNED_LABELS), _owned(annotations, OWNED_TAINTS)
    for key, value in labels.items():
        if key not in node_labels or node_labels[key] == value or key in owned_labels:
            node_labels[key] = value
            owned_labels.add(key)
    for key in owned_labels - set(labels):
        node_labels.pop(key, None)
    owned_labels &= set(labels)

    spec = out.setdefault("spec", {})
    node_taints: list[dict[str, Any]] = list(spec.get("taints") or [])
    wanted = {t.key: t for t in taints}
    for taint in taints:
        current = next((t for t in node_taints if t.get("key") == taint.key), None)
        if current is None:
            node_taints.append({"key": taint.key, "value": taint.value, "effect": taint.effect})
            owned_taints.add(taint.key)
        elif taint.key in owned_taints or (
            current.get("value", "") == taint.value and current.get("effect") == taint.effect
        ):
            current.update(value=taint.value, effect=taint.effect)
            owned_taints.add(taint.key)
    node_taints = [t for t in node_taints if t.get("key") in wanted or t.get("key") not in owned_taints]
    owned_taints &= set(wanted)
    for t in node_taints:
        if t.get("value") == "":
            del t["value"]
    if node_taints:
        spec["taints"] = node_taints
    else:
        spec.pop("taints", None)

    if cordoned and not spec.get("unschedulable"):
        spec["unschedulable"] = True
        annotations[CORDONED] = "true"
    elif not cordoned and spec.get("unschedulable") and CORDONED in annotations:
        del spec["unschedulable"]  # Talos's cordon only: a node cordoned by hand stays so
        del annotations[CORDONED]

    for key, owned in ((OWNED_LABELS, owned_labels), (OWNED_TAINTS, owned_taints)):
        if owned:
            annotations[key] = json.dumps(sorted(owned), separators=(",", ":"))
        else:
            annotations.pop(key, None)
    if node_labels or "labels" in meta:
        meta["labels"] = node_labels
    if annotations or "annotations" in meta:
        meta["annotations"] = annotations
    return out


class NodeApplyController(Controller):
    name = "k8s.NodeApplyController"
    inputs = (
        Input(NODE_LABEL_SPECS),
        Input(NODE_TAINT_SPECS),
        Input(NODE_CORDONED_SPECS),
        Input(NODENAMES, id=NODENAME_ID),
        Input(MACHINE_TYPES, id=MACHINE_TYPE_ID),
        Input(K8S_SECRETS, id=K8S_SECRETS_ID),
        Input(NODE_STATUSES),  # the Node's registration wakes it: labelled at once, not after a backoff
    )
    outputs = ()

    def __init__(
        self, layout: Layout, *, client: ClientFactory | None = None, first_retry: float = 1.0,
        max_retry: float = 30.0, resync: float = RESYNC,
    ) -> None:  # fmt: skip
        self._layout = layout
        self._client = client or (lambda config: kubeapi.KubeClient(config, field_manager=FIELD_MANAGER))
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._resync = resync

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        failures = 0
        while True:
            await ctx.changed(timeout=retry)
            retry = None
            nodename = ctx.get_or_none(NODENAMES, NODENAME_ID)
            if nodename is None or not nodename.spec.nodename:
                ctx.waiting("nodename", "the node's Kubernetes name is not known yet")
                continue
            if nodename.spec.skip_node_registration:
                ctx.clear_waiting()  # no Node object to apply to (machine.kubelet.skipNodeRegistration)
                continue
            labels = {
                r.spec.key: r.spec.value for r in sorted(ctx.list(NODE_LABEL_SPECS), key=lambda r: r.id)
            }
            taints = [r.spec for r in sorted(ctx.list(NODE_TAINT_SPECS), key=lambda r: r.id)]
            cordoned = bool(ctx.list(NODE_CORDONED_SPECS))
            credentials = self._kubeconfig(ctx)
            problem = (
                await self._sync(ctx, credentials, nodename.spec.nodename, labels, taints, cordoned)
                if isinstance(credentials, kubeapi.Kubeconfig)
                else credentials
            )
            if problem is None:
                failures = 0
                retry = self._resync
                ctx.clear_waiting()
                continue
            failures += 1
            retry = min(self._first_retry * 2 ** (failures - 1), self._max_retry)
            ctx.waiting(problem[0], problem[1], retry_after=retry)

    def _kubeconfig(self, ctx: ControllerContext) -> kubeapi.Kubeconfig | tuple[str, str]:
        """The credentials to write the Node with, or (what we wait for, why)."""
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if machine_type is None:
            return "machine type", "the machine type (control plane or worker) is not known yet"
        try:
            if machine_type.spec.is_control_plane:
                secrets = ctx.get_or_none(K8S_SECRETS, K8S_SECRETS_ID)
                if secrets is None or not secrets.spec.localhost_admin_kubeconfig:
                    return (
                        "admin kubeconfig",
                        "the Kubernetes secrets (localhost admin kubeconfig) are not made yet",
                    )
                return kubeapi.load_kubeconfig(
                    secrets.spec.localhost_admin_kubeconfig, source=ADMIN_KUBECONFIG
                )
            try:
                text = self._layout.path(KUBELET_KUBECONFIG).read_bytes()
            except FileNotFoundError:
                return (
                    "kubelet kubeconfig",
                    f"the kubelet has not written {KUBELET_KUBECONFIG} yet (not registered)",
                )
            return kubeapi.load_kubeconfig(
                text, source=KUBELET_KUBECONFIG, read_file=lambda p: self._layout.path(p).read_bytes()
            )
        except (kubeapi.KubeAPIError, OSError) as exc:
            return "kubeconfig", str(exc)

    async def _sync(
        self, ctx: ControllerContext, kubeconfig: kubeapi.Kubeconfig, name: str, labels: Mapping[str, str],
        taints: Sequence[NodeTaintSpecSpec], cordoned: bool = False,
    ) -> tuple[str, str] | None:  # fmt: skip
        """Read the Node, write it back with our labels and taints; None, or (what we wait for, why)."""
        path = f"/api/v1/nodes/{quote(name, safe='')}"
        try:
            client = self._client(kubeconfig)
            for _ in range(_CONFLICT_RETRIES):
                node = await client.get(path)
                updated = apply_to_node(node, labels, taints, cordoned=cordoned)
                if updated == node:
                    return None
                try:
                    await client.put(path, updated)
                except kubeapi.KubeStatusError as exc:
                    if exc.code == 409:
                        continue  # the kubelet updated the Node in between: read it again
                    raise
                ctx.logger.info(
                    "applied node labels and taints", node=name, labels=len(labels), taints=len(taints),
                    cordoned=cordoned,
                )  # fmt: skip
                return None
            return "kubernetes API", f"node {name!r} kept changing under {_CONFLICT_RETRIES} updates"
        except kubeapi.KubeNotFoundError:
            return "node", f"the kubelet has not registered node {name!r} yet"
        except kubeapi.KubeAPIError as exc:
            return "kubernetes API", str(exc)
