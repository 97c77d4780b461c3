"""The machine configs ``talosctl cluster create`` gives its nodes: one secrets bundle, the first control
plane as the endpoint, ``--kubernetes-version`` (checked), ``--registry-mirror`` and the patches.

Generates text only; it starts nothing and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ichor.images import parse_mirror
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION
from ichor.machinery.errors import MachineryError
from ichor.provision import _container
from ichor.provision._record import ClusterRecord

if TYPE_CHECKING:
    from ichor.machinery.generate import GenOptions
    from ichor.machinery.patch import Patch
    from ichor.machinery.secrets import SecretsBundle

__all__ = [
    "CONTAINER",
    "PROCESS",
    "Patches",
    "check_kubernetes_version_flag",
    "gen_options",
    "node_configs",
    "registry_mirror_options",
]

PROCESS, CONTAINER = "process", "container"


def registry_mirror_options(record: ClusterRecord) -> tuple[tuple[str, str], ...]:
    """The record's ``--registry-mirror`` entries, as :class:`GenOptions` takes them (Talos appends
    endpoints given for the same host in order)."""
    return tuple((m.registry, m.endpoint) for m in map(parse_mirror, record.registry_mirrors))


@dataclass(frozen=True)
class Patches:
    common: list[Patch]
    controlplane: list[Patch]
    worker: list[Patch]


def check_kubernetes_version_flag(version: str, *, local: bool) -> str:
    """``--kubernetes-version`` without its ``v`` when Talos 1.7 runs it (and, with ``local`` images,
    when it is the version built here), else why not."""
    from ichor.machinery.compatibility import KubernetesVersionError, check_kubernetes_version

    try:
        checked = check_kubernetes_version(version)
    except KubernetesVersionError as err:
        raise MachineryError(
            f"--kubernetes-version: {err}",
            hint=f"pass --kubernetes-version 1.25.0 to 1.30.x (default {DEFAULT_KUBERNETES_VERSION})",
        ) from None
    if local and checked != DEFAULT_KUBERNETES_VERSION:
        raise MachineryError(
            f"--kubernetes-version {checked}: --kubernetes-images local builds and serves Kubernetes "
            f"{DEFAULT_KUBERNETES_VERSION} only",
            hint=f"leave --kubernetes-version at {DEFAULT_KUBERNETES_VERSION}, or pass --kubernetes-images "
            "upstream to have the nodes pull that version's public images",
        )
    return checked


def gen_options(record: ClusterRecord) -> GenOptions:
    from ichor.machinery.generate import GenOptions

    cp_address = next(n.address for n in record.nodes if n.type == "controlplane")
    return GenOptions(
        cluster_name=record.name,
        endpoint=f"https://{cp_address}:6443",
        kubernetes_version=record.kubernetes_version,
        registry_mirrors=registry_mirror_options(record),
        # Talos's docker provisioner sets it, and container mode (both provisioners' nodes run in it)
        # requires it: `talosctl validate --mode container` refuses a config without it.
        host_dns_forward_kube_dns_to_host=True,
    )


def node_configs(
    record: ClusterRecord, bundle: SecretsBundle, common: list[Patch], patches: Patches
) -> dict[str, str]:
    """Each node's machine config (by node name): generated from ``bundle`` for the record's cluster
    (endpoint the first control plane, its ``kubernetes_version`` and registry mirrors), patched with
    ``common``, the node's hostname (and, container nodes, time server and address), then ``patches``'
    per-type ones."""
    from ichor.machinery.generate import OutputType, generate
    from ichor.machinery.patch import load_patches

    opts = gen_options(record)
    container = record.provisioner == CONTAINER
    configs: dict[str, str] = {}
    for node in record.nodes:
        own = load_patches([f"machine:\n  network:\n    hostname: {node.name}\n"])
        if container:
            own += load_patches([_container.time_server_patch(record)])
            patch = _container.static_address_patch if record.static_addresses else _container.dhcp_patch
            own += load_patches([patch(record, node)])
        output = OutputType.CONTROLPLANE if node.type == "controlplane" else OutputType.WORKER
        configs[node.name] = generate(bundle, opts, output_types=[output], patches=[*common, *own],
                                      controlplane_patches=patches.controlplane, worker_patches=patches.worker,
                                      with_docs=False, with_examples=False).outputs[output]  # fmt: skip
    return configs
