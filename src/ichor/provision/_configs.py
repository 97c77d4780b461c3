"""The machine configs ``talosctl cluster create`` gives its nodes: one secrets bundle, the first control
plane (or ``--use-vip``'s shared address) as the endpoint, ``--kubernetes-version`` (checked),
``--talos-version``, ``--dns-domain``, ``--kubeprism-port``, ``--custom-cni-url``,
``--with-cluster-discovery``, ``--registry-mirror`` and the patches; or, with ``--input-dir``, the
configs found there with only the node's own plumbing patched in (hostname, eth0, time server,
discovery service, the cluster's own registry mirrors).

Every config has ``machine.features.hostDNS.forwardKubeDNSToHost: true``: both provisioners' nodes
run in Talos's container mode, which requires it (Talos's docker provisioner sets it too).

Generates and reads text only; it starts nothing and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ichor.images import parse_mirror
from ichor.machinery.constants import DEFAULT_KUBERNETES_VERSION, KUBEPRISM_PORT
from ichor.machinery.errors import MachineryError
from ichor.provision._provisioner import ProvisionerName, provisioner_for
from ichor.provision._record import ClusterRecord

if TYPE_CHECKING:
    from ichor.machinery.contract import VersionContract
    from ichor.machinery.generate import GenOptions
    from ichor.machinery.patch import Patch
    from ichor.machinery.secrets import SecretsBundle

__all__ = [
    "CONTAINER",
    "PROCESS",
    "InputConfigs",
    "Patches",
    "check_kubernetes_version_flag",
    "check_talos_version_flag",
    "contract_of",
    "gen_options",
    "kubernetes_endpoint",
    "load_input_dir",
    "node_configs",
    "registry_mirror_options",
]

PROCESS, CONTAINER = ProvisionerName.PROCESS, ProvisionerName.CONTAINER


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
        from ichor.kubebuild import KUBERNETES_RELEASES

        # The other releases the builder knows are built on demand (an upgrade's older version).
        others = [v.removeprefix("v") for v in KUBERNETES_RELEASES if v != f"v{DEFAULT_KUBERNETES_VERSION}"]
        if checked not in others:
            raise MachineryError(
                f"--kubernetes-version {checked}: --kubernetes-images local builds and serves Kubernetes "
                f"{DEFAULT_KUBERNETES_VERSION} only (and {', '.join(others)} for upgrades)",
                hint=f"leave --kubernetes-version at {DEFAULT_KUBERNETES_VERSION}, or pass --kubernetes-images "
                "upstream to have the nodes pull that version's public images",
            )
    return checked


def check_talos_version_flag(version: str) -> str:
    """``--talos-version`` as the configs' version contract (``v1.7``; ``latest`` and "" are Talos
    1.7's own), refused below v1.7: the nodes run in container mode, which needs the host DNS
    (``machine.features.hostDNS``) that configs for an earlier Talos do not have."""
    from ichor.machinery.contract import VersionContract

    if version in ("", "latest"):
        return ""
    try:
        contract = VersionContract.parse(version)
    except MachineryError as err:
        raise MachineryError(f"--talos-version: {err}", hint=err.hint) from None
    if not contract.host_dns_enabled:
        raise MachineryError(
            f"--talos-version {version}: configs for Talos {contract} have no machine.features.hostDNS, which "
            "nodes in container mode require (`talosctl validate --mode container` refuses them)",
            hint="pass --talos-version v1.7 (the default), or leave it out",
        )
    return str(contract)


def contract_of(record: ClusterRecord) -> VersionContract:
    from ichor.machinery.contract import CURRENT_CONTRACT, VersionContract

    return VersionContract.parse(record.talos_version) if record.talos_version else CURRENT_CONTRACT


def kubernetes_endpoint(record: ClusterRecord) -> str:
    """The Kubernetes API endpoint in the configs: the VIP with ``--use-vip``, else the first control
    plane (Talos's docker provisioner's in-cluster endpoint)."""
    host = record.vip or next(n.address for n in record.nodes if n.type == "controlplane")
    return f"https://{host}:6443"


def _host_of(endpoint: str) -> str:
    from urllib.parse import urlsplit

    parsed = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    return parsed.hostname or endpoint


def gen_options(record: ClusterRecord) -> GenOptions:
    from ichor.machinery.generate import GenOptions

    return GenOptions(
        cluster_name=record.name,
        endpoint=kubernetes_endpoint(record),
        kubernetes_version=record.kubernetes_version,
        contract=contract_of(record),
        install_image=record.install_image or None,
        additional_sans=(_host_of(record.endpoint),) if record.endpoint else (),
        dns_domain=record.dns_domain,
        registry_mirrors=registry_mirror_options(record),
        discovery_enabled=record.discovery,
        debug=record.debug,
        kube_prism_port=None if record.kube_prism_port == KUBEPRISM_PORT else record.kube_prism_port,
        # Talos's docker provisioner sets it, and container mode (both provisioners' nodes run in it)
        # requires it: `talosctl validate --mode container` refuses a config without it.
        host_dns_forward_kube_dns_to_host=True,
    )


@dataclass(frozen=True)
class InputConfigs:
    """``--input-dir``'s configs, as Talos's ``bundle.WithExistingConfigs`` reads them."""

    controlplane: str
    worker: str
    talosconfig: str


def load_input_dir(directory: Path) -> InputConfigs:
    """``controlplane.yaml``, ``worker.yaml`` and ``talosconfig`` from ``directory`` (what ``talosctl gen
    config -o <dir>`` writes), each decoded and checked in container mode before anything starts."""
    from ichor.machinery.config import Mode, load_config, validate
    from ichor.machinery.errors import ConfigValidationError

    texts: dict[str, str] = {}
    for name in ("controlplane.yaml", "worker.yaml", "talosconfig"):
        path = directory.expanduser() / name
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MachineryError(
                f"--input-dir: cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                hint="point --input-dir at what `talosctl gen config -o <dir>` wrote "
                "(controlplane.yaml, worker.yaml, talosconfig)",
            ) from None
    for name in ("controlplane.yaml", "worker.yaml"):
        found = validate(load_config(texts[name], source=str(directory / name)), Mode.CONTAINER)
        if found.errors:
            raise ConfigValidationError(
                f"--input-dir: {directory / name} is not valid for container-mode nodes",
                found.errors,
                hint="regenerate it with `talosctl gen config ... --config-patch "
                '\'{"machine": {"features": {"hostDNS": {"enabled": true, "forwardKubeDNSToHost": true}}}}\'`'
                " (what cluster create's own configs have), or fix what is listed",
            )
    return InputConfigs(texts["controlplane.yaml"], texts["worker.yaml"], texts["talosconfig"])


def _cluster_patches(record: ClusterRecord) -> list[str]:
    """The flags that become patches rather than generate options (``--custom-cni-url``,
    ``--registry-insecure-skip-verify``)."""
    texts = []
    if record.custom_cni_url:
        texts.append(
            f"cluster:\n  network:\n    cni:\n      name: custom\n      urls: [{_quoted(record.custom_cni_url)}]\n"
        )
    for host in record.registry_insecure:
        texts.append(
            f"machine:\n  registries:\n    config:\n      {_quoted(host)}:\n        tls:\n"
            "          insecureSkipVerify: true\n"
        )
    return texts


def _input_patches(record: ClusterRecord) -> list[str]:
    """With ``--input-dir``: the mirrors to the cluster's own registry (``--with-registry``,
    ``--kubernetes-images local``), which the nodes need to pull anything."""
    texts = []
    for registry, endpoint in registry_mirror_options(record):
        texts.append(
            f"machine:\n  registries:\n    mirrors:\n      {_quoted(registry)}:\n"
            f"        endpoints: [{_quoted(endpoint)}]\n"
        )
    return texts


def _quoted(text: str) -> str:
    import json

    return json.dumps(text)


def node_configs(
    record: ClusterRecord,
    bundle: SecretsBundle | None,
    common: list[Patch],
    patches: Patches,
    inputs: InputConfigs | None = None,
) -> dict[str, str]:
    """Each node's machine config (by node name): generated from ``bundle`` for the record's cluster
    (:func:`gen_options`) or taken from ``inputs`` (``--input-dir``), patched with ``common``, the
    node's hostname and the provisioner's plumbing (:meth:`~._provisioner.Provisioner.node_patches`), then
    ``patches``' per-type ones."""
    from ichor.machinery.generate import OutputType, generate
    from ichor.machinery.patch import apply_patches, load_patches
    from ichor.machinery.yamlio import dump_documents, load_documents

    opts = gen_options(record)
    provider = provisioner_for(record.provisioner)
    extra = load_patches(_input_patches(record) if inputs is not None else _cluster_patches(record))
    configs: dict[str, str] = {}
    for node in record.nodes:
        own = load_patches([f"machine:\n  network:\n    hostname: {node.name}\n"])
        own += load_patches(provider.node_patches(record, node))
        controlplane = node.type == "controlplane"
        if inputs is not None:
            base = load_documents(inputs.controlplane if controlplane else inputs.worker, source=node.name)
            specific = patches.controlplane if controlplane else patches.worker
            configs[node.name] = dump_documents(apply_patches(base, [*common, *extra, *own, *specific]))
            continue
        assert bundle is not None
        output = OutputType.CONTROLPLANE if controlplane else OutputType.WORKER
        configs[node.name] = generate(bundle, opts, output_types=[output], patches=[*common, *extra, *own],
                                      controlplane_patches=patches.controlplane, worker_patches=patches.worker,
                                      with_docs=False, with_examples=False).outputs[output]  # fmt: skip
    return configs
