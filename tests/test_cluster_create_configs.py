"""Every machine config ``talosctl cluster create`` generates passes ``talosctl validate --mode
container`` (both provisioners' nodes run in Talos's container mode), for control planes and workers,
with and without the Kubernetes flags; in-process, no node started."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision._cluster import cluster_patches
from ichor.provision._configs import CONTAINER, PROCESS, Patches, node_configs
from ichor.provision._record import ClusterRecord, NodeRecord

_BUNDLE = SecretsBundle.generate()


def _record(provisioner: str, **flags: Any) -> ClusterRecord:
    cidr = "10.5.0.0/24" if provisioner == CONTAINER else "127.5.0.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    record = ClusterRecord(name="c", cidr=cidr, state_dir="/nonexistent", provisioner=provisioner,
                           discovery_endpoint=f"http://{prefix}.1:3000/", **flags)  # fmt: skip
    record.nodes = [
        NodeRecord(
            "c-controlplane-1", "controlplane", f"{prefix}.2", "/nonexistent/cp1", mac="02:00:00:00:00:02"
        ),
        NodeRecord("c-worker-1", "worker", f"{prefix}.3", "/nonexistent/w1", mac="02:00:00:00:00:03"),
    ]
    if record.extra_cidr:
        for i, node in enumerate(record.nodes):
            node.extra_address = record.extra_cidr.rsplit(".", 1)[0] + f".{i + 2}"
    return record


_NO_PATCHES = Patches([], [], [])

# The flags that shape the Kubernetes part of the configs (each the ClusterRecord field create sets
# from its flag: --kubernetes-version, --registry-mirror, --dns-domain, --kubeprism-port,
# --custom-cni-url, --talos-version, --with-debug, --install-image, --registry-insecure-skip-verify,
# --endpoint).
_KUBERNETES_FLAGS: dict[str, Any] = {
    "kubernetes_version": "1.29.2",
    "registry_mirrors": ["docker.io=http://10.5.0.1:5000", "registry.k8s.io=http://10.5.0.1:5000"],
    "dns_domain": "example.local",
    "kube_prism_port": 7446,
    "custom_cni_url": "http://10.5.0.1/cni.yaml",
    "talos_version": "v1.7",
    "debug": True,
    "install_image": "ghcr.io/siderolabs/installer:v1.7.6",
    "registry_insecure": ["10.5.0.1:5000"],
    "endpoint": "10.5.0.9",
}

_CASES: list[tuple[str, dict[str, Any]]] = [
    (CONTAINER, {}),
    (PROCESS, {}),
    (CONTAINER, _KUBERNETES_FLAGS),
    (PROCESS, _KUBERNETES_FLAGS),
    (CONTAINER, {"static_addresses": True, "extra_cidr": "10.6.0.0/24"}),
    (CONTAINER, {"vip": "10.5.0.50", "kube_prism_port": 0}),
    (CONTAINER, {"discovery": False, "static_addresses": True, "vip": "10.5.0.50"}),
    (PROCESS, {"discovery": False}),
]


def _configs(provisioner: str, flags: dict[str, Any]) -> dict[str, str]:
    """What create gives each node: its own patches first (:func:`cluster_patches`), then the node's."""
    record = _record(provisioner, **flags)
    return node_configs(record, _BUNDLE, cluster_patches(record), _NO_PATCHES)


@pytest.mark.parametrize(
    ("provisioner", "flags"),
    _CASES,
    ids=lambda v: str(v) if isinstance(v, str) else ",".join(v) or "defaults",
)
def test_every_generated_config_validates_in_container_mode(provisioner: str, flags: dict[str, Any]) -> None:
    configs = _configs(provisioner, flags)
    assert set(configs) == {"c-controlplane-1", "c-worker-1"}
    for name, text in configs.items():
        result = validate(load_config(text, source=name), Mode.CONTAINER)
        assert result.errors == [], f"{name} ({provisioner}, {flags}): {result.errors}"


@pytest.mark.parametrize("provisioner", [CONTAINER, PROCESS])
def test_host_dns_forwards_kube_dns_to_the_host_as_talos_docker_nodes_do(provisioner: str) -> None:
    for name, text in _configs(provisioner, {}).items():
        machine = to_plain(load_documents(text, source=name)[0])["machine"]
        assert machine["features"]["hostDNS"] == {"enabled": True, "forwardKubeDNSToHost": True}, name


def test_a_config_without_it_is_what_validate_refuses() -> None:
    """The check above can fail: the same config with the key taken out is refused, with Talos's text."""
    from ichor.machinery.patch import load_patches

    drop = load_patches(['[{"op": "remove", "path": "/machine/features/hostDNS/forwardKubeDNSToHost"}]'])
    record = _record(CONTAINER)
    text = node_configs(record, _BUNDLE, drop, _NO_PATCHES)["c-worker-1"]
    result = validate(load_config(text, source="worker"), Mode.CONTAINER)
    assert [e.split(": ", 1)[1] for e in result.errors] == [
        "feature HostDNS should forward kube-dns to host in container mode "
        "(.machine.features.hostDNS.forwardKubeDNSToHost)"
    ]
