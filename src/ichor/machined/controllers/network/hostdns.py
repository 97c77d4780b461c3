"""Host DNS (Talos 1.7): a caching resolver on ``127.0.0.53`` in the node.

* ``network.HostDNSConfigController``: ``machine.features.hostDNS`` -> HostDNSConfig ``config``
  (``talosctl get hostdnsconfig``): enabled, the listen address ``127.0.0.53:53`` and, with
  ``forwardKubeDNSToHost``, the service address CoreDNS is to forward to (the tenth address of the
  first ``cluster.network.serviceSubnets``), recorded for the Kubernetes side;
* ``network.DNSResolveCacheController``: HostDNSConfig + ResolverStatus -> the forwarder of
  :mod:`ichor.machined.dnscache` on every listen address, UDP and TCP, forwarding to the resolvers
  (``talosctl get resolvers``) -> DNSResolveCaches ``udp-127.0.0.53:53``, ``tcp-127.0.0.53:53``.

Only a node with a network namespace of its own runs it: on a process node ``127.0.0.53:53`` is the
host's, so the config says ``enabled: false`` there whatever the machine config asks (and
``/etc/resolv.conf`` keeps the upstream resolvers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ichor.machined import dnscache
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.controllers.network.config import config_or_none, host_dns_service_address
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    DNS_RESOLVE_CACHES,
    HOST_DNS_CONFIG_ID,
    HOST_DNS_CONFIGS,
    RESOLVER_ID,
    RESOLVER_STATUSES,
    DNSResolveCacheSpec,
    HostDNSConfigSpec,
)

__all__ = [
    "HOST_DNS_ADDRESS",
    "DNSResolveCacheController",
    "host_dns_config_controller",
    "host_dns_controllers",
]

HOST_DNS_ADDRESS = "127.0.0.53"
_LISTEN = f"{HOST_DNS_ADDRESS}:53"
_RETRY_AFTER = 5.0
_BIND_POLL = 0.05

Serve = Callable[[dnscache.DNSCache, str, int, Callable[[int], None]], Coroutine[Any, Any, None]]


def host_dns_config_controller(layout: Layout) -> TransformController[HostDNSConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, HostDNSConfigSpec]:
        config = config_or_none(ctx)
        machine = config.machine if config is not None else None
        features = machine.features if machine is not None else None
        host_dns = features.host_dns if features is not None else None
        spec = HostDNSConfigSpec(listen_addresses=(_LISTEN,))
        if host_dns is None or config is None:
            return {HOST_DNS_CONFIG_ID: spec}
        service = ""
        listen: tuple[str, ...] = (_LISTEN,)
        if host_dns.forward_kube_dns_to_host:
            # on lo by network.AddressConfigController, as Talos's HostDNSConfigController puts it
            service = host_dns_service_address(config)
            listen = (*listen, f"{service}:53") if service else listen
        enabled = bool(host_dns.enabled) and layout.own_netns
        return {
            HOST_DNS_CONFIG_ID: HostDNSConfigSpec(
                enabled=enabled, listen_addresses=listen, service_host_dns_address=service
            )
        }

    return TransformController(
        "network.HostDNSConfigController", inputs=[ACTIVE_CONFIG], output=HOST_DNS_CONFIGS, map_inputs=derive
    )


def _upstreams(servers: tuple[str, ...]) -> list[dnscache.Upstream]:
    """The resolvers to forward to: never the host DNS itself (a loop)."""
    return [(server, 53) for server in servers if server != HOST_DNS_ADDRESS]


class DNSResolveCacheController(Controller):
    """Runs the forwarder while HostDNSConfig is enabled; its upstreams follow ResolverStatus."""

    name = "network.DNSResolveCacheController"
    inputs = (Input(HOST_DNS_CONFIGS, id=HOST_DNS_CONFIG_ID), Input(RESOLVER_STATUSES, id=RESOLVER_ID))
    outputs = (Output(DNS_RESOLVE_CACHES),)
    writes = "(DNS on 127.0.0.53:53 in the node)"

    def __init__(self, serve_udp: Serve = dnscache.serve_udp, serve_tcp: Serve = dnscache.serve_tcp) -> None:
        self._serve = {"udp": serve_udp, "tcp": serve_tcp}
        self.cache = dnscache.DNSCache()

    async def run(self, ctx: ControllerContext) -> None:
        listeners: dict[str, asyncio.Task[None]] = {}
        bound: set[str] = set()
        failures: dict[str, str] = {}
        try:
            while True:
                pending = set(listeners) - bound
                await ctx.changed(timeout=_BIND_POLL if pending else _RETRY_AFTER if failures else None)
                config = ctx.get_or_none(HOST_DNS_CONFIGS, HOST_DNS_CONFIG_ID)
                resolvers = ctx.get_or_none(RESOLVER_STATUSES, RESOLVER_ID)
                self.cache.upstreams = tuple(_upstreams(resolvers.spec.dns_servers if resolvers else ()))
                wanted: set[str] = set()
                if config is not None and config.spec.enabled:
                    for address in config.spec.listen_addresses:
                        wanted.update(f"{proto}-{address}" for proto in self._serve)
                for listener_id in set(listeners) - wanted:
                    listeners.pop(listener_id).cancel()
                    bound.discard(listener_id)
                failures = {}
                for listener_id in sorted(wanted):
                    task = listeners.get(listener_id)
                    if task is not None and task.done():
                        failures[listener_id] = _failure(task)
                        del listeners[listener_id]
                        bound.discard(listener_id)
                    elif task is None:
                        listeners[listener_id] = self._start(listener_id, bound)
                running = {i for i in bound if i in listeners}
                for listener_id in running:
                    ctx.modify(DNS_RESOLVE_CACHES, listener_id, DNSResolveCacheSpec(status="running"))
                ctx.clean_up_outputs(DNS_RESOLVE_CACHES, running)
                if failures:
                    reason = "; ".join(f"{k}: {v}" for k, v in sorted(failures.items()))
                    ctx.waiting("host DNS listening", reason, retry_after=_RETRY_AFTER)
                else:
                    ctx.clear_waiting()
        finally:
            for task in listeners.values():
                task.cancel()
            await asyncio.gather(*listeners.values(), return_exceptions=True)

    def _start(self, listener_id: str, bound: set[str]) -> asyncio.Task[None]:
        proto, _, address = listener_id.partition("-")
        host, _, port = address.rpartition(":")
        serve = self._serve[proto](self.cache, host, int(port), lambda _port: bound.add(listener_id))
        return asyncio.get_running_loop().create_task(serve)


def _failure(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "cancelled"
    err = task.exception()
    return str(err) or type(err).__name__ if err is not None else "stopped"


def host_dns_controllers(layout: Layout) -> list[Controller]:
    """Both controllers on every node; on a process node the config is never enabled, so nothing listens."""
    return [host_dns_config_controller(layout), DNSResolveCacheController()]
