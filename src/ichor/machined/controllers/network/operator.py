"""``network.OperatorSpecController``: runs the operators the OperatorSpecs name and publishes what they
learn as operator-layer specs, as Talos's does.

For every merged OperatorSpec ``dhcp4/<link>`` whose link exists (and is up, when ``requireUp``), a
:class:`~ichor.machined.dhcp4.DHCP4Client` keeps a lease on the link. The lease becomes specs in
namespace ``network-config`` with ids prefixed ``dhcp4/<link>/`` at layer ``operator``:

* an AddressSpec (``dhcp4/eth0/eth0/10.5.0.2/24``), and a LinkSpec when the server sets an MTU;
* RouteSpecs (protocol ``boot``, the operator's metric): the classless static routes (RFC 3442), or
  else a default route via the first router; an on-link route to a gateway outside the subnet;
* a HostnameSpec (hostname option, domain option), a ResolverSpec (DNS servers, search domains) and a
  TimeServerSpec (NTP servers).

The merge controllers weigh them against the other layers (a static address in the machine config
wins over the lease's). An OperatorSpec that goes (or whose link goes down) stops its client, which
releases the lease; its specs go with it. Registered only on a node with a network namespace of its
own: the client opens packet sockets on the link.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ichor.machined.controllers.network.config import route_spec_of
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, OutputKind, Phase, ResourceType
from ichor.machined.dhcp4 import DHCP4Client, Lease, TransportFactory, raw_transports
from ichor.machined.resources import (
    ADDRESS_SPECS,
    HOSTNAME_SPECS,
    LINK_SPECS,
    LINK_STATUSES,
    NETWORK_CONFIG_NAMESPACE,
    OPERATOR_SPECS,
    RESOLVER_SPECS,
    ROUTE_SPECS,
    TIME_SERVER_SPECS,
    AddressSpecSpec,
    ConfigLayer,
    HostnameSpecSpec,
    LinkSpecSpec,
    LinkStatusSpec,
    OperatorSpecSpec,
    ResolverSpecSpec,
    RouteProtocol,
    RouteSpecSpec,
    TimeServerSpecSpec,
)

__all__ = ["OperatorSpecController", "lease_specs"]

_OUTPUT_TYPES: tuple[ResourceType[Any], ...] = (
    ADDRESS_SPECS, LINK_SPECS, ROUTE_SPECS, HOSTNAME_SPECS, RESOLVER_SPECS, TIME_SERVER_SPECS,
)  # fmt: skip
_OPERATOR = ConfigLayer.OPERATOR
RESTART_AFTER = 5.0
"""Seconds before a client whose link could not be opened tries again."""


def _route(link: str, lease: Lease, metric: int, *, dst: str | None, gateway: str | None) -> RouteSpecSpec:
    spec = route_spec_of(link, network=dst, gateway=gateway, source=str(lease.address.ip), metric=metric,
                         layer=_OPERATOR)  # fmt: skip
    return RouteSpecSpec(**{**spec.__dict__, "protocol": RouteProtocol.BOOT})


def _routes(link: str, lease: Lease, metric: int) -> Iterator[RouteSpecSpec]:
    # RFC 3442: with classless static routes present, the router option is ignored.
    pairs = [(str(dst), str(gw)) for dst, gw in lease.classless_routes] or (
        [("0.0.0.0/0", str(lease.routers[0]))] if lease.routers else []
    )
    on_link: set[str] = set()
    for dst, gateway in pairs:
        gw_unspecified = gateway == "0.0.0.0"
        yield _route(link, lease, metric, dst=dst, gateway=None if gw_unspecified else gateway)
        outside = not gw_unspecified and ipaddress.IPv4Address(gateway) not in lease.address.network
        if outside and gateway not in on_link:
            on_link.add(gateway)
            yield _route(link, lease, metric, dst=f"{gateway}/32", gateway=None)


def lease_specs(spec: OperatorSpecSpec, lease: Lease) -> dict[ResourceType[Any], dict[str, Any]]:
    """The operator-layer specs a lease on ``spec.link_name`` stands for, by type, with their layered ids."""
    link, prefix, metric = spec.link_name, spec.id, spec.dhcp4.route_metric
    address = AddressSpecSpec(address=str(lease.address), link_name=link, family="inet4", layer=_OPERATOR)
    out: dict[ResourceType[Any], dict[str, Any]] = {t: {} for t in _OUTPUT_TYPES}
    out[ADDRESS_SPECS][f"{prefix}/{link}/{lease.address}"] = address
    if lease.mtu:
        out[LINK_SPECS][f"{prefix}/{link}"] = LinkSpecSpec(name=link, up=True, mtu=lease.mtu, layer=_OPERATOR)
    for route in _routes(link, lease, metric):
        out[ROUTE_SPECS][f"{prefix}/{route.id}"] = route
    if lease.hostname and not spec.dhcp4.skip_hostname_request:
        host, _, domain = lease.hostname.partition(".")
        out[HOSTNAME_SPECS][f"{prefix}/hostname"] = HostnameSpecSpec(
            hostname=host, domainname=lease.domain_name or domain, layer=_OPERATOR
        )
    search = lease.search_domains + tuple(
        d for d in (lease.domain_name,) if d and d not in lease.search_domains
    )
    if lease.dns_servers or search:
        out[RESOLVER_SPECS][f"{prefix}/resolvers"] = ResolverSpecSpec(
            dns_servers=tuple(str(s) for s in lease.dns_servers), search_domains=search, layer=_OPERATOR
        )
    if lease.ntp_servers:
        out[TIME_SERVER_SPECS][f"{prefix}/timeservers"] = TimeServerSpecSpec(
            time_servers=tuple(str(s) for s in lease.ntp_servers), layer=_OPERATOR
        )
    return out


def _link_ready(spec: OperatorSpecSpec, link: LinkStatusSpec | None) -> bool:
    if link is None or not link.hardware_addr:
        return False
    return not spec.require_up or (
        "UP" in link.flags.split(",") and link.operational_state in ("up", "unknown")
    )


class OperatorSpecController(Controller):
    name = "network.OperatorSpecController"
    inputs = (Input(OPERATOR_SPECS), Input(LINK_STATUSES))
    outputs = tuple(Output(t, OutputKind.SHARED, NETWORK_CONFIG_NAMESPACE) for t in _OUTPUT_TYPES)
    reads = "(DHCP servers on the node's links)"

    def __init__(
        self,
        transports: Callable[[str], TransportFactory] = raw_transports,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._transports = transports
        self._clock = clock
        self._sleep = sleep

    async def run(self, ctx: ControllerContext) -> None:
        leases: dict[str, tuple[OperatorSpecSpec, Lease]] = {}
        running: dict[str, tuple[OperatorSpecSpec, asyncio.Task[None]]] = {}
        try:
            while True:
                await ctx.changed()
                links = {r.id: r.spec for r in ctx.list(LINK_STATUSES)}
                wanted = {
                    r.id: r.spec for r in ctx.list(OPERATOR_SPECS)
                    if r.metadata.phase is Phase.RUNNING and r.spec.operator == "dhcp4"
                    and _link_ready(r.spec, links.get(r.spec.link_name))
                }  # fmt: skip
                for id, (spec, task) in list(running.items()):
                    if wanted.get(id) != spec or task.done():
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                        del running[id]
                        leases.pop(id, None)
                        ctx.logger.info("stopped operator", id=id)
                for id, spec in wanted.items():
                    if id not in running:
                        mac = bytes.fromhex(links[spec.link_name].hardware_addr.replace(":", ""))
                        task = asyncio.create_task(self._operate(ctx, spec, mac, leases))
                        running[id] = (spec, task)
                        ctx.logger.info("started operator", id=id)
                self._publish(ctx, leases)
        finally:
            for _, task in running.values():
                task.cancel()
            await asyncio.gather(*(task for _, task in running.values()), return_exceptions=True)

    async def _operate(self, ctx: ControllerContext, spec: OperatorSpecSpec, mac: bytes,
                       leases: dict[str, tuple[OperatorSpecSpec, Lease]]) -> None:  # fmt: skip
        def on_lease(lease: Lease | None) -> None:
            if lease is None:
                leases.pop(spec.id, None)
            else:
                ctx.logger.info(
                    "DHCP lease", id=spec.id, address=str(lease.address), server=str(lease.server)
                )
                leases[spec.id] = (spec, lease)
            ctx.wake()

        client = DHCP4Client(mac, self._transports(spec.link_name), clock=self._clock, sleep=self._sleep)
        while True:
            try:
                await client.run(on_lease)
            except OSError as err:
                ctx.logger.warning(f"DHCP on {spec.link_name}: {err}", id=spec.id)
                leases.pop(spec.id, None)
                ctx.wake()
                await self._sleep(RESTART_AFTER)

    def _publish(self, ctx: ControllerContext, leases: dict[str, tuple[OperatorSpecSpec, Lease]]) -> None:
        specs: dict[ResourceType[Any], dict[str, Any]] = {t: {} for t in _OUTPUT_TYPES}
        for spec, lease in leases.values():
            for rtype, by_id in lease_specs(spec, lease).items():
                specs[rtype].update(by_id)
        for rtype, by_id in specs.items():
            for id, value in by_id.items():
                ctx.modify(rtype, id, value, namespace=NETWORK_CONFIG_NAMESPACE)
            ctx.clean_up_outputs(rtype, set(by_id), namespace=NETWORK_CONFIG_NAMESPACE)
