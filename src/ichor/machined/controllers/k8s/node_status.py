"""Area ``k8s``: ``k8s.NodeStatusController``, the node's ``Node`` object -> NodeStatus ``<nodename>``.

Talos watches the ``Node`` with the kubelet's credentials (``/etc/kubernetes/kubeconfig-kubelet``,
which every node has once its kubelet registered); Ichor's Kubernetes client has no watch, so it
reads the ``Node`` every :data:`POLL` seconds, and at once when the node name changes. The status
carries what Talos's does: readiness (the ``Ready`` condition is ``True``), ``spec.unschedulable``,
labels and annotations. No ``Node`` (not registered yet, or ``skipNodeRegistration``) means no
status. It never writes to the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from ichor import kubeapi
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources._k8s_status import NODE_STATUSES, NodeStatusSpec
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES

from .kubelet_render import KUBECONFIG as KUBELET_KUBECONFIG

__all__ = ["POLL", "NodeStatusController", "node_status"]

POLL = 10.0
"""Seconds between two reads of the ``Node``."""

ClientFactory = Callable[[kubeapi.Kubeconfig], kubeapi.KubeClient]


def node_status(node: Mapping[str, Any]) -> NodeStatusSpec:
    """A ``Node`` object as Talos's NodeStatus."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return NodeStatusSpec(
        nodename=str(meta.get("name", "")),
        node_ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
    )


class NodeStatusController(Controller):
    name = "k8s.NodeStatusController"
    inputs = (Input(NODENAMES, id=NODENAME_ID),)
    outputs = (Output(NODE_STATUSES),)

    def __init__(self, layout: Layout, *, client: ClientFactory | None = None, poll: float = POLL) -> None:
        self._layout = layout
        self._client = client or kubeapi.KubeClient
        self._poll = poll
        self._cached: tuple[bytes, kubeapi.KubeClient] | None = None
        """The client of the last kubeconfig read (a TLS context is made once per kubeconfig)."""

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed(timeout=self._poll)
            nodename = ctx.get_or_none(NODENAMES, NODENAME_ID)
            touched: set[str] = set()
            if nodename is not None and nodename.spec.nodename and not nodename.spec.skip_node_registration:
                problem, node = await self._read(nodename.spec.nodename)
                if problem is not None:
                    ctx.waiting(problem[0], problem[1], retry_after=self._poll)
                    continue  # keep the last status Talos's watcher would still hold
                ctx.clear_waiting()
                if node is not None:
                    status = node_status(node)
                    ctx.modify(NODE_STATUSES, status.nodename, status)
                    touched.add(status.nodename)
            else:
                ctx.clear_waiting()
            ctx.clean_up_outputs(NODE_STATUSES, touched)

    async def _read(self, name: str) -> tuple[tuple[str, str] | None, dict[str, Any] | None]:
        """(None, the Node or None when it is not registered), or ((what we wait for, why), None)."""
        try:
            text = self._layout.path(KUBELET_KUBECONFIG).read_bytes()
        except FileNotFoundError:
            return ("kubelet kubeconfig", f"the kubelet has not written {KUBELET_KUBECONFIG} yet"), None
        except OSError as exc:
            return ("kubelet kubeconfig", str(exc)), None
        try:
            if self._cached is None or self._cached[0] != text:
                config = kubeapi.load_kubeconfig(
                    text, source=KUBELET_KUBECONFIG, read_file=lambda p: self._layout.path(p).read_bytes()
                )
                self._cached = (text, self._client(config))
            node = await self._cached[1].get(f"/api/v1/nodes/{quote(name, safe='')}")
        except kubeapi.KubeNotFoundError:
            return None, None
        except (kubeapi.KubeAPIError, OSError) as exc:
            self._cached = None  # read the credentials again next time (the kubelet rotates its client pair)
            return ("kubernetes API", str(exc)), None
        return None, node if isinstance(node, dict) else None
