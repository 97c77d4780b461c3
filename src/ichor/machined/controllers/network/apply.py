"""Merged specs -> the kernel: links up with their MTU, addresses, routes, over netlink.

* ``network.LinkSpecController``: creates logical links (bond, VLAN, dummy, WireGuard, with
  :mod:`ichor.machined.linkrequests`' messages), puts bond members in their bond, configures
  WireGuard, brings links up (or down) and sets their MTU; a physical link that does not exist yet is
  waited for (it is retried when the links change). Links are never deleted and an MTU is not
  restored when its spec goes. A kernel without a kind (a container node's host kernel answers
  "Unknown device type", EOPNOTSUPP) is a wait that names the kind and says the kernel lacks it; it is
  not retried on a timer (no kernel grows a module by retrying) and that kind is never asked for again
  in this machined's life, while every other link is still applied.
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
from ichor.machined.netlink import LACKS_KIND, Netlink, NetlinkError
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
            transient = False
            for id, spec in list(self._applied.items()):
                if wanted.get(id) == spec:
                    continue
                try:
                    await self._undo(spec)
                    del self._applied[id]
                    ctx.logger.info(f"removed {self.what}", id=id)
                except NetlinkError as err:
                    refused.append(f"removing {self.what} {id}: {err}")
                    transient = True
            present = await self._present(wanted)
            for id, spec in wanted.items():
                try:
                    if id not in present:
                        await self._apply(spec)
                        ctx.logger.info(f"applied {self.what}", id=id)
                    self._applied[id] = spec
                except NetlinkError as err:
                    refused.append(f"{self.what} {id}: {err}" + (f" ({err.hint})" if err.hint else ""))
                    transient = transient or err.code != LACKS_KIND
            if refused:
                for line in refused:
                    ctx.logger.warning(line)
                # What the kernel lacks, it lacks until the inputs change: no timer for that alone.
                retry_after = RETRY_AFTER if transient else None
                ctx.waiting(f"{self.what}s applied", "; ".join(refused), retry_after=retry_after)
            else:
                ctx.clear_waiting()
                retry_after = None


class LinkSpecController(_SpecApplier[LinkSpecSpec]):
    name = "network.LinkSpecController"
    spec_type = LINK_SPECS
    what = "link"
    inputs = (Input(LINK_SPECS), Input(LINK_STATUSES))

    def __init__(self, netlink: Netlink) -> None:
        super().__init__(netlink)
        self._lacking: dict[str, NetlinkError] = {}
        """Kinds this kernel cannot create, with its answer."""
        self._wanted: dict[str, LinkSpecSpec] = {}

    async def _present(self, wanted: dict[str, LinkSpecSpec]) -> set[str]:
        self._wanted = wanted
        links = await self._netlink.links()
        indexes = {name: link.index for name, link in links.items()}
        return {
            name for name, link in links.items()
            if (spec := wanted.get(name)) is not None and ("UP" in link.flags.split(",")) == spec.up
            and (not spec.mtu or link.mtu == spec.mtu)
            and (not spec.master_name or link.master_index == indexes.get(spec.master_name))
            and (spec.kind != "wireguard" or self._applied.get(name) == spec)
        }  # fmt: skip

    def _missing(self, spec: LinkSpecSpec, other: str, role: str) -> NetlinkError:
        """``spec``'s parent or bond ``other`` is not there: for as long as the kernel lacks its kind
        (then not retried), or until it is made."""
        wanted = self._wanted.get(other)
        lacking = self._lacking.get(wanted.kind) if wanted is not None else None
        return NetlinkError(
            f"its {role} {other} does not exist" + (f": {lacking}" if lacking else ""),
            hint=f"see the wait for link {other}"
            if wanted is not None
            else "name a link of `talosctl get links`",
            code=lacking.code if lacking else 0,
        )

    async def _create(self, spec: LinkSpecSpec) -> None:
        if spec.kind in self._lacking:
            raise self._lacking[spec.kind]
        if spec.parent_name and spec.parent_name not in await self._netlink.links():
            raise self._missing(spec, spec.parent_name, "parent")
        try:
            await self._netlink.create_link(spec)
        except NetlinkError as err:
            if err.code == LACKS_KIND:
                self._lacking[spec.kind] = err
            raise

    async def _apply(self, spec: LinkSpecSpec) -> None:
        links = await self._netlink.links()
        link = links.get(spec.name)
        if link is None and spec.logical:
            await self._create(spec)
            links = await self._netlink.links()
            link = links.get(spec.name)
        if link is None:
            raise NetlinkError(
                f"link {spec.name!r} does not exist", hint="name a link of `talosctl get links`"
            )
        if spec.kind == "wireguard" and self._applied.get(spec.name) != spec:
            await self._netlink.configure_wireguard(spec.name, spec.wireguard)
        if spec.master_name:
            master = links.get(spec.master_name)
            if master is None:
                raise self._missing(spec, spec.master_name, "bond")
            if link.master_index != master.index:
                await self._netlink.enslave(spec.name, spec.master_name)
                link = (await self._netlink.links())[spec.name]
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
