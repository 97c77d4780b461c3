"""The admin kubeconfig: generated from a machine config, carried as tar.gz, merged into ~/.kube/config.

* :func:`admin_kubeconfig` is a pure function of a control plane's machine config (and the clock):
  cluster ``clusterName``, server ``cluster.controlPlane.endpoint``, CA = the cluster's Kubernetes CA
  (plus ``acceptedCAs``), a fresh client certificate CN ``admin`` O ``system:masters`` signed by that
  CA for ``cluster.adminKubeconfig.certLifetime`` (default 1 year), context and user
  ``admin@<cluster>``: Talos's layout, key for key.
* :func:`kubeconfig_archive` / :func:`extract_kubeconfig`: the node's ``Kubeconfig`` RPC streams a
  gzip'd tar holding one regular file ``kubeconfig`` (mode 0600); the client takes that entry out.
* :func:`merge_kubeconfig`: talosctl's merge rules. A cluster whose name exists with other content is
  renamed ``<name>-1``, ``-2``...; user and context names follow the cluster's new name (they embed
  it: ``admin@cluster`` -> ``admin@cluster-1``); ``--force`` overwrites instead of renaming;
  ``--force-context-name`` names the context; the merged context becomes current. The existing
  file's other entries, key order and comments are kept.

This module never reads or writes files and never prints; callers (the CLI, the node) do that.
"""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ichor.machinery import goduration
from ichor.machinery.errors import ConfigError, DurationError, MachineryError

__all__ = [
    "ADMIN_CERT_LIFETIME",
    "ADMIN_COMMON_NAME",
    "ADMIN_ORGANIZATION",
    "KUBECONFIG_ENTRY",
    "KubeconfigError",
    "MergeResult",
    "admin_kubeconfig",
    "extract_kubeconfig",
    "kubeconfig_archive",
    "kubeconfig_servers",
    "kubeconfig_text",
    "merge_kubeconfig",
]

ADMIN_CERT_LIFETIME = timedelta(days=365)
"""Talos's default ``cluster.adminKubeconfig.certLifetime`` (one year)."""
ADMIN_COMMON_NAME = "admin"
ADMIN_ORGANIZATION = "system:masters"
KUBECONFIG_ENTRY = "kubeconfig"
"""The one file name inside the ``Kubeconfig`` RPC's tar.gz."""


class KubeconfigError(MachineryError):
    """A kubeconfig (or its archive) that cannot be read, or one that cannot be generated."""


_TEMPLATE = """apiVersion: v1
kind: Config
clusters:
- name: {cluster}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}@{cluster}
  user:
    client-certificate-data: {crt}
    client-key-data: {key}
contexts:
- context:
    cluster: {cluster}
    namespace: default
    user: {user}@{cluster}
  name: {context}@{cluster}
current-context: {context}@{cluster}
"""


def kubeconfig_text(*, cluster: str, server: str, ca: bytes, user: str, crt: bytes, key: bytes) -> str:
    """A one-cluster kubeconfig in Talos's layout: user and context ``<user>@<cluster>``, PEM data inline."""
    b64 = base64.b64encode
    return _TEMPLATE.format(
        cluster=cluster, server=server, ca=b64(ca).decode(), user=user, context=user,
        crt=b64(crt).decode(), key=b64(key).decode(),
    )  # fmt: skip


def _v1alpha1_cluster(config: Any) -> Any:
    """The ``cluster`` section of a :class:`~ichor.machinery.config.Container` or v1alpha1 model."""
    model = config
    if hasattr(config, "v1alpha1"):
        doc = config.v1alpha1
        if doc is None:
            raise ConfigError(
                "the machine config has no v1alpha1 document",
                hint="the admin kubeconfig is generated from a control plane's machine config",
            )
        model = doc.model
    cluster = getattr(model, "cluster", None)
    if cluster is None:
        raise ConfigError(
            "cluster instructions are required",
            hint="the admin kubeconfig is generated from a control plane's machine config (cluster: ...)",
        )
    return cluster


def _b64_pem(value: str | None, key: str) -> bytes:
    if not value:
        raise ConfigError(
            f"{key} is not set",
            hint=f"a control plane's machine config carries the Kubernetes CA in {key}",
        )
    try:
        return base64.b64decode(value.strip(), validate=True)
    except ValueError:
        raise ConfigError(f"{key} is not valid base64", hint=f"fix {key} in the machine config") from None


