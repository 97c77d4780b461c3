"""controllers/k8s/kubeprism.py: KubePrism endpoints, config and the running balancer."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path

from controller_helpers import ADDRESS, apply, config, run, running

from ichor.machined import kubeprism
from ichor.machined.controllers.k8s import kubeprism as area
from ichor.machined.cosi import WAIT_STATUSES, assert_no_resource, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    KUBEPRISM_CONFIGS,
    KUBEPRISM_ENDPOINTS,
    KUBEPRISM_STATUSES,
    MEMBERS,
    ControlPlaneSpec,
    KubePrismConfigSpec,
    KubePrismEndpoint,
    MemberSpec,
)

_PRISM = "  features: {kubePrism: {enabled: true, port: 7445}}\n"


def _member(node_id: str, *addresses: str, port: int | None = 6443) -> MemberSpec:
    return MemberSpec(
        node_id=node_id,
        addresses=tuple(ipaddress.ip_address(a) for a in addresses),
        machine_type="controlplane" if port else "worker",
        control_plane=ControlPlaneSpec(port) if port else None,
    )


def test_endpoints_are_the_cluster_endpoint_the_local_api_server_and_control_plane_members(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        container = Layout(tmp_path, "10.5.0.2", own_netns=True)
        async with running(*area.kubeprism_controllers(container)[:2]) as state:
            state.create(MEMBERS.new("cp-2", _member("cp-2", "10.5.0.3", "fd00::3", port=6444)))
            state.create(MEMBERS.new("w-1", _member("w-1", "10.5.0.9", port=None)))
            apply(state, config(extra_machine=_PRISM))
            expected = (
                KubePrismEndpoint("10.0.0.1", 6443),
                KubePrismEndpoint("localhost", 6443),
                KubePrismEndpoint("10.5.0.3", 6444),
                KubePrismEndpoint("fd00::3", 6444),
            )
            await assert_resource(
                state, KUBEPRISM_ENDPOINTS, "k8s-cluster", lambda r: r.spec.endpoints == expected
            )
            cfg = await assert_resource(state, KUBEPRISM_CONFIGS, "k8s-loadbalancer-config")
            assert cfg.spec == KubePrismConfigSpec("127.0.0.1", 7445, expected)
            # A worker has no API server of its own; a disabled KubePrism has no config.
            apply(state, config(type="worker", extra_machine=_PRISM))
            await assert_resource(
                state,
                KUBEPRISM_ENDPOINTS,
                "k8s-cluster",
                lambda r: r.spec.endpoints == (expected[0], *expected[2:]),
            )
            apply(state, config(type="worker", extra_machine="  features: {kubePrism: {enabled: false}}\n"))
            await assert_no_resource(state, KUBEPRISM_CONFIGS, "k8s-loadbalancer-config", timeout=2)

    run(main)


def test_a_process_node_listens_and_reaches_its_api_server_on_its_own_loopback_address(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with running(*area.kubeprism_controllers(Layout(tmp_path, ADDRESS))[:2]) as state:
            apply(state, config(extra_machine="  features: {kubePrism: {enabled: true}}\n"))
            cfg = await assert_resource(state, KUBEPRISM_CONFIGS, "k8s-loadbalancer-config")
            assert (cfg.spec.host, cfg.spec.port) == (ADDRESS, 7445)
            assert KubePrismEndpoint(ADDRESS, 6443) in cfg.spec.endpoints

    run(main)


def test_a_cluster_endpoint_without_a_port_means_443(tmp_path: Path) -> None:
    assert area._cluster_endpoint("https://cp.example.org") == KubePrismEndpoint("cp.example.org", 443)
    assert area._cluster_endpoint("https://cp.example.org:99999") == KubePrismEndpoint("cp.example.org", 443)
    assert area._cluster_endpoint("not a url") is None


def _balancer(
    host: str, port: int, *, log: kubeprism.Log, on_health_change: Callable[[], None]
) -> kubeprism.Balancer:
    return kubeprism.Balancer(host, port, log=log, on_health_change=on_health_change, health_interval=0.05)


def test_the_balancer_runs_while_configured_and_reports_its_health(tmp_path: Path) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"api\n")
        await writer.drain()
        writer.close()

    async def main() -> None:
        api = await asyncio.start_server(answer, "127.0.0.1", 0)
        api_port = api.sockets[0].getsockname()[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            prism_port = probe.getsockname()[1]
        controller = area.KubePrismController(_balancer)
        async with running(controller) as state:
            spec = KubePrismConfigSpec("127.0.0.1", prism_port, (KubePrismEndpoint("127.0.0.1", api_port),))
            state.create(KUBEPRISM_CONFIGS.new("k8s-loadbalancer-config", spec))
            await assert_resource(
                state, KUBEPRISM_STATUSES, "k8s-loadbalancer",
                lambda r: r.spec.healthy and r.spec.host == f"127.0.0.1:{prism_port}",
            )  # fmt: skip
            reader, writer = await asyncio.open_connection("127.0.0.1", prism_port)
            assert await reader.readline() == b"api\n"
            writer.close()
            # The API server goes away: the health checks find out and the status says so.
            api.close()
            await api.wait_closed()
            await assert_resource(state, KUBEPRISM_STATUSES, "k8s-loadbalancer", lambda r: not r.spec.healthy)
            # No config: the status goes and nothing listens any more.
            state.destroy("k8s", KUBEPRISM_CONFIGS, "k8s-loadbalancer-config")
            await assert_no_resource(state, KUBEPRISM_STATUSES, "k8s-loadbalancer", timeout=5)
            assert controller.balancer is None
            try:
                _reader, refused = await asyncio.open_connection("127.0.0.1", prism_port)
            except ConnectionRefusedError:
                pass
            else:
                refused.close()
                raise AssertionError("KubePrism still listens after its config went")

    run(main)


def test_a_port_in_use_is_a_wait_naming_the_config_key(tmp_path: Path) -> None:
    async def main() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            async with running(area.KubePrismController(_balancer)) as state:
                state.create(
                    KUBEPRISM_CONFIGS.new("k8s-loadbalancer-config", KubePrismConfigSpec("127.0.0.1", port))
                )
                await assert_resource(
                    state, WAIT_STATUSES, "k8s.KubePrismController",
                    lambda r: f"127.0.0.1:{port}" in r.spec.reason and "machine.features.kubePrism.port" in r.spec.reason,
                )  # fmt: skip
                await assert_no_resource(state, KUBEPRISM_STATUSES, "k8s-loadbalancer", timeout=1)

    run(main)


def test_garbage_endpoints_are_ignored_and_the_rest_balanced(tmp_path: Path) -> None:
    async def main() -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            prism_port = probe.getsockname()[1]
        controller = area.KubePrismController(_balancer)
        async with running(controller) as state:
            endpoints = (KubePrismEndpoint("bad host", 6443), KubePrismEndpoint("127.0.0.1", 70000))
            spec = KubePrismConfigSpec(
                "127.0.0.1", prism_port, (*endpoints, KubePrismEndpoint("127.0.0.1", 6443))
            )
            state.create(KUBEPRISM_CONFIGS.new("k8s-loadbalancer-config", spec))
            wait = await assert_resource(state, WAIT_STATUSES, "k8s.KubePrismController")
            assert "'bad host'" in wait.spec.reason and "70000" in wait.spec.reason
            assert controller.balancer is not None
            assert [str(u) for u in controller.balancer.upstreams] == ["127.0.0.1:6443"]

    run(main)


def test_a_control_plane_that_is_the_cluster_endpoint_is_one_upstream_of_the_balancer(tmp_path: Path) -> None:
    # The cluster endpoint is this control plane's own address (cluster create's default): Talos's
    # KubePrismEndpoints lists that address twice (as the endpoint and as a member) and Ichor's does
    # the same; the balancer holds each upstream once, so it is not health-checked or picked twice.
    async def main() -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            prism_port = probe.getsockname()[1]
        layout = Layout(tmp_path, "10.0.0.1", own_netns=True)
        controllers = [*area.kubeprism_controllers(layout)[:2], area.KubePrismController(_balancer)]
        async with running(*controllers) as state:
            state.create(MEMBERS.new("cp-1", _member("cp-1", "10.0.0.1")))
            prism = f"  features: {{kubePrism: {{enabled: true, port: {prism_port}}}}}\n"
            apply(state, config(extra_machine=prism))
            own, local = KubePrismEndpoint("10.0.0.1", 6443), KubePrismEndpoint("localhost", 6443)
            await assert_resource(
                state, KUBEPRISM_ENDPOINTS, "k8s-cluster", lambda r: r.spec.endpoints == (own, local, own)
            )
            await assert_resource(state, KUBEPRISM_STATUSES, "k8s-loadbalancer")
            balancer = controllers[2].balancer
            assert balancer is not None
            assert [str(u) for u in balancer.upstreams] == ["10.0.0.1:6443", "localhost:6443"]

    run(main)
