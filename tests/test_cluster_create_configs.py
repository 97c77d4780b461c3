"""Every machine config ``talosctl cluster create`` generates passes ``talosctl validate --mode
container`` (both provisioners' nodes run in Talos's container mode), for control planes and workers,
with and without the Kubernetes flags; in-process, no node started."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.machinery.config import Mode, load_config, validate
from ichor.machinery.secrets import SecretsBundle
from ichor.machinery.yamlio import load_documents, to_plain
from ichor.provision._configs import CONTAINER, PROCESS, Patches, node_configs
from ichor.provision._record import ClusterRecord, NodeRecord

_BUNDLE = SecretsBundle.generate()


def _record(provisioner: str, **flags: Any) -> ClusterRecord:
    cidr = "10.5.0.0/24" if provisioner == CONTAINER else "127.5.0.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    record = ClusterRecord(name="c", cidr=cidr, state_dir="/nonexistent", provisioner=provisioner, **flags)
    record.nodes = [
        NodeRecord(
            "c-controlplane-1", "controlplane", f"{prefix}.2", "/nonexistent/cp1", mac="02:00:00:00:00:02"
        ),
        NodeRecord("c-worker-1", "worker", f"{prefix}.3", "/nonexistent/w1", mac="02:00:00:00:00:03"),
    ]
    return record


_NO_PATCHES = Patches([], [], [])

# The flags that shape the Kubernetes part of the configs (each a ClusterRecord field create sets).
_KUBERNETES_FLAGS: dict[str, Any] = {
    "kubernetes_version": "1.29.2",
    "registry_mirrors": ["docker.io=http://10.5.0.1:5000", "registry.k8s.io=http://10.5.0.1:5000"],
}

_CASES: list[tuple[str, dict[str, Any]]] = [
    (CONTAINER, {}),
    (PROCESS, {}),
    (CONTAINER, _KUBERNETES_FLAGS),
    (PROCESS, _KUBERNETES_FLAGS),
    (CONTAINER, {"static_addresses": True}),
]


def _configs(provisioner: str, flags: dict[str, Any]) -> dict[str, str]:
    return node_configs(_record(provisioner, **flags), _BUNDLE, [], _NO_PATCHES)


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
