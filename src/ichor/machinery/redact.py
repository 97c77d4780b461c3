"""A machine config with its secrets replaced, safe to hand to someone else (support bundles).

The secret fields are those of Talos's v1alpha1 ``Config.Redact``: the machine token and the OS CA
key, the cluster secret and bootstrap token, the two at-rest encryption secrets, and the private keys
of the Kubernetes CA, aggregator CA, service account and etcd CA. Certificates stay: they are public
and say which CA a node trusts. Comments and key order are kept; other documents are left alone
(they carry no secrets in Talos 1.7).

This module only rewrites text; it does not load or validate a config.
"""

from __future__ import annotations

from typing import Any

from ichor.machinery.yamlio import dump_documents, load_documents

__all__ = ["REDACTED", "SECRET_PATHS", "redact_config", "secret_values"]

REDACTED = "******"

SECRET_PATHS: tuple[tuple[str, ...], ...] = (
    ("machine", "token"),
    ("machine", "ca", "key"),
    ("cluster", "secret"),
    ("cluster", "token"),
    ("cluster", "secretboxEncryptionSecret"),
    ("cluster", "aescbcEncryptionSecret"),
    ("cluster", "ca", "key"),
    ("cluster", "aggregatorCA", "key"),
    ("cluster", "serviceAccount", "key"),
    ("cluster", "etcd", "ca", "key"),
)


def _parent(doc: Any, path: tuple[str, ...]) -> dict[str, Any] | None:
    node = doc
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def secret_values(text: str) -> list[str]:
    """The secret strings a config holds (what must never leave a node unredacted)."""
    found = []
    for doc in load_documents(text, source="machine config"):
        for path in SECRET_PATHS:
            parent = _parent(doc, path)
            if parent is not None and parent.get(path[-1]):
                found.append(str(parent[path[-1]]))
    return found


def redact_config(text: str) -> str:
    """``text`` with every secret field's value replaced by :data:`REDACTED`."""
    docs = load_documents(text, source="machine config")
    for doc in docs:
        for path in SECRET_PATHS:
            parent = _parent(doc, path)
            if parent is not None and parent.get(path[-1]):
                parent[path[-1]] = REDACTED
    return dump_documents(docs)
