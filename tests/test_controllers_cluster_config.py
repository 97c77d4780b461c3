"""controllers/cluster/config.py: the node identity, the discovery config (Talos's rules) and cluster info."""

from __future__ import annotations

import asyncio
import base64
import stat
from pathlib import Path

import pytest
from discovery_helpers import Node, running, v1alpha1

from ichor.machined.controllers.cluster import discovery_config_of, new_node_id
from ichor.machined.cosi import Registry, WaitingFor, assert_resource, resource_to_plain
from ichor.machined.platform import Layout
from ichor.machined.resources import DISCOVERY_CONFIGS, IDENTITIES, register_node_types


def test_types_resolve_by_talos_aliases_with_talos_columns() -> None:
    registry = Registry()
    register_node_types(registry)
    for name, type_name in [
        ("members", "Members.cluster.talos.dev"),
        ("affiliates", "Affiliates.cluster.talos.dev"),
        ("identities", "Identities.cluster.talos.dev"),
        ("discoveryconfig", "DiscoveryConfigs.cluster.talos.dev"),
    ]:
        assert registry.lookup(name).spec.type == type_name
    assert registry.lookup("members").column_names() == ["Hostname", "Machine Type", "OS", "Addresses"]
    assert registry.lookup("affiliates").column_names() == ["Hostname", "Machine Type", "Addresses"]
    assert registry.lookup("identities").column_names() == ["ID"]
    assert registry.lookup("discoveryconfig").sensitive
    assert registry.lookup("discoveryconfig").spec.default_namespace == "config"
    assert {"cluster", "cluster-raw", "controlplane"} <= set(registry.namespaces)


def test_node_ids_are_43_base62_characters_and_differ() -> None:
    ids = {new_node_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 43 and i.isalnum() and i.isascii() for i in ids)


def test_discovery_config_follows_talos_rules() -> None:
    spec = discovery_config_of(v1alpha1(endpoint="http://127.44.1.1/"))
    assert spec.registry_service_enabled and not spec.registry_kubernetes_enabled
    assert (spec.service_endpoint, spec.service_endpoint_insecure) == ("127.44.1.1:80", True)
    assert spec.service_encryption_key == bytes(range(32)) and spec.service_cluster_id == "cluster-one"
    https = discovery_config_of(v1alpha1(endpoint="https://discovery.example/"))
    assert (https.service_endpoint, https.service_endpoint_insecure) == ("discovery.example:443", False)
    v6 = discovery_config_of(v1alpha1(endpoint="http://[fd00::1]:3000/"))
    assert v6.service_endpoint == "[fd00::1]:3000"
    off = discovery_config_of(v1alpha1(enabled=False))
    assert not off.discovery_enabled and not off.registry_service_enabled and not off.service_encryption_key
    plain = resource_to_plain(DISCOVERY_CONFIGS.new("cluster", spec))["spec"]
    assert list(plain) == [
        "discoveryEnabled", "registryKubernetesEnabled", "registryServiceEnabled", "serviceEndpoint",
        "serviceEndpointInsecure", "serviceEncryptionKey", "serviceClusterID",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"endpoint": "discovery.example"}, "cluster.discovery.registries.service.endpoint"),
        ({"endpoint": "http://host:notaport/"}, "is not a URL"),
        ({"secret": "not base64!"}, "cluster.secret is not valid base64"),
        ({"secret": base64.b64encode(b"short").decode()}, "cluster.secret decodes to 5 bytes"),
    ],
)
def test_a_bad_discovery_setting_is_a_wait_naming_the_key(kwargs: dict[str, str], reason: str) -> None:
    with pytest.raises(WaitingFor) as info:
        discovery_config_of(v1alpha1(**kwargs))
    assert reason in info.value.reason


def test_node_identity_is_kept_in_state_across_reboots_and_gone_after_a_wipe(tmp_path: Path) -> None:
    async def boot() -> str:
        node = Node(tmp_path, "127.44.1.9")
        async with running(node):
            identity = await assert_resource(node.state, IDENTITIES, "local")
            return identity.spec.node_id

    first = asyncio.run(asyncio.wait_for(boot(), 10))
    file = Layout(root=tmp_path, address="127.44.1.9").node_identity_file
    assert file.read_text() == f"nodeId: {first}\n"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert asyncio.run(asyncio.wait_for(boot(), 10)) == first  # reboot
    file.unlink()  # reset wipes STATE
    second = asyncio.run(asyncio.wait_for(boot(), 10))
    assert second != first and file.read_text() == f"nodeId: {second}\n"
    file.write_text("nodeId: [not, an, id]\n")  # damaged: replaced, never fatal
    third = asyncio.run(asyncio.wait_for(boot(), 10))
    assert third not in (first, second) and len(third) == 43
