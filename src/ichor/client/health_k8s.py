"""The Kubernetes stages of ``talosctl health`` (Talos 1.7's names and order, after the etcd ones).

1. ``kubelet to be healthy`` - the ``kubelet`` service is Running and healthy on every control plane
   (Talos checks control planes only). When every control plane shows kubelet ``Skipped`` (process
   nodes share the host and run no kubelet) or has no kubelet service at all, the stage fails at once:
   no retry can make Kubernetes appear there, and the etcd stages before it are that cluster's health;
2. ``all nodes to finish boot sequence`` - every node's ``MachineStatuses`` is stage ``running``, ready;
3. ``all k8s nodes to report`` - a Kubernetes Node whose InternalIP is each node's address;
4. ``all k8s nodes to report ready`` - every Node has condition Ready=True;
5. ``all control plane static pods to be running`` - every control plane's own
   ``StaticPodStatuses`` (the kubelet's word, read over COSI as Talos 1.7 does) include
   ``kube-system/kube-apiserver``, ``kube-controller-manager`` and ``kube-scheduler``. Not the mirror
   pods: the kubelet makes those only on a pod's first sync after its Node is registered (its pod
   resync, ``syncFrequency`` 1 minute plus jitter, when nothing else changes), which stage 6 waits for;
6. ``all control plane components to be ready`` - their mirror pods (``k8s-app=<name>`` in
   kube-system) are Running and report the Ready condition on every control plane;
7. ``kube-proxy to report ready`` - the kube-proxy DaemonSet's pods are all Ready (``SKIP`` without it);
8. ``coredns to report ready`` - the kube-dns ReplicaSets' pods are all Ready (``SKIP`` without them);
9. ``all k8s nodes to report schedulable`` - no Node is cordoned (``spec.unschedulable``); taints
   (a control plane's ``node-role.kubernetes.io/control-plane:NoSchedule``) do not count, as in Talos.

Stages 3-9 use the admin kubeconfig from the first control plane's ``Kubeconfig`` RPC (fetched once
per run), its server replaced by ``--k8s-endpoint`` when given, and :mod:`ichor.kubeapi`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from ichor.client.health import (
    KUBERNETES_CHECKS,
    NO_KUBERNETES,
    Check,
    CheckFailed,
    CheckSkipped,
    ClusterInfo,
    each_node,
    service_state,
)

__all__ = ["KubeReader", "fetch_kubeconfig", "kubernetes_checks"]
CONTROL_PLANE_PODS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
STATIC_POD_STATUSES = ("k8s", "StaticPodStatuses.kubernetes.talos.dev")
"""Namespace and type of the node's static pod statuses (ids ``<namespace>/<pod name>``)."""


class KubeReader(Protocol):
    """What the stages need of :class:`ichor.kubeapi.KubeClient`: a JSON ``GET``."""

    async def get(self, path: str) -> Any: ...


async def fetch_kubeconfig(client: Any) -> bytes:
    """The admin kubeconfig from the node's ``Kubeconfig`` stream (a tar.gz holding ``kubeconfig``)."""
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]

    from ichor.client._errors import ClientError
    from ichor.client._replies import message_error
    from ichor.machinery.kubeconfig import extract_kubeconfig

    chunks: list[bytes] = []
    async with client.machine.Kubeconfig.open() as call:
        await call.send_message(empty_pb2.Empty(), end=True)
        async for data in call:
            error = message_error(data, client.peer_host)
            if error is not None:
                raise ClientError(
                    f"error copying: {error}",
                    hint="the admin kubeconfig is served by control plane nodes only: pass one with -n",
                )
            chunks.append(data.bytes)
    return extract_kubeconfig(b"".join(chunks))


def _with_endpoint(server: str, endpoint: str) -> str:
    """``server`` with its host replaced by ``endpoint`` (a host, ``host:port`` or URL), as Talos's
    ``--k8s-endpoint`` does; the port stays unless ``endpoint`` names one."""
    given = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    old = urlsplit(server)
    host = given.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = given.port or old.port
    return urlunsplit((old.scheme, f"{host}:{port}" if port else host, old.path, "", ""))


