"""What the client needs from a kubeconfig: the current context's server, CA and client pair."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ichor.kubeapi._errors import KubeconfigInvalidError
from ichor.machinery.errors import MachineryError
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = ["Kubeconfig", "load_kubeconfig"]

_HINT = "use a kubeconfig with certificate-authority-data, client-certificate-data and client-key-data"


@dataclasses.dataclass(frozen=True)
class Kubeconfig:
    """An API server URL (``https://host:port``) and the PEM CA, client certificate and key."""

    server: str
    ca: bytes
    cert: bytes
    key: bytes

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.server).port or 443


def _named(doc: dict[str, Any], section: str, name: str, source: str) -> dict[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise KubeconfigInvalidError(f"{source}: no {section[:-1]} named {name!r}", hint=_HINT)


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\s*", re.DOTALL)


def _only(pem: bytes, kind: str) -> bytes:
    """The PEM blocks of ``pem`` whose label ends with ``kind`` (the kubelet keeps its client
    certificate and key in one file); all of ``pem`` if it has none."""
    blocks = [m.group(0) for m in _PEM_BLOCK.finditer(pem) if m.group(1).endswith(kind.encode())]
    return b"".join(blocks) or pem


def _pem(
    body: dict[str, Any], key: str, source: str, read_file: Callable[[str], bytes] | None = None
) -> bytes:
    value = body.get(key)
    path = body.get(key.removesuffix("-data"))
    if (not isinstance(value, str) or not value) and read_file is not None and isinstance(path, str) and path:
        try:
            return _only(read_file(path), "PRIVATE KEY" if key == "client-key-data" else "CERTIFICATE")
        except (OSError, ValueError) as exc:
            raise KubeconfigInvalidError(
                f"{source}: {key.removesuffix('-data')} {path}: {getattr(exc, 'strerror', None) or exc}",
                hint="is the file the kubeconfig names in place?",
            ) from None
    if not isinstance(value, str) or not value:
        raise KubeconfigInvalidError(f"{source}: {key} is missing", hint=_HINT)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigInvalidError(f"{source}: {key} is not base64", hint=_HINT) from None


def load_kubeconfig(
    text: str | bytes,
    *,
    source: str = "kubeconfig",
    context: str | None = None,
    read_file: Callable[[str], bytes] | None = None,
) -> Kubeconfig:
    """The current (or named) context of a kubeconfig with embedded certificates; with ``read_file``,
    ``certificate-authority``/``client-certificate``/``client-key`` file paths too (as the kubelet
    writes its own kubeconfig), read through it."""
    try:
        docs = load_documents(text, source=source)
    except MachineryError as exc:
        raise KubeconfigInvalidError(str(exc), hint=_HINT) from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise KubeconfigInvalidError(f"{source}: expected one YAML mapping (kind: Config)", hint=_HINT)
    doc = to_plain(docs[0])
    name = context or doc.get("current-context")
    if not isinstance(name, str) or not name:
        raise KubeconfigInvalidError(f"{source}: no current-context", hint="set current-context")
    ctx = _named(doc, "contexts", name, source)
    cluster = _named(doc, "clusters", str(ctx.get("cluster")), source)
    user = _named(doc, "users", str(ctx.get("user")), source)
    server = cluster.get("server")
    if not isinstance(server, str) or urlsplit(server).scheme != "https" or not urlsplit(server).hostname:
        raise KubeconfigInvalidError(
            f"{source}: cluster server {server!r} is not an https:// URL",
            hint="set clusters[].cluster.server",
        )
    return Kubeconfig(
        server=server.rstrip("/"),
        ca=_pem(cluster, "certificate-authority-data", source, read_file),
        cert=_pem(user, "client-certificate-data", source, read_file),
        key=_pem(user, "client-key-data", source, read_file),
    )
