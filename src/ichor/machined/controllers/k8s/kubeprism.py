"""Area ``k8s``, KubePrism: the node-local load balancer in front of the API servers.

MachineConfig + Members -> KubePrismEndpoints ``k8s-cluster`` (the cluster endpoint, the node's own
API server on a control plane, every control-plane member's addresses at its API server port);
MachineConfig (``machine.features.kubePrism``) + KubePrismEndpoints -> KubePrismConfigs
``k8s-loadbalancer-config``; KubePrismConfigs -> the running :class:`~ichor.machined.kubeprism.Balancer`
and KubePrismStatuses ``k8s-loadbalancer`` (healthy while any upstream is; the balancer wakes the
controller when that flips, where Talos polls every 5 s).

Where it listens: Talos listens on ``127.0.0.1`` and reaches its own API server at ``localhost``.
A node with a network namespace of its own (a container node) does the same. A process node
shares the host's loopback with every other node, so both use the node's own loopback address
(:attr:`Layout.address`) instead, as etcd does: two process nodes never fight over
``127.0.0.1:7445``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

from ichor.machined import kubeprism
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config, machine_type_of
from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    SkipReconcile,
    TransformController,
)
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    KUBEPRISM_CONFIG_ID,
    KUBEPRISM_CONFIGS,
    KUBEPRISM_ENDPOINTS,
    KUBEPRISM_ENDPOINTS_ID,
    KUBEPRISM_STATUSES,
    KUBEPRISM_STATUSES_ID,
    MEMBERS,
    KubePrismConfigSpec,
    KubePrismEndpoint,
    KubePrismEndpointsSpec,
    KubePrismStatusesSpec,
)
from ichor.machinery.constants import KUBEPRISM_PORT

__all__ = [
    "KubePrismController",
    "MakeBalancer",
    "kubeprism_config_controller",
    "kubeprism_controllers",
    "kubeprism_endpoints_controller",
]

_RETRY_AFTER = 10.0
_DEFAULT_API_SERVER_PORT = 6443


class MakeBalancer(Protocol):
    def __call__(
        self, host: str, port: int, *, log: kubeprism.Log, on_health_change: Callable[[], None]
    ) -> kubeprism.Balancer: ...


def _cluster_endpoint(endpoint: str) -> KubePrismEndpoint | None:
    """``https://host:port`` -> (host, port); a missing or unparsable port is 443, as in Talos."""
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return None
    try:
        port = parts.port or 443
    except ValueError:
        port = 443
    return KubePrismEndpoint(parts.hostname, port)


def kubeprism_endpoints_controller(layout: Layout) -> TransformController[KubePrismEndpointsSpec]:
    local_host = "localhost" if layout.own_netns else layout.address

    def derive(ctx: ControllerContext) -> dict[str, KubePrismEndpointsSpec]:
        config = active_config(ctx)
        if config.cluster is None or config.machine is None:
            return {}
        plane = config.cluster.control_plane
        endpoints: list[KubePrismEndpoint] = []
        cluster = _cluster_endpoint(plane.endpoint or "") if plane is not None else None
        if cluster is not None:
            endpoints.append(cluster)
        if machine_type_of(config).is_control_plane:
            port = plane.local_api_server_port if plane is not None else None
            endpoints.append(KubePrismEndpoint(local_host, port or _DEFAULT_API_SERVER_PORT))
        for member in ctx.list(MEMBERS):
            if member.spec.control_plane is None:
                continue
            endpoints.extend(
                KubePrismEndpoint(str(address), member.spec.control_plane.api_server_port)
                for address in member.spec.addresses
            )
        return {KUBEPRISM_ENDPOINTS_ID: KubePrismEndpointsSpec(tuple(endpoints))}

    return TransformController(
        "k8s.KubePrismEndpointsController",
        inputs=[ACTIVE_CONFIG, Input(MEMBERS)],
        output=KUBEPRISM_ENDPOINTS,
        map_inputs=derive,
    )


