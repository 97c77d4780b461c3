"""Cluster membership controllers in real cosi runtimes against a real discovery server (127.44.1.x)."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ichor.discovery import AffiliateStore, DiscoveryServer, RemoteAffiliate
from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import network
from ichor.machined.controllers.cluster import (
    OPERATING_SYSTEM,
    DiscoveryServiceController,
    affiliate_from_pb,
    affiliate_to_pb,
    cluster_controllers,
    discovery_config_of,
    new_node_id,
)
from ichor.machined.cosi import (
    EmptySpec,
    Registry,
    Runtime,
    State,
    WaitingFor,
    assert_no_resource,
    assert_resource,
    resource_to_plain,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    AFFILIATES,
    DISCOVERY_CONFIGS,
    DISCOVERY_STATUSES,
    ENDPOINTS,
    IDENTITIES,
    INFOS,
    MACHINE_CONFIGS,
    MACHINE_RESET_SIGNALS,
    MEMBERS,
    NODE_ADDRESSES,
    RAW_NAMESPACE,
    AffiliateSpec,
    MachineConfigSpec,
    NodeAddressSpec,
    register_node_types,
)
from ichor.machinery.config import Config

SERVER_HOST = "127.44.1.1"
SECRET = base64.b64encode(bytes(range(32))).decode()

CONFIG = """\
version: v1alpha1
machine:
    type: {type}
    network:
        hostname: {hostname}
cluster:
    id: {cluster_id}
    secret: {secret}
    clusterName: demo
    controlPlane:
        endpoint: https://127.44.1.2:6443
    discovery:
        enabled: {enabled}
        registries:
            kubernetes:
                disabled: true
            service:
                endpoint: {endpoint}