def _kube_from_node(client: Any, node: str, endpoint: str) -> Callable[[], Awaitable[KubeReader]]:
    cached: list[KubeReader] = []

    async def kube() -> KubeReader:
        if not cached:
            import dataclasses

            from ichor.kubeapi import KubeAPIError, KubeClient, load_kubeconfig
            from ichor.machinery.errors import MachineryError

            try:
                text = await fetch_kubeconfig(client.with_node(node))
                config = load_kubeconfig(text, source=f"kubeconfig from {node}")
                if endpoint:
                    config = dataclasses.replace(config, server=_with_endpoint(config.server, endpoint))
                cached.append(KubeClient(config))
            except (KubeAPIError, MachineryError) as exc:
                raise CheckFailed(f"the admin kubeconfig from {node} is unusable: {exc}") from None
        return cached[0]

    return kube


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _addresses(node: dict[str, Any]) -> set[str]:
    return {
        str(a.get("address"))
        for a in (node.get("status") or {}).get("addresses") or []
        if a.get("type") == "InternalIP"
    }


async def _items(kube: KubeReader, path: str) -> list[dict[str, Any]]:
    from ichor.kubeapi import KubeAPIError

    try:
        listing = await kube.get(path)
    except KubeAPIError as exc:
        raise CheckFailed(
            "Kubernetes API not answering yet" if "connect" in str(exc) else str(exc), detail=str(exc)
        ) from None
    return [i for i in (listing or {}).get("items") or [] if isinstance(i, dict)]


async def _pods_ready(kube: KubeReader, selector: str, expected: int) -> None:
    pods = await _items(kube, f"/api/v1/namespaces/kube-system/pods?labelSelector={quote(selector)}")
    if len(pods) != expected:
        raise CheckFailed(f"expected number of pods for {selector} to be {expected}, got {len(pods)}")
    not_ready = sorted(_name(p) for p in pods if not _ready(p))
    if not_ready:
        raise CheckFailed(f"some pods are not ready: {not_ready}")


