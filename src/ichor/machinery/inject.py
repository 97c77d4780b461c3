"""``talosctl inject serviceaccount``: Kubernetes manifests rewritten to carry a Talos API service account.

As Talos's ``pkg/kubernetes/inject``: every Pod, Deployment, StatefulSet, DaemonSet, Job and
CronJob gets a volume ``talos-secrets`` (the secret ``<name>-talos-secrets``) mounted at
``/var/run/secrets/talos.dev`` in each of its containers and init containers (an earlier mount or
volume of that name is replaced), followed by a ``talos.dev/v1alpha1`` ``ServiceAccount`` named
``<name>-talos-secrets`` in the same namespace with the requested roles, once per object. Other
documents pass through unchanged, except a Talos ServiceAccount for an object already handled,
which is dropped (running the command twice gives the same output). Every document ends with
``---``.

The rewritten objects come out with sorted keys in Kubernetes' two-space style; Kubernetes' typed
round trip (which adds defaulted empty fields such as ``creationTimestamp: null``) is not
reproduced. This module transforms text; it reads and writes no files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ichor.machinery.errors import MachineryError

__all__ = ["MOUNT_PATH", "VOLUME_NAME", "InjectError", "inject_service_account"]

VOLUME_NAME = "talos-secrets"
NAME_SUFFIX = "-talos-secrets"
MOUNT_PATH = "/var/run/secrets/talos.dev"
_SERVICE_ACCOUNT = ("talos.dev/v1alpha1", "ServiceAccount")


class InjectError(MachineryError):
    """A manifest that cannot be rewritten (not YAML, or an object without a name)."""


def _pod_spec(path: Sequence[str]) -> Callable[[dict[str, Any]], Any]:
    def find(obj: dict[str, Any]) -> Any:
        node: Any = obj
        for key in path:
            node = node.setdefault(key, {}) if isinstance(node, dict) else None
        return node

    return find


_TEMPLATE = ("spec", "template", "spec")
_POD_SPECS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "v1/Pod": _pod_spec(("spec",)),
    "apps/v1/Deployment": _pod_spec(_TEMPLATE),
    "apps/v1/StatefulSet": _pod_spec(_TEMPLATE),
    "apps/v1/DaemonSet": _pod_spec(_TEMPLATE),
    "batch/v1/Job": _pod_spec(_TEMPLATE),
    "batch/v1/CronJob": _pod_spec(("spec", "jobTemplate", "spec", "template", "spec")),
}


def _kind(doc: dict[str, Any]) -> str | None:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    return f"{api_version}/{kind}" if isinstance(api_version, str) and isinstance(kind, str) else None


def _metadata(doc: dict[str, Any]) -> dict[str, Any]:
    metadata = doc.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _object_id(namespace: Any, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _service_account_id(doc: dict[str, Any]) -> str:
    """The object a Talos ServiceAccount document belongs to, or "" for any other document."""
    if _kind(doc) != "/".join(_SERVICE_ACCOUNT):
        return ""
    name = _metadata(doc).get("name")
    if not isinstance(name, str):
        return ""
    return _object_id(_metadata(doc).get("namespace"), name.removesuffix(NAME_SUFFIX))


def _inject(pod_spec: dict[str, Any], secret: str) -> None:
    volumes = [
        v for v in pod_spec.get("volumes") or [] if not (isinstance(v, dict) and v.get("name") == VOLUME_NAME)
    ]
    volumes.append({"name": VOLUME_NAME, "secret": {"secretName": secret}})
    pod_spec["volumes"] = volumes
    for key in ("initContainers", "containers"):
        containers = pod_spec.get(key)
        if not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, dict):
                continue
            mounts = [
                m
                for m in container.get("volumeMounts") or []
                if not (isinstance(m, dict) and m.get("name") == VOLUME_NAME)
            ]
            mounts.append({"mountPath": MOUNT_PATH, "name": VOLUME_NAME})
            container["volumeMounts"] = mounts


def _service_account(namespace: Any, name: str, roles: Sequence[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": _SERVICE_ACCOUNT[0], "kind": _SERVICE_ACCOUNT[1], "metadata": metadata,
            "spec": {"roles": list(roles)}}  # fmt: skip


def inject_service_account(text: str | bytes, roles: Sequence[str], *, source: str = "<input>") -> str:
    """The manifests in ``text`` with Talos service accounts injected (see the module docstring)."""
    from ichor.machinery.errors import YAMLError
    from ichor.machinery.yamlio import dump_sorted, load_documents, to_plain

    try:
        docs = [to_plain(d) for d in load_documents(text, source=source)]
    except YAMLError as exc:
        raise InjectError(str(exc)) from None
    seen: set[str] = set()
    out: list[str] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        find_pod_spec = _POD_SPECS.get(_kind(doc) or "")
        if find_pod_spec is None:
            owner = _service_account_id(doc)
            if owner:
                if owner in seen:
                    continue
                seen.add(owner)
            out.append(dump_sorted(doc, kubernetes=False))
            continue
        name = _metadata(doc).get("name")
        if not isinstance(name, str):
            raise InjectError(f"{source}: object has no name", hint="give every manifest a metadata.name")
        pod_spec = find_pod_spec(doc)
        if not isinstance(pod_spec, dict):
            raise InjectError(f"{source}: {name}: the pod spec is not a mapping")
        _inject(pod_spec, f"{name}{NAME_SUFFIX}")
        out.append(dump_sorted(doc, kubernetes=True))
        namespace = _metadata(doc).get("namespace")
        owner = _object_id(namespace, name)
        if owner not in seen:
            out.append(
                dump_sorted(_service_account(namespace, f"{name}{NAME_SUFFIX}", roles), kubernetes=False)
            )
            seen.add(owner)
    return "".join(part + "---\n" for part in out)