"""


def config_text(
    *,
    type: str = "controlplane",
    hostname: str = "cp-1",
    endpoint: str = "http://127.44.1.1:3000/",
    secret: str = SECRET,
    enabled: bool = True,
    cluster_id: str = "cluster-one",
) -> str:
    return CONFIG.format(
        type=type, hostname=hostname, endpoint=endpoint, secret=secret, enabled=str(enabled).lower(),
        cluster_id=cluster_id,
    )  # fmt: skip


def v1alpha1(**kwargs: object) -> Config:
    config = MachineConfigSpec(config_text(**kwargs)).v1alpha1  # type: ignore[arg-type]
    assert config is not None
    return config


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 30))


class Node:
    def __init__(self, root: Path, address: str) -> None:
        self.layout = Layout(root=root, address=address)
        self.state = State()
        registry = Registry()
        register_node_types(registry)
        self.runtime = Runtime(self.state, registry=registry)
        self.runtime.register(config_area.machine_type_controller())
        self.runtime.register(network.hostname_controller(self.layout))
        self.controllers = cluster_controllers(self.layout)
        for controller in self.controllers:
            self.runtime.register(controller)
        self.discovery = next(c for c in self.controllers if isinstance(c, DiscoveryServiceController))

    def apply(self, text: str) -> None:
        existing = self.state.list("config", MACHINE_CONFIGS)
        if existing:
            self.state.update(existing[0].with_spec(MachineConfigSpec(text)))
        else:
            self.state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(text)))

    def request_reset(self) -> None:
        """What the reset sequence does first: the MachineResetSignal."""
        self.state.create(MACHINE_RESET_SIGNALS.new("machine", EmptySpec()))

    def member_names(self) -> list[str]:
        return sorted(r.id for r in self.state.list("cluster", MEMBERS))


@asynccontextmanager
async def running(*nodes: Node) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(n.runtime.run()) for n in nodes]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@asynccontextmanager
async def discovery_server() -> AsyncIterator[DiscoveryServer]:
    server = DiscoveryServer(AffiliateStore(), gc_interval=3600)
    await server.start(SERVER_HOST, 0)
    try:
        yield server
    finally:
        await server.close()


# -- types and pure functions -----------------------------------------------------------------


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


def test_affiliate_survives_the_wire_encoding() -> None:
    spec = AffiliateSpec(
        node_id="n1",
        addresses=(ipaddress.ip_address("10.5.0.2"), ipaddress.ip_address("fd00::2")),
        hostname="cp-1.lab",
        nodename="cp-1",
        operating_system=OPERATING_SYSTEM,
        machine_type="controlplane",
    )
    back = affiliate_from_pb(RemoteAffiliate("n1", affiliate_to_pb(spec)))
    assert back == spec
    odd = affiliate_to_pb(spec)
    odd.machine_type = "toaster"
    odd.addresses.append(b"\x01\x02")
    assert affiliate_from_pb(RemoteAffiliate("n1", odd)).machine_type == "unknown"
    assert affiliate_from_pb(RemoteAffiliate("n1", odd)).addresses == spec.addresses


# -- controllers in a runtime -----------------------------------------------------------------


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


def test_local_affiliate_info_and_member_without_a_server(tmp_path: Path) -> None:
    async def main() -> None:
        node = Node(tmp_path, "127.44.1.9")
        async with running(node):
            # Port 9 on a loopback address nobody serves: the client retries in the background.
            node.apply(config_text(endpoint="http://127.44.1.250:9/"))
            identity = await assert_resource(node.state, IDENTITIES, "local")
            node_id = identity.spec.node_id
            local = await assert_resource(node.state, AFFILIATES, node_id)
            assert local.spec.hostname == "cp-1" and local.spec.nodename == "cp-1"
            assert local.spec.addresses == (ipaddress.ip_address("127.44.1.9"),)
            assert (
                local.spec.operating_system == OPERATING_SYSTEM and local.spec.machine_type == "controlplane"
            )
            assert local.spec.control_plane is not None and local.spec.control_plane.api_server_port == 6443
            await assert_resource(node.state, MEMBERS, "cp-1", lambda r: r.spec.node_id == node_id)
            await assert_resource(
                node.state, ENDPOINTS, "discovery",
                lambda r: r.spec.addresses == (ipaddress.ip_address("127.44.1.9"),),
            )  # fmt: skip
            routed = NodeAddressSpec((ipaddress.ip_interface("10.44.0.9/24"),))
            node.state.create(NODE_ADDRESSES.new("routed", routed))
            await assert_resource(
                node.state,
                AFFILIATES,
                node_id,
                lambda r: r.spec.addresses == (ipaddress.ip_address("10.44.0.9"),),
            )
            info = await assert_resource(node.state, INFOS, "current")
            assert (info.spec.cluster_id, info.spec.cluster_name) == ("cluster-one", "demo")
            node.apply(config_text(enabled=False, endpoint="http://127.44.1.250:9/"))
            await assert_no_resource(node.state, MEMBERS, "cp-1")
            await assert_no_resource(node.state, AFFILIATES, node_id)

    run(main)


def test_two_nodes_see_each_other_as_members_and_a_reset_removes_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with discovery_server() as server:
            endpoint = f"http://{server.endpoint}/"
            cp = Node(tmp_path / "cp", "127.44.1.2")
            worker = Node(tmp_path / "w", "127.44.1.3")
            async with running(cp, worker):
                cp.apply(config_text(hostname="cp-1", endpoint=endpoint))
                worker.apply(config_text(type="worker", hostname="worker-1", endpoint=endpoint))
                for node in (cp, worker):
                    await assert_resource(node.state, MEMBERS, "worker-1", timeout=10)
                    await assert_resource(node.state, MEMBERS, "cp-1", timeout=10)
                assert cp.member_names() == worker.member_names() == ["cp-1", "worker-1"]
                seen = worker.state.get("cluster", MEMBERS, "cp-1")
                assert seen.spec.machine_type == "controlplane"
                assert seen.spec.addresses == (ipaddress.ip_address("127.44.1.2"),)
                assert seen.spec.operating_system == OPERATING_SYSTEM
                # Control plane endpoints: only the control plane node's address, on both nodes.
                for node in (cp, worker):
                    await assert_resource(
                        node.state, ENDPOINTS, "discovery",
                        lambda r: r.spec.addresses == (ipaddress.ip_address("127.44.1.2"),),
                    )  # fmt: skip
                raw = cp.state.list(RAW_NAMESPACE, AFFILIATES)
                assert [r.id for r in raw] == [
                    f"service/{worker.state.list('cluster', IDENTITIES)[0].spec.node_id}"
                ]

                await assert_resource(worker.state, DISCOVERY_STATUSES, "local", lambda r: r.spec.published)
                worker.request_reset()
                await assert_resource(
                    worker.state, DISCOVERY_STATUSES, "local", lambda r: r.spec.left, timeout=10
                )
                await assert_no_resource(cp.state, MEMBERS, "worker-1", timeout=10)
                assert cp.member_names() == ["cp-1"]
                assert len(server.store.list("cluster-one")) == 1

    run(main)


def test_a_node_with_another_cluster_secret_sees_no_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with discovery_server() as server:
            endpoint = f"http://{server.endpoint}/"
            a = Node(tmp_path / "a", "127.44.1.4")
            b = Node(tmp_path / "b", "127.44.1.5")
            async with running(a, b):
                a.apply(config_text(hostname="a", endpoint=endpoint))
                b.apply(
                    config_text(
                        hostname="b", endpoint=endpoint, secret=base64.b64encode(os.urandom(32)).decode()
                    )
                )
                await assert_resource(a.state, MEMBERS, "a")
                await assert_resource(b.state, MEMBERS, "b")
                # Both are on the server, neither can read the other.
                while len(server.store.list("cluster-one")) < 2:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.2)
                assert a.member_names() == ["a"] and b.member_names() == ["b"]
                assert a.runtime.status(a.discovery.name).restarts == 0

    run(main)