def admin_kubeconfig(config: Any, *, now: datetime | None = None) -> str:
    """The admin kubeconfig YAML for a control plane's machine config (Talos's template).

    ``config`` is a :class:`~ichor.machinery.config.Container` or a v1alpha1 ``Config`` model.
    Raises :class:`~ichor.machinery.errors.ConfigError` naming the key that is missing.
    """
    from ichor.machinery.pki import CertKey, new_keypair

    cluster = _v1alpha1_cluster(config)
    # The CA key first: only a control plane's config has it (a worker's is the commonest mistake).
    ca = cluster.ca
    ca_crt = _b64_pem(ca.crt if ca is not None else None, "cluster.ca.crt")
    ca_key = _b64_pem(ca.key if ca is not None else None, "cluster.ca.key")
    name = cluster.cluster_name
    if not name:
        raise ConfigError(
            "cluster.clusterName is not set",
            hint="the admin kubeconfig names its cluster after cluster.clusterName",
        )
    endpoint = cluster.control_plane.endpoint if cluster.control_plane is not None else None
    if not endpoint:
        raise ConfigError(
            "cluster controlplane endpoint is required",
            hint="set cluster.controlPlane.endpoint (https://<host>:6443)",
        )
    lifetime = ADMIN_CERT_LIFETIME
    settings = cluster.admin_kubeconfig
    if settings is not None and settings.cert_lifetime:
        try:
            lifetime = goduration.parse(settings.cert_lifetime, what="cluster.adminKubeconfig.certLifetime")
        except DurationError as err:
            raise ConfigError(str(err), hint=err.hint) from err
        if lifetime <= timedelta(0):
            raise ConfigError(
                "cluster.adminKubeconfig.certLifetime must be positive",
                hint="use a Go duration such as 8760h",
            )
    trusted = ca_crt
    for index, accepted in enumerate(cluster.accepted_cas or []):
        extra = _b64_pem(accepted.crt, f"cluster.acceptedCAs[{index}].crt")
        trusted = trusted.rstrip(b"\n") + b"\n" + extra
    pair = new_keypair(
        CertKey(ca_crt, ca_key),
        organizations=[ADMIN_ORGANIZATION],
        common_name=ADMIN_COMMON_NAME,
        ttl=lifetime,
        server=False,
        client=True,
        now=now,
    )
    return _TEMPLATE.format(
        cluster=name,
        server=endpoint,
        ca=base64.b64encode(trusted).decode(),
        user=ADMIN_COMMON_NAME,
        context=ADMIN_COMMON_NAME,
        crt=base64.b64encode(pair.crt).decode(),
        key=base64.b64encode(pair.key).decode(),
    )


# --------------------------------------------------------------------------- archive


def kubeconfig_archive(kubeconfig: str | bytes, *, now: datetime | None = None) -> bytes:
    """A gzip'd tar with one regular file ``kubeconfig`` (mode 0600), as the node's RPC streams it."""
    data = kubeconfig.encode() if isinstance(kubeconfig, str) else kubeconfig
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo(KUBECONFIG_ENTRY)
        info.size = len(data)
        info.mode = 0o600
        info.mtime = int((now or datetime.now()).timestamp())
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def extract_kubeconfig(archive: bytes) -> bytes:
    """The ``kubeconfig`` file out of the RPC's tar.gz; :class:`KubeconfigError` if it is not there."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar:
                if member.name.lstrip("./") == KUBECONFIG_ENTRY and member.isreg():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    return handle.read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise KubeconfigError(
            f"error reading the kubeconfig archive from the node: {exc}",
            hint="the node sent a damaged tar.gz; retry, and check the node's logs",
        ) from None
    raise KubeconfigError(
        'file "kubeconfig" not found in the node\'s archive',
        hint="the node's Kubeconfig response is not the tar.gz talosctl expects",
    )


# --------------------------------------------------------------------------- merge


@dataclass
class MergeResult:
    """The merged kubeconfig text, what was renamed (talosctl's lines) and the context made current."""

    text: str
    context: str
    renamed: list[str] = field(default_factory=list)


def _yaml() -> Any:
    from ichor.machinery.yamlio import make_yaml

    yaml = make_yaml()
    # kubectl writes kubeconfigs with 2-space indentation and unindented sequences; keep that style.
    yaml.indent(mapping=2, sequence=2, offset=0)
    return yaml


def _load_kubeconfig(text: str, source: str) -> Any:
    from ruamel.yaml.comments import CommentedMap

    from ichor.machinery.yamlio import load_documents

    try:
        docs = load_documents(text, source=source)
    except MachineryError as exc:
        raise KubeconfigError(
            f"error loading kubeconfig {source}: {exc}",
            hint=f"fix or move {source} away, or write to another file with `talosctl kubeconfig <path>`",
        ) from None
    if not docs:
        return CommentedMap()
    if len(docs) > 1 or not isinstance(docs[0], dict):
        raise KubeconfigError(
            f"error loading kubeconfig {source}: expected one YAML mapping (apiVersion: v1, kind: Config)",
            hint=f"fix or move {source} away, or write to another file with `talosctl kubeconfig <path>`",
        )
    doc = docs[0]
    for section in ("clusters", "users", "contexts"):
        entries = doc.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries
        ):
            raise KubeconfigError(
                f"error loading kubeconfig {source}: {section} must be a list of entries with a name",
                hint=f"fix {section} in {source}, or write to another file with `talosctl kubeconfig <path>`",
            )
    return doc


