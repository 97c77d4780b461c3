"""Area ``k8s``, static pod statuses: the kubelet's pods -> ``StaticPodStatuses`` (control planes).

``k8s.KubeletStaticPodController`` asks the local kubelet for its pods (``GET
https://127.0.0.1:10250/pods/``) every :data:`REFRESH` seconds while the ``kubelet`` service runs,
as Talos 1.7 does: with the API server's kubelet client certificate (``KubernetesDynamicCerts``
``apiServerKubeletClient``; only control planes have it), checking the kubelet's serving certificate
against the one the kubelet made for itself (``/var/lib/kubelet/pki/kubelet.crt``) under the node's
name. Each static pod (annotation ``kubernetes.io/config.source`` ``file`` or ``http``) becomes
``StaticPodStatuses/<namespace>/<name>`` whose spec is the pod's ``status``
(``talosctl get staticpodstatus``: READY is the pod's Ready condition); pods that are gone lose
theirs, and a stopped kubelet takes them all away.

A kubelet that cannot be asked (not listening yet, or refusing: it authorizes through the API server,
so with no API server it answers only while its cached authorization lasts, 5 minutes by default) is
a wait with its reason (``talosctl get waits``), and the statuses known keep the kubelet's last
word except for what the CRI runtime tells of their containers now (:func:`with_cri_states`): a
control plane whose API server keeps exiting shows that, not the Ready it had before. Talos keeps
the kubelet's last word only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ichor import kubeapi
from ichor.machined import cri
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources import SERVICES
from ichor.machined.resources._k8s import (
    K8S_DYNAMIC_CERTS,
    K8S_DYNAMIC_CERTS_ID,
    K8S_ROOT_ID,
    K8S_ROOT_SECRETS,
    STATIC_POD_STATUSES,
    StaticPodStatusSpec,
)
from ichor.machined.resources._kubelet import NODENAME_ID, NODENAMES

__all__ = [
    "KUBELET_URL",
    "REFRESH",
    "SERVING_CERT",
    "KubeletEndpoint",
    "KubeletStaticPodController",
    "static_pods",
]

KUBELET_URL = "https://127.0.0.1:10250"
SERVING_CERT = "/var/lib/kubelet/pki/kubelet.crt"
"""The kubelet's self-made serving certificate and its CA (node-relative)."""
REFRESH = 15.0
"""Seconds between two asks of the kubelet (Talos's period)."""
_STATIC_SOURCES = ("file", "http")


@dataclass(frozen=True)
class KubeletEndpoint:
    """How to ask the local kubelet: its URL, the CA its serving certificate chains to, the name it
    carries, and the client certificate and key (PEM)."""

    url: str
    ca: bytes
    server_name: str
    cert: bytes
    key: bytes


PodsFetcher = Callable[[KubeletEndpoint], Awaitable[list[dict[str, Any]]]]
CRIReader = Callable[[], Awaitable[list[cri.PodContainer]]]


async def _fetch_pods(endpoint: KubeletEndpoint) -> list[dict[str, Any]]:
    config = kubeapi.Kubeconfig(server=endpoint.url, ca=endpoint.ca, cert=endpoint.cert, key=endpoint.key)
    client = kubeapi.KubeClient(config, server_name=endpoint.server_name)
    reply = await client.request("GET", "/pods/")
    items = reply.get("items") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise kubeapi.KubeResponseError(f"GET {endpoint.url}/pods/: the reply is not a PodList")
    return [item for item in items if isinstance(item, dict)]


