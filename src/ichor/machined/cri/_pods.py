"""The CRI containerd's containers as Kubernetes pods, named as Talos 1.7 names them.

A pod sandbox is ``<namespace>/<pod>`` and a container ``<namespace>/<pod>:<container>:<id[:12]>``
(the CRI labels ``io.kubernetes.pod.namespace``, ``io.kubernetes.pod.name`` and
``io.kubernetes.container.name``); statuses are CRI's (``SANDBOX_READY``/``SANDBOX_NOTREADY``,
``CONTAINER_CREATED``/``CONTAINER_RUNNING``/``CONTAINER_EXITED``). Only the pods of ready
sandboxes are listed, with every container of theirs, exited ones included, as Talos lists them.

What ``ctr containers ls`` does not print comes from ``ctr containers info`` (labels, the CRI
metadata extension with the container's log path) and from the CRI plugin's status file of each
container (``<root>/io.containerd.grpc.v1.cri/containers/<id>/status``: started, finished, exit
code): containerd deletes an exited container's task, so the task list alone cannot tell an exited
container from one not started yet.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.machined.cri._ctr import Container, Ctr
from ichor.machined.cri._errors import CRIError

__all__ = [
    "CRI_STATUS_DIR",
    "PodContainer",
    "display_id",
    "find_pod_container",
    "parse_display",
    "pod_container",
    "pod_containers",
]

CRI_STATUS_DIR = "/var/lib/containerd/io.containerd.grpc.v1.cri/containers"
"""Where the CRI plugin keeps each container's status file (node-relative)."""
_POD_NS, _POD_NAME = "io.kubernetes.pod.namespace", "io.kubernetes.pod.name"
_CONTAINER_NAME = "io.kubernetes.container.name"
_METADATA = "io.cri-containerd.container.metadata"


@dataclass(frozen=True)
class PodContainer:
    """A sandbox or container of a pod, with what ``talosctl containers -k`` and ``logs -k`` need."""

    id: str
    """containerd's full id."""
    pod: str
    """``<namespace>/<pod>``; ``""`` for a container of no pod."""
    name: str
    """The container's name in its pod; ``""`` for the sandbox; the id for a container of no pod."""
    image: str
    pid: int
    status: str
    log_path: str = ""
    """Node-relative CRI log file (``/var/log/pods/...``); ``""`` for a sandbox."""
    created_at: int = 0
    exit_code: int = 0
    network_namespace: str = ""
    """A sandbox's network namespace by the name the CRI bound it under (``cni-<uuid>``, the base
    name of its spec's network namespace path, as Talos shows it); ``""`` on the host network."""

    @property
    def sandbox(self) -> bool:
        return bool(self.pod) and not self.name

    @property
    def display(self) -> str:
        return display_id(self.pod, self.name, self.id) if self.pod else self.id

    @property
    def pod_id(self) -> str:
        """What ``talosctl containers`` groups by: the pod, or a pod-less container's own id."""
        return self.pod or self.id


def display_id(pod: str, name: str, container_id: str) -> str:
    """Talos's id: ``ns/pod`` for a sandbox, ``ns/pod:name:<first 12 of the id>`` for a container."""
    return pod if not name else f"{pod}:{name}:{container_id[:12]}"


def parse_display(text: str) -> tuple[str, str, str, str] | None:
    """``ns/pod[:name[:id]]`` -> (namespace, pod, name, id prefix); None when it has no ``/``."""
    namespace, slash, rest = text.partition("/")
    if not slash or not namespace or not rest:
        return None
    pod, _, rest = rest.partition(":")
    name, _, prefix = rest.partition(":")
    return namespace, pod, name, prefix


def _extension(info: dict[str, Any]) -> dict[str, Any]:
    raw = ((info.get("Extensions") or {}).get(_METADATA) or {}).get("value", "")
    try:
        decoded = json.loads(base64.b64decode(raw)) if raw else {}
    except (binascii.Error, ValueError):
        return {}
    metadata = decoded.get("Metadata") if isinstance(decoded, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _network_namespace(info: dict[str, Any]) -> str:
    linux = (info.get("Spec") or {}).get("linux") or {}
    for namespace in linux.get("namespaces") or ():
        if isinstance(namespace, dict) and namespace.get("type") == "network" and namespace.get("path"):
            return str(namespace["path"]).rstrip("/").rsplit("/", 1)[-1]
    return ""


def _cri_status(status_file: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(status_file).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pod_container(base: Container, info: dict[str, Any], cri_status: dict[str, Any]) -> PodContainer:
    """``base`` (from the container and task lists) named from its ``ctr containers info`` and CRI
    status; a container that is no pod's (no pod labels) keeps its id, name and task status."""
    labels = info.get("Labels") or {}
    namespace, pod = labels.get(_POD_NS), labels.get(_POD_NAME)
    if not namespace or not pod:  # a task someone ran with ctr: listed under its own id
        return PodContainer(base.id, "", base.id, base.image, base.pid, base.status)
    name = labels.get(_CONTAINER_NAME, "")
    if not name:
        status = "SANDBOX_READY" if base.status == "RUNNING" else "SANDBOX_NOTREADY"
        return PodContainer(base.id, f"{namespace}/{pod}", "", base.image, base.pid, status,
                            network_namespace=_network_namespace(info))  # fmt: skip
    if base.status == "RUNNING":
        status = "CONTAINER_RUNNING"
    elif cri_status.get("FinishedAt") or base.status == "STOPPED":
        status = "CONTAINER_EXITED"
    else:
        status = "CONTAINER_CREATED"
    return PodContainer(
        base.id, f"{namespace}/{pod}", name, base.image, base.pid, status,
        log_path=str(_extension(info).get("LogPath") or ""),
        created_at=int(cri_status.get("CreatedAt") or 0), exit_code=int(cri_status.get("ExitCode") or 0),
    )  # fmt: skip


async def pod_containers(ctr: Ctr, namespace: str, status_dir: Path) -> list[PodContainer]:
    """The pods of ready sandboxes, sandbox first, then containers oldest first, and the containers
    of no pod; ``status_dir`` is :data:`CRI_STATUS_DIR` in the node."""
    found = await ctr.containers(namespace)

    async def named(base: Container) -> PodContainer | None:
        try:
            info = await ctr.info(namespace, base.id)
        except CRIError as err:
            if "not found" in str(err):
                return None  # removed between the two calls
            raise
        return pod_container(base, info, _cri_status(str(status_dir / base.id / "status")))

    listed = [c for c in await asyncio.gather(*(named(c) for c in found)) if c is not None]
    ready = {c.pod for c in listed if c.sandbox and c.status == "SANDBOX_READY"}
    kept = [c for c in listed if not c.pod or c.pod in ready]
    return sorted(kept, key=lambda c: (c.pod_id, not c.sandbox, c.created_at, c.name, c.id))


def find_pod_container(containers: list[PodContainer], wanted: str) -> PodContainer | None:
    """The sandbox or container ``wanted`` names (``ns/pod``, ``ns/pod:name``, ``ns/pod:name:id``,
    the id a prefix of containerd's); for ``ns/pod:name`` the newest attempt. None when absent."""
    parsed = parse_display(wanted)
    if parsed is None:
        return next((c for c in containers if c.id == wanted and not c.pod), None)
    namespace, pod, name, prefix = parsed
    matches = [
        c for c in containers
        if c.pod == f"{namespace}/{pod}" and c.name == name and c.id.startswith(prefix)
    ]  # fmt: skip
    return max(matches, key=lambda c: c.created_at) if matches else None