def kubernetes_checks(
    client: Any,
    info: ClusterInfo,
    *,
    k8s_endpoint: str = "",
    kube: Callable[[], Awaitable[KubeReader]] | None = None,
) -> list[Check]:
    """The stages of :data:`KUBERNETES_CHECKS` over ``client`` (Talos API) and ``kube`` (the API
    server; by default a :class:`ichor.kubeapi.KubeClient` from the first control plane's kubeconfig)."""
    from google.protobuf import empty_pb2

    from ichor.api.gen.v1alpha1 import state_pb2
    from ichor.machinery.yamlio import load_documents, to_plain

    cps = info.control_plane_nodes
    every = [*cps, *info.worker_nodes]
    get_kube = kube or _kube_from_node(client, cps[0], k8s_endpoint)

    async def kubelet() -> None:
        absent: dict[str, str] = {}

        async def one(node: str) -> None:
            listing = await client.with_node(node).machine.ServiceList(empty_pb2.Empty())
            found = next((s for m in listing.messages for s in m.services if s.id == "kubelet"), None)
            if found is None or found.state == "Skipped":
                events = found.events.events if found is not None else []
                absent[node] = events[-1].msg if events and events[-1].msg else "no kubelet service"
                return
            waiting = service_state(found, "kubelet")
            if waiting:
                raise CheckFailed(waiting)

        await each_node(cps, one)
        if absent and len(absent) == len(cps):
            why = "; ".join(f"{node}: {msg}" for node, msg in absent.items())
            raise CheckFailed(
                f"{NO_KUBERNETES}: no kubelet on any control plane ({why})",
                final=True,
                hint="the etcd stages above are this cluster's health; nodes in containers "
                "(`talosctl cluster create --provisioner container`) run Kubernetes",
            )
        if absent:
            raise CheckFailed("service kubelet is not running on " + ", ".join(absent))

    async def booted() -> None:
        async def one(node: str) -> None:
            request = state_pb2.GetRequest(
                namespace="runtime", type="MachineStatuses.runtime.talos.dev", id="machine"
            )
            resource = (await client.with_node(node).cosi.Get(request)).resource
            docs = to_plain(load_documents(resource.spec.yaml_spec or "{}", source="machine status spec"))
            spec = docs[0] if docs and isinstance(docs[0], dict) else {}
            if spec.get("stage") != "running":
                raise CheckFailed(f"machine stage is {spec.get('stage') or 'unknown'}, not running")
            status = spec.get("status") or {}
            if not status.get("ready"):
                unmet = ", ".join(str(c.get("name")) for c in status.get("unmetConditions") or [])
                raise CheckFailed("machine is not ready" + (f" (unmet: {unmet})" if unmet else ""))

        await each_node(every, one)

    async def k8s_nodes() -> dict[str, dict[str, Any]]:
        """Every cluster node's Kubernetes Node, by address; raises naming those not reported."""
        nodes = await _items(await get_kube(), "/api/v1/nodes")
        by_ip: dict[str, dict[str, Any]] = {}
        for node in nodes:
            for ip in _addresses(node):
                by_ip[ip] = node
        found = {}
        for address in every:
            match = next(
                (by_ip[a] for a in (address, *info.other_addresses.get(address, ())) if a in by_ip), None
            )
            if match is not None:
                found[address] = match
        missing = [a for a in every if a not in found]
        if missing:
            raise CheckFailed(f"some nodes have not reported: {missing}")
        return found

    async def reported() -> None:
        await k8s_nodes()

    async def components() -> None:
        nodes = await k8s_nodes()
        kube = await get_kube()
        problems: list[str] = []
        for app in CONTROL_PLANE_PODS:
            pods = await _items(
                kube, f"/api/v1/namespaces/kube-system/pods?labelSelector={quote(f'k8s-app={app}')}"
            )
            on = {str((p.get("spec") or {}).get("nodeName", "")): p for p in pods}
            for address in cps:
                node_name = _name(nodes[address])
                pod = on.get(node_name)
                if pod is None:
                    problems.append(f"{app} on {node_name}: no pod")
                elif (pod.get("status") or {}).get("phase") != "Running":
                    problems.append(
                        f"{app} on {node_name}: {(pod.get('status') or {}).get('phase', 'Unknown')}"
                    )
                elif not _ready(pod):
                    problems.append(f"{app} on {node_name}: not ready")
        if problems:
            raise CheckFailed("; ".join(problems))

    async def running() -> None:
        async def one(node: str) -> None:
            ids = [
                str(r.metadata.id) for r in await client.with_node(node).list_resources(*STATIC_POD_STATUSES)
            ]
            missing = [
                f"kube-system/{app}"
                for app in CONTROL_PLANE_PODS
                if not any(i.startswith(f"kube-system/{app}") for i in ids)
            ]
            if missing:
                raise CheckFailed(f"missing static pods: [{' '.join(missing)}]")

        await each_node(cps, one)

    async def nodes_ready() -> None:
        nodes = await k8s_nodes()
        not_ready = sorted(_name(n) for n in nodes.values() if not _ready(n))
        if not_ready:
            raise CheckFailed(f"some nodes are not ready: {not_ready}")

    async def kube_proxy() -> None:
        kube = await get_kube()
        sets = await _items(
            kube, "/apis/apps/v1/namespaces/kube-system/daemonsets?labelSelector=k8s-app%3Dkube-proxy"
        )
        if not sets:
            raise CheckSkipped("no kube-proxy DaemonSet")
        desired = sum(int((d.get("status") or {}).get("desiredNumberScheduled") or 0) for d in sets)
        await _pods_ready(kube, "k8s-app=kube-proxy", desired)

    async def coredns() -> None:
        kube = await get_kube()
        sets = await _items(
            kube, "/apis/apps/v1/namespaces/kube-system/replicasets?labelSelector=k8s-app%3Dkube-dns"
        )
        replicas = sum(int((r.get("spec") or {}).get("replicas") or 0) for r in sets)
        if not sets or replicas == 0:
            raise CheckSkipped("no kube-dns ReplicaSet")
        await _pods_ready(kube, "k8s-app=kube-dns", replicas)

    async def schedulable() -> None:
        nodes = await k8s_nodes()
        cordoned = sorted(_name(n) for n in nodes.values() if (n.get("spec") or {}).get("unschedulable"))
        if cordoned:
            raise CheckFailed(f"some nodes are not schedulable: {cordoned}")

    attempts: Sequence[Callable[[], Awaitable[None]]] = (
        kubelet, booted, reported, nodes_ready, running, components, kube_proxy, coredns, schedulable,
    )  # fmt: skip
    return [Check(name, attempt) for name, attempt in zip(KUBERNETES_CHECKS, attempts, strict=True)]
