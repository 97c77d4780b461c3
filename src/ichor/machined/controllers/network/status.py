"""What the node's kernel has, as resources: links, addresses, routes, node addresses, readiness.

* ``network.LinkStatusController`` / ``AddressStatusController`` / ``RouteStatusController``:
  the links, addresses and routes of the network namespace machined runs in (``talosctl get
  links/addresses/routes``), re-read on every netlink event (no polling). On a process node the
  adapter is :class:`~ichor.machined.netlink.ProcessNodeView`: its address on ``lo``, no routes.
* ``network.NodeAddressController``: NodeAddresses ``default``, ``current``, ``routed``,
  ``accumulative``. A process node has exactly its one loopback address; a node with a network of
  its own has the global addresses of its links that are up (loopback and link-local left out).
* ``network.StatusController``: NetworkStatus ``status``: addresses (a current node address),
  connectivity (a default route; a process node uses the host's), hostname (a HostnameStatus),
  etcfiles (EtcFileStatuses ``hosts`` and ``resolv.conf``: both files written).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, TypeVar

from ichor.machined.cosi import (
    Controller,
    ControllerContext,
    Input,
    Output,
    ResourceType,
    TransformController,
)
from ichor.machined.netlink import Netlink
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_STATUSES,
    ETC_FILE_STATUSES,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    LINK_STATUSES,
    NETWORK_STATUS_ID,
    NETWORK_STATUSES,
    NODE_ADDRESS_ACCUMULATIVE_ID,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESS_DEFAULT_ID,
    NODE_ADDRESS_FILTERS,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    ROUTE_STATUSES,
    AddressScope,
    AddressStatusSpec,
    IPPrefix,
    LinkStatusSpec,
    NetworkStatusSpec,
    NodeAddressSpec,
    RouteStatusSpec,
    filtered_node_address_id,
)

__all__ = [
    "KernelObserver",
    "address_status_controller",
    "link_status_controller",
    "node_address_controller",
    "route_status_controller",
    "status_controller",
]

S = TypeVar("S")


class KernelObserver(Controller, Generic[S]):
    """Publishes one kind of kernel object, read again whenever netlink reports a change."""

    def __init__(self, name: str, output: ResourceType[S], netlink: Netlink,
                 read: Callable[[Netlink], Awaitable[Mapping[str, S]]]) -> None:  # fmt: skip
        self.name = name
        self.reads = "(the kernel, netlink events)"
        self.outputs = (Output(output),)
        self._output = output
        self._netlink = netlink
        self._read = read

    async def run(self, ctx: ControllerContext) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._follow(ctx))
            while True:
                await ctx.changed()
                specs = await self._read(self._netlink)
                for id, spec in specs.items():
                    ctx.modify(self._output, id, spec)
                ctx.clean_up_outputs(self._output, set(specs))

    async def _follow(self, ctx: ControllerContext) -> None:
        async for _ in self._netlink.changes():
            ctx.wake()


async def _links(netlink: Netlink) -> Mapping[str, LinkStatusSpec]:
    return await netlink.links()


async def _addresses(netlink: Netlink) -> Mapping[str, AddressStatusSpec]:
    return {f"{a.link_name}/{a.address}": a for a in await netlink.addresses()}


async def _routes(netlink: Netlink) -> Mapping[str, RouteStatusSpec]:
    return {r.id: r for r in await netlink.routes()}


def link_status_controller(netlink: Netlink) -> KernelObserver[LinkStatusSpec]:
    return KernelObserver("network.LinkStatusController", LINK_STATUSES, netlink, _links)


def address_status_controller(netlink: Netlink) -> KernelObserver[AddressStatusSpec]:
    return KernelObserver("network.AddressStatusController", ADDRESS_STATUSES, netlink, _addresses)


def route_status_controller(netlink: Netlink) -> KernelObserver[RouteStatusSpec]:
    return KernelObserver("network.RouteStatusController", ROUTE_STATUSES, netlink, _routes)


_NODE_ADDRESS_IDS = (NODE_ADDRESS_DEFAULT_ID, NODE_ADDRESS_CURRENT_ID, NODE_ADDRESS_ROUTED_ID,
                     NODE_ADDRESS_ACCUMULATIVE_ID)  # fmt: skip


def _usable(address: AddressStatusSpec, link: LinkStatusSpec | None) -> bool:
    ip = address.address.ip
    return (
        link is not None and link.operational_state in ("up", "unknown") and "UP" in link.flags.split(",")
        and address.scope is AddressScope.GLOBAL and not ip.is_loopback and not ip.is_link_local
    )  # fmt: skip


def _with_filtered(ctx: ControllerContext, sets: dict[str, NodeAddressSpec]) -> dict[str, NodeAddressSpec]:
    """``sets`` plus each of current/routed/accumulative seen through every NodeAddressFilter
    (``routed-no-k8s`` ...), as Talos publishes them."""
    out = dict(sets)
    for found in ctx.list(NODE_ADDRESS_FILTERS):
        for kind in (NODE_ADDRESS_CURRENT_ID, NODE_ADDRESS_ROUTED_ID, NODE_ADDRESS_ACCUMULATIVE_ID):
            if kind in sets:
                kept = tuple(a for a in sets[kind].addresses if found.spec.keeps(a))
                out[filtered_node_address_id(kind, found.id)] = NodeAddressSpec(kept)
    return out


def node_address_controller(layout: Layout) -> TransformController[NodeAddressSpec]:
    if not layout.own_netns:
        prefix = ipaddress.ip_interface(f"{layout.address}/{32 if ':' not in layout.address else 128}")

        def fixed(ctx: ControllerContext) -> dict[str, NodeAddressSpec]:
            return _with_filtered(ctx, dict.fromkeys(_NODE_ADDRESS_IDS, NodeAddressSpec((prefix,))))

        return TransformController("network.NodeAddressController", inputs=[Input(NODE_ADDRESS_FILTERS)],
                                   output=NODE_ADDRESSES, map_inputs=fixed)  # fmt: skip

    seen: dict[IPPrefix, None] = {}

    def derive(ctx: ControllerContext) -> dict[str, NodeAddressSpec]:
        links = {r.id: r.spec for r in ctx.list(LINK_STATUSES)}
        current = sorted(
            {
                a.spec.address
                for a in ctx.list(ADDRESS_STATUSES)
                if _usable(a.spec, links.get(a.spec.link_name))
            },
            key=lambda p: (p.version, p.ip),
        )
        seen.update(dict.fromkeys(current))
        result = {NODE_ADDRESS_CURRENT_ID: NodeAddressSpec(tuple(current)),
                  NODE_ADDRESS_ROUTED_ID: NodeAddressSpec(tuple(current)),
                  NODE_ADDRESS_ACCUMULATIVE_ID: NodeAddressSpec(tuple(sorted(seen, key=lambda p: (p.version, p.ip))))}  # fmt: skip
        if current:
            result[NODE_ADDRESS_DEFAULT_ID] = NodeAddressSpec((current[0],))
        return _with_filtered(ctx, result)

    return TransformController(
        "network.NodeAddressController",
        inputs=[Input(ADDRESS_STATUSES), Input(LINK_STATUSES), Input(NODE_ADDRESS_FILTERS)],
        output=NODE_ADDRESSES, map_inputs=derive,
    )  # fmt: skip


def status_controller(layout: Layout) -> TransformController[NetworkStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, NetworkStatusSpec]:
        current = ctx.get_or_none(NODE_ADDRESSES, NODE_ADDRESS_CURRENT_ID)
        default_route = any(not r.spec.dst and r.spec.table == "main" for r in ctx.list(ROUTE_STATUSES))
        return {NETWORK_STATUS_ID: NetworkStatusSpec(
            address_ready=current is not None and bool(current.spec.addresses),
            connectivity_ready=default_route or not layout.own_netns,
            hostname_ready=ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID) is not None,
            etc_files_ready={"hosts", "resolv.conf"} <= {r.id for r in ctx.list(ETC_FILE_STATUSES)},
        )}  # fmt: skip

    return TransformController(
        "network.StatusController",
        inputs=[Input(NODE_ADDRESSES, id=NODE_ADDRESS_CURRENT_ID), Input(ROUTE_STATUSES),
                Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID), Input(ETC_FILE_STATUSES)],
        output=NETWORK_STATUSES, map_inputs=derive,
    )  # fmt: skip
