"""Nodes made of the cluster-membership controllers in real runtimes, and a real discovery server
(127.44.1.x), for the tests of controllers/cluster/."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from ichor.discovery import AffiliateStore, DiscoveryServer
from ichor.machined.controllers import config as config_area
from ichor.machined.controllers import network
from ichor.machined.controllers.cluster import DiscoveryServiceController, cluster_controllers
from ichor.machined.cosi import EmptySpec, Registry, Runtime, State
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MACHINE_CONFIGS,
    MACHINE_RESET_SIGNALS,
    MEMBERS,
    MachineConfigSpec,
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
        for hostname in network.hostname_controllers(self.layout):
            self.runtime.register(hostname)
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
