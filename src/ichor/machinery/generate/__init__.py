"""``gen config``: Talos 1.7's generated machine configs and talosconfig, from a secrets bundle.

Given the same secrets bundle and options, the documents equal Talos 1.7's field for field and
come out in Talos's field order. This module computes text; writing files is the caller's job.
It must not touch the network or a node.
"""

from __future__ import annotations

__all__ = [
    "GenOptions",
    "GeneratedConfigs",
    "OutputType",
    "generate",
    "render_document",
    "render_documents",
    "validate_endpoint",
]

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from ichor.machinery.errors import MachineryError
from ichor.machinery.generate._defaults import (
    EMPTY_WHEN_DOCUMENTED,
    GenOptions,
    controlplane_document,
    worker_document,
)
from ichor.machinery.generate._render import render_document, render_documents
from ichor.machinery.secrets import SecretsBundle


class OutputType(StrEnum):
    CONTROLPLANE = "controlplane"
    WORKER = "worker"
    TALOSCONFIG = "talosconfig"

    @property
    def file_name(self) -> str:
        return "talosconfig" if self is OutputType.TALOSCONFIG else f"{self.value}.yaml"


def validate_endpoint(endpoint: str) -> str:
    """Check a cluster endpoint is an ``https://host[:port]`` URL; returns it unchanged."""
    parts = urlsplit(endpoint)
    example = "https://192.168.0.2:6443"
    if not parts.scheme:
        host = endpoint.split("/")[0]
        raise MachineryError(
            f"cluster endpoint {endpoint!r} is not a URL: no scheme and port",
            hint=f"pass the Kubernetes API endpoint as a URL, for example https://{host or '192.168.0.2'}:6443",
        )
    if parts.scheme != "https":
        raise MachineryError(
            f"cluster endpoint {endpoint!r} must use the https:// scheme",
            hint=f"for example {example}",
        )
    try:
        port = parts.port
    except ValueError:
        raise MachineryError(
            f"cluster endpoint {endpoint!r} has an invalid port", hint=f"for example {example}"
        ) from None
    if not parts.hostname:
        raise MachineryError(f"cluster endpoint {endpoint!r} has no host", hint=f"for example {example}")
    if port == 0:
        raise MachineryError(
            f"cluster endpoint {endpoint!r} has an invalid port", hint=f"for example {example}"
        )
    return endpoint


@dataclass
class GeneratedConfigs:
    """Text of each requested output, keyed by type, plus non-fatal findings for the user."""

    outputs: dict[OutputType, str]
    warnings: list[str] = field(default_factory=list)


def _drop_documented_empties(doc: dict[str, Any]) -> None:
    for path in EMPTY_WHEN_DOCUMENTED:
        parent: Any = doc
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and parent.get(path[-1]) in ({}, []):
            del parent[path[-1]]


def _patched(docs: list[dict[str, Any]], patches: Sequence[Any]) -> list[dict[str, Any]]:
    if not patches:
        return docs
    from ichor.machinery.patch import apply_patches
    from ichor.machinery.yamlio import from_plain, to_plain

    result = apply_patches([from_plain(d) for d in docs], patches)
    plain: list[dict[str, Any]] = [to_plain(d) for d in result]
    return plain


def generate(
    bundle: SecretsBundle,
    opts: GenOptions,
    *,
    output_types: Sequence[OutputType] = (OutputType.CONTROLPLANE, OutputType.WORKER, OutputType.TALOSCONFIG),
    patches: Sequence[Any] = (),
    controlplane_patches: Sequence[Any] = (),
    worker_patches: Sequence[Any] = (),
    with_docs: bool = True,
    with_examples: bool = True,
    talosconfig_endpoints: Sequence[str] = (),
    now: datetime | None = None,
) -> GeneratedConfigs:
    """Build the requested outputs. Patches are ``ichor.machinery.patch`` objects."""
    validate_endpoint(opts.endpoint)
    result = GeneratedConfigs(outputs={})
    machine_docs = {
        OutputType.CONTROLPLANE: (controlplane_document, controlplane_patches),
        OutputType.WORKER: (worker_document, worker_patches),
    }
    for output_type in output_types:
        if output_type is OutputType.TALOSCONFIG:
            result.outputs[output_type] = _talosconfig_text(bundle, opts, talosconfig_endpoints, now)
            continue
        build, specific = machine_docs[output_type]
        doc = build(bundle, opts)
        if not with_docs:
            _drop_documented_empties(doc)
        docs = _patched(_patched([doc], patches), specific)
        result.warnings.extend(_check(docs, output_type))
        result.outputs[output_type] = render_documents(docs, with_docs=with_docs, with_examples=with_examples)
    return result


def _check(docs: list[dict[str, Any]], output_type: OutputType) -> list[str]:
    """Decode the result strictly (a patch may add unknown keys) and collect validation warnings."""
    from ichor.machinery.config import Mode, load_config, validate

    text = render_documents(docs)
    container = load_config(text, source=f"generated {output_type.file_name}")
    found = validate(container, Mode.METAL)
    return [f"{output_type.file_name}: {problem}" for problem in (*found.errors, *found.warnings)]


def _talosconfig_text(
    bundle: SecretsBundle, opts: GenOptions, endpoints: Sequence[str], now: datetime | None
) -> str:
    from ichor.machinery.clientconfig import TalosConfig, issue_admin_context

    context = issue_admin_context(bundle, endpoints=list(endpoints), now=now)
    config = TalosConfig(context=opts.cluster_name, contexts={opts.cluster_name: context})
    return config.to_yaml()