def kubeconfig_servers(text: str) -> list[str]:
    """The API server URL of every cluster entry of a kubeconfig (``clusters[].cluster.server``)."""
    doc = _load_kubeconfig(text, "kubeconfig")
    servers = []
    for entry in doc.get("clusters") or []:
        body = _body(entry, "cluster")
        if isinstance(body, dict) and isinstance(body.get("server"), str):
            servers.append(body["server"])
    return servers


def _entries(doc: Any, section: str) -> dict[str, Any]:
    return {e["name"]: e for e in doc.get(section) or []}


def _body(entry: Any, key: str) -> Any:
    from ichor.machinery.yamlio import to_plain

    return to_plain(entry.get(key))


def _unique(name: str, taken: Callable[[str], bool]) -> str:
    candidate, i = name, 0
    while taken(candidate):
        i += 1
        candidate = f"{name}-{i}"
    return candidate


def merge_kubeconfig(
    existing: str,
    new: str | bytes,
    *,
    force: bool = False,
    force_context_name: str | None = None,
    source: str = "kubeconfig",
) -> MergeResult:
    """Merge kubeconfig ``new`` into ``existing`` (texts) with talosctl's rules; see the module doc.

    A damaged ``existing`` raises :class:`KubeconfigError` naming ``source``.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from ichor.machinery.yamlio import to_plain

    doc = _load_kubeconfig(existing, source)
    incoming = to_plain(_load_kubeconfig(new.decode() if isinstance(new, bytes) else new, "from the node"))
    if not doc:
        doc = CommentedMap([("apiVersion", "v1"), ("kind", "Config")])
    for section in ("clusters", "users", "contexts"):
        if doc.get(section) is None:
            doc[section] = CommentedSeq()

    renamed: list[str] = []
    clusters, users, contexts = (_entries(doc, s) for s in ("clusters", "users", "contexts"))
    cluster_map: dict[str, str] = {}
    for entry in incoming.get("clusters") or []:
        name = entry["name"]
        merged = name
        if name in clusters and _body(clusters[name], "cluster") != entry.get("cluster") and not force:
            merged = _unique(name, lambda n: n in clusters)
        cluster_map[name] = merged
    user_map: dict[str, str] = {}
    for entry in incoming.get("users") or []:
        name = entry["name"]
        merged = name
        for old, new_name in cluster_map.items():  # users embed the cluster name: admin@<cluster>
            merged = merged.replace(old, new_name)
        if merged in users and _body(users[merged], "user") != entry.get("user") and not force:
            merged = _unique(merged, lambda n: n in users)
        user_map[name] = merged
    context_map: dict[str, str] = {}
    for entry in incoming.get("contexts") or []:
        name = entry["name"]
        merged = name
        for old, new_name in user_map.items():  # contexts are named like users in Talos
            merged = merged.replace(old, new_name)
        if force_context_name:
            merged = force_context_name
        body = dict(entry.get("context") or {})
        body["cluster"] = cluster_map.get(body.get("cluster", ""), body.get("cluster", ""))
        body["user"] = user_map.get(body.get("user", ""), body.get("user", ""))
        if merged in contexts and _body(contexts[merged], "context") != body and not force:
            merged = _unique(merged, lambda n: n in contexts)
        context_map[name] = merged

    def put(section: str, existing_entries: dict[str, Any], name: str, key: str, body: Any) -> None:
        entry = CommentedMap([("name", name), (key, body)])
        if name in existing_entries:
            seq = doc[section]
            seq[seq.index(existing_entries[name])] = entry
        else:
            doc[section].append(entry)
        existing_entries[name] = entry

    for entry in incoming.get("clusters") or []:
        name = entry["name"]
        if cluster_map[name] != name:
            renamed.append(f'renamed cluster "{name}" -> "{cluster_map[name]}"')
        put("clusters", clusters, cluster_map[name], "cluster", entry.get("cluster"))
    for entry in incoming.get("users") or []:
        name = entry["name"]
        if user_map[name] != name:
            renamed.append(f'renamed auth info "{name}" -> "{user_map[name]}"')
        put("users", users, user_map[name], "user", entry.get("user"))
    current = ""
    for entry in incoming.get("contexts") or []:
        name = entry["name"]
        if context_map[name] != name:
            renamed.append(f'renamed context "{name}" -> "{context_map[name]}"')
        body = dict(entry.get("context") or {})
        body["cluster"] = cluster_map.get(body.get("cluster", ""), body.get("cluster", ""))
        body["user"] = user_map.get(body.get("user", ""), body.get("user", ""))
        put("contexts", contexts, context_map[name], "context", body)
        current = context_map[name]
    if current:
        doc["current-context"] = current

    buf = io.StringIO()
    _yaml().dump(doc, buf)
    return MergeResult(text=buf.getvalue(), context=current, renamed=renamed)