def kubeprism_config_controller(layout: Layout) -> TransformController[KubePrismConfigSpec]:
    host = "127.0.0.1" if layout.own_netns else layout.address

    def derive(ctx: ControllerContext) -> dict[str, KubePrismConfigSpec]:
        config = active_config(ctx)
        features = config.machine.features if config.machine is not None else None
        prism = features.kube_prism if features is not None else None
        if prism is None or not prism.enabled:
            return {}
        endpoints = ctx.get_or_none(KUBEPRISM_ENDPOINTS, KUBEPRISM_ENDPOINTS_ID)
        if endpoints is None:
            raise SkipReconcile
        port = prism.port or KUBEPRISM_PORT
        return {KUBEPRISM_CONFIG_ID: KubePrismConfigSpec(host, port, endpoints.spec.endpoints)}

    return TransformController(
        "k8s.KubePrismConfigController",
        inputs=[ACTIVE_CONFIG, Input(KUBEPRISM_ENDPOINTS, id=KUBEPRISM_ENDPOINTS_ID)],
        output=KUBEPRISM_CONFIGS,
        map_inputs=derive,
    )


class KubePrismController(Controller):
    """Runs the balancer the config asks for: started, re-bound when host or port change, given
    the new upstream list otherwise (established connections stay), stopped when the config goes."""

    name = "k8s.KubePrismController"
    inputs = (Input(KUBEPRISM_CONFIGS, id=KUBEPRISM_CONFIG_ID),)
    outputs = (Output(KUBEPRISM_STATUSES),)
    writes = "(TCP listener, KubePrism)"

    def __init__(self, make_balancer: MakeBalancer = kubeprism.Balancer) -> None:
        self._make_balancer = make_balancer
        self.balancer: kubeprism.Balancer | None = None
        self._listening: tuple[str, int] = ("", 0)

    async def run(self, ctx: ControllerContext) -> None:
        try:
            await self._loop(ctx)
        finally:
            await self._stop(ctx)

    async def _loop(self, ctx: ControllerContext) -> None:
        wait: float | None = None
        while True:
            await ctx.changed(timeout=wait)
            config = ctx.get_or_none(KUBEPRISM_CONFIGS, KUBEPRISM_CONFIG_ID)
            spec = config.spec if config is not None else None
            if self.balancer is not None and (spec is None or (spec.host, spec.port) != self._listening):
                await self._stop(ctx)
            wait = None
            if spec is not None:
                problems = await self._reconcile(ctx, spec)
                wait = ctx.waiting_on("KubePrism", problems, retry_after=_RETRY_AFTER)
            else:
                ctx.clear_waiting()
            self._publish(ctx)

    async def _reconcile(self, ctx: ControllerContext, spec: KubePrismConfigSpec) -> list[str]:
        if self.balancer is None:
            balancer = self._make_balancer(
                spec.host,
                spec.port,
                log=lambda message: ctx.logger.warning(message),
                on_health_change=ctx.wake,
            )
            try:
                await balancer.start()
            except OSError as err:
                return [
                    f"cannot listen on {spec.host}:{spec.port}: {err.strerror or err}; "
                    "choose a free port in machine.features.kubePrism.port"
                ]
            self.balancer, self._listening = balancer, (spec.host, spec.port)
            ctx.logger.info("KubePrism is enabled", endpoint=balancer.endpoint)
        return self.balancer.set_upstreams((e.host, e.port) for e in spec.endpoints)

    async def _stop(self, ctx: ControllerContext) -> None:
        balancer, self.balancer = self.balancer, None
        if balancer is not None:
            await balancer.close()
            ctx.logger.info("KubePrism is disabled")

    def _publish(self, ctx: ControllerContext) -> None:
        touched: set[str] = set()
        if self.balancer is not None:
            status = KubePrismStatusesSpec(host=self.balancer.endpoint, healthy=self.balancer.healthy())
            ctx.modify(KUBEPRISM_STATUSES, KUBEPRISM_STATUSES_ID, status)
            touched.add(KUBEPRISM_STATUSES_ID)
        ctx.clean_up_outputs(KUBEPRISM_STATUSES, touched)


def kubeprism_controllers(layout: Layout) -> list[Controller]:
    return [
        kubeprism_endpoints_controller(layout),
        kubeprism_config_controller(layout),
        KubePrismController(),
    ]