def static_pods(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``<namespace>/<name>`` -> status of each static pod of a kubelet's PodList."""
    out: dict[str, dict[str, Any]] = {}
    for pod in pods:
        metadata = pod.get("metadata")
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if (
            not isinstance(annotations, dict)
            or annotations.get("kubernetes.io/config.source") not in _STATIC_SOURCES
        ):
            continue  # a pod of the API server's, not the kubelet's own
        status = pod.get("status")
        assert isinstance(metadata, dict)
        out[f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"] = (
            status if isinstance(status, dict) else {}
        )
    return out


def _state(container: cri.PodContainer) -> dict[str, Any]:
    if container.status == "CONTAINER_RUNNING":
        return {"running": {}}
    if container.status == "CONTAINER_EXITED":
        reason = "Completed" if container.exit_code == 0 else "Error"
        return {"terminated": {"exitCode": container.exit_code, "reason": reason,
                               "containerID": f"containerd://{container.id}"}}  # fmt: skip
    return {"waiting": {"reason": "ContainerCreating"}}


def with_cri_states(
    pod_id: str, status: dict[str, Any], containers: list[cri.PodContainer], why: str
) -> dict[str, Any]:
    """``status`` (the kubelet's last) with each container's state from its newest CRI attempt; a
    container that does not run is not ready, nor then is the pod. A container the kubelet's last word
    did not list yet (a changed pod it had only accepted, ``Pending`` with no statuses, when it
    stopped answering) gets an entry of its own, and a status without Ready conditions gets them.
    ``message`` says where it is from."""
    newest: dict[str, cri.PodContainer] = {}
    for container in sorted(containers, key=lambda c: c.created_at):
        if container.pod == pod_id and not container.sandbox:
            newest[container.name] = container  # the last one of a name is its newest attempt
    if not newest:
        return status
    out = dict(status)
    entries, listed = [], set()
    for entry in status.get("containerStatuses") or []:
        found = newest.get(str(entry.get("name"))) if isinstance(entry, dict) else None
        if found is None:
            entries.append(entry)
            continue
        listed.add(found.name)
        running = found.status == "CONTAINER_RUNNING"
        entries.append({**entry, "state": _state(found), "ready": bool(entry.get("ready")) and running})
    for name, found in sorted(newest.items()):
        if name not in listed:
            entries.append({"name": name, "image": found.image, "containerID": f"containerd://{found.id}",
                            "state": _state(found), "ready": False, "restartCount": 0})  # fmt: skip
    out["containerStatuses"] = entries
    ready = "True" if all(e.get("ready") for e in entries if isinstance(e, dict)) else "False"
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    for kind in ("ContainersReady", "Ready"):
        if not any(c.get("type") == kind for c in conditions):
            conditions.append({"type": kind, "status": ready})
    out["conditions"] = [{**c, "status": ready} if c.get("type") in ("Ready", "ContainersReady") else c
                         for c in conditions]  # fmt: skip
    out["message"] = f"the kubelet cannot be asked ({why}): container states are the CRI runtime's"
    return out


class KubeletStaticPodController(Controller):
    name = "k8s.KubeletStaticPodController"
    inputs = (
        Input(NODENAMES, id=NODENAME_ID),
        Input(SERVICES, id="kubelet"),
        Input(K8S_DYNAMIC_CERTS, id=K8S_DYNAMIC_CERTS_ID),
        Input(K8S_ROOT_SECRETS, id=K8S_ROOT_ID),
    )
    outputs = (Output(STATIC_POD_STATUSES),)

    def __init__(
        self, layout: Layout, *, fetch: PodsFetcher | None = None, containers: CRIReader | None = None,
        refresh: float = REFRESH,
    ) -> None:  # fmt: skip
        self._layout = layout
        self._fetch = fetch or _fetch_pods
        self._containers = containers or self._cri_containers
        self._refresh = refresh

    async def _cri_containers(self) -> list[cri.PodContainer]:
        ctr = cri.Ctr(self._layout.path(cri.CRI.address))
        return await cri.pod_containers(ctr, cri.CRI.namespace, self._layout.path(cri.CRI_STATUS_DIR))

    async def _from_cri(self, ctx: ControllerContext, why: str) -> None:
        """Each known status with its containers' states as the CRI runtime has them now."""
        try:
            containers = await self._containers()
        except cri.CRIError as exc:
            ctx.logger.warning("error reading container states from the CRI", error=str(exc))
            return
        for known in ctx.list(STATIC_POD_STATUSES):
            if known.metadata.owner == self.name:
                status = with_cri_states(known.id, dict(known.spec), containers, why)
                ctx.modify(STATIC_POD_STATUSES, known.id, StaticPodStatusSpec(status))

    def _endpoint(self, ctx: ControllerContext) -> KubeletEndpoint | str:
        """How to ask the kubelet, or why it cannot be asked yet."""
        certs = ctx.get_or_none(K8S_DYNAMIC_CERTS, K8S_DYNAMIC_CERTS_ID)
        client = certs.spec.api_server_kubelet_client if certs is not None else None
        if client is None:
            return "the API server's kubelet client certificate is not made yet"
        nodename = ctx.get_or_none(NODENAMES, NODENAME_ID)
        if nodename is None or not nodename.spec.nodename:
            return "the node name is not known yet"
        try:
            ca = self._layout.path(SERVING_CERT).read_bytes()
        except OSError:
            return f"the kubelet has not written its serving certificate {SERVING_CERT} yet"
        return KubeletEndpoint(KUBELET_URL, ca, nodename.spec.nodename, client.crt, client.key)

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        last_error = ""
        while True:
            await ctx.changed(timeout=retry)
            retry = None
            kubelet = ctx.get_or_none(SERVICES, "kubelet")
            if kubelet is None or not kubelet.spec.running:
                ctx.clean_up_outputs(STATIC_POD_STATUSES, set())
                ctx.clear_waiting()
                continue
            if ctx.get_or_none(K8S_ROOT_SECRETS, K8S_ROOT_ID) is None:
                ctx.clear_waiting()  # a worker: only the API server's certificate may ask the kubelet
                continue
            retry = self._refresh
            endpoint = self._endpoint(ctx)
            if isinstance(endpoint, str):
                ctx.waiting("kubelet", endpoint, retry_after=retry)
                continue
            try:
                statuses = static_pods(await self._fetch(endpoint))
            except kubeapi.KubeAPIError as exc:
                if str(exc) != last_error:  # once per new reason, not every refresh
                    ctx.logger.warning("error refreshing pod status", error=str(exc))
                last_error = str(exc)
                ctx.waiting("kubelet", f"error fetching pod status: {exc}", retry_after=retry)
                await self._from_cri(ctx, str(exc))
                continue
            last_error = ""
            for pod_id, status in statuses.items():
                ctx.modify(STATIC_POD_STATUSES, pod_id, StaticPodStatusSpec(status))
            ctx.clean_up_outputs(STATIC_POD_STATUSES, set(statuses))
            ctx.clear_waiting()
