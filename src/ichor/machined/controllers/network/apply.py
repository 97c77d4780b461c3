"""Merged specs -> the kernel: links up with their MTU, addresses, routes, over netlink.

* ``network.LinkSpecController``: brings links up (or down) and sets their MTU; a link that does
  not exist yet is waited for (it is retried when the links change). Links are never deleted and
  an MTU is not restored when its spec goes: Ichor creates no links yet.
* ``network.AddressSpecController`` / ``network.RouteSpecController``: add what the specs name and
  remove what they added that no spec names any more (or that changed); what was there before and
  is not specified is left alone.

Registered only on a node with a network namespace of its own (``Layout.own_netns``): a process node
shares the host's links, addresses and routes, which Ichor must never change. What the controllers
added is remembered for the life of machined, across restarts of the controller.
"""

from __future__ import annotations

import abc
from typing import Generic, TypeVar

from ichor.machined.cosi import Controller, ControllerContext, Input, Phase, ResourceType
from ichor.machined.netlink import Netlink, NetlinkError
from ichor.machined.resources import (
    ADDRESS_SPECS,
    ADDRESS_STATUSES,
    LINK_SPECS,
    LINK_STATUSES,
    ROUTE_SPECS,
    ROUTE_STATUSES,
    AddressSpecSpec,
    LinkSpecSpec,
    RouteSpecSpec,
)

__all__ = ["AddressSpecController", "LinkSpecController", "RouteSpecController"]

S = TypeVar("S")

RETRY_AFTER = 5.0
"""Seconds until a refused change is tried again (inputs changing retry it sooner)."""


class _SpecApplier(Controller, Generic[S]):
    """Applies every merged spec of one type; undoes what it applied and is no longer specified."""

    spec_type: ResourceType[S]
    what: str
    writes = "(the kernel, over netlink)"

    def __init__(self, netlink: Netlink) -> None:
        self._netlink = netlink
        self._applied: dict[str, S] = {}

    @abc.abstractmethod
    async def _present(self, wanted: dict[str, S]) -> set[str]:
        """Ids of the wanted specs the kernel already satisfies."""

    @abc.abstractmethod
    async def _apply(self, spec: S) -> None: ...

    async def _undo(self, spec: S) -> None:
        return None

    async def run(self, ctx: ControllerContext) -> None:
        retry_after: float | None = None
        while True:
            await ctx.changed(timeout=retry_after)
            wanted = {r.id: r.spec for r in ctx.list(self.spec_type) if r.metadata.phase is Phase.RUNNING}
            refused: list[str] = []
            for id, spec in list(self._applied.items()):
                if wanted.get(id) == spec:
                    continue
                try:
                    await self._undo(spec)
                    del self._applied[id]
                    ctx.logger.info(f"removed {self.what}", id=id)
                except NetlinkError as err:
                    refused.append(f"removing {self.what} {id}: {err}")
            present = await self._present(wanted)
            for id, spec in wanted.items():
                try:
                    if id not in present:
                        await self._apply(spec)
                        ctx.logger.info(f"applied {self.what}", id=id)
                    self._applied[id] = spec
                except NetlinkError as err:
                    refused.append(f"{self.what} {id}: {err}" + (f" ({err.hint})" if err.hint else ""))
            if refused:
                for line in refused:
                    ctx.logger.warning(line)
                ctx.waiting(f"{self.what}s applied", "; ".join(refused), retry_after=RETRY_AFTER)
                retry_after = RETRY_AFTER
            else:
                ctx.clear_waiting()
                retry_after = None


class LinkSpecController(_SpecApplier[LinkSpecSpec]):
    name = "network.LinkSpecController"
    spec_type = LINK_SPECS
    what = "link"
    inputs = (Input(LINK_SPECS), Input(LINK_STATUSES))

    async def _present(self, wanted: dict[str, LinkSpecSpec]) -> set[str]:
        links = await self._netlink.links()
        return {
            name for name, link in links.items()
            if (spec := wanted.get(name)) is not None and ("UP" in link.flags.split(",")) == spec.up
            and (not spec.mtu or link.mtu == spec.mtu)
        }  # fmt: skip

    async def _apply(self, spec: LinkSpecSpec) -> None:
        links = await self._netlink.links()
        link = links.get(spec.name)
        if link is None:
            raise NetlinkError(
                f"link {spec.name!r} does not exist", hint="name a link of `talosctl get links`"
            )
        is_up = "UP" in link.flags.split(",")
        await self._netlink.set_link(spec.name, up=spec.up if is_up != spec.up else None,
                                     mtu=spec.mtu if spec.mtu and spec.mtu != link.mtu else None)  # fmt: skip


class AddressSpecController(_SpecApplier[AddressSpecSpec]):
    name = "network.AddressSpecController"
    spec_type = ADDRESS_SPECS
    what = "address"
    inputs = (Input(ADDRESS_SPECS), Input(LINK_STATUSES), Input(ADDRESS_STATUSES))

    async def _present(self, wanted: dict[str, AddressSpecSpec]) -> set[str]:
        return {f"{a.link_name}/{a.address}" for a in await self._netlink.addresses()}

    async def _apply(self, spec: AddressSpecSpec) -> None:
        await self._netlink.add_address(spec)

    async def _undo(self, spec: AddressSpecSpec) -> None:
        await self._netlink.remove_address(spec.link_name, spec.address)


class RouteSpecController(_SpecApplier[RouteSpecSpec]):
    name = "network.RouteSpecController"
    spec_type = ROUTE_SPECS
    what = "route"
    inputs = (Input(ROUTE_SPECS), Input(LINK_STATUSES), Input(ADDRESS_STATUSES), Input(ROUTE_STATUSES))

    async def _present(self, wanted: dict[str, RouteSpecSpec]) -> set[str]:
        return {r.id for r in await self._netlink.routes()}

    async def _apply(self, spec: RouteSpecSpec) -> None:
        await self._netlink.add_route(spec)

    async def _undo(self, spec: RouteSpecSpec) -> None:
        await self._netlink.remove_route(spec)
