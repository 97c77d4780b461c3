"""A fake kernel network for the network controllers' tests: links, addresses and routes in memory.

It answers the :class:`~ichor.machined.netlink.Netlink` calls as the kernel would for the cases the
controllers meet (a route needs an address in its gateway's subnet, a link must exist), records
every change asked of it, and reports changes so the status controllers re-read.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

from ichor.machined.netlink import NetlinkError, lacks_kind
from ichor.machined.resources import (
    AddressFamily,
    AddressScope,
    AddressSpecSpec,
    AddressStatusSpec,
    LinkSpecSpec,
    LinkStatusSpec,
    RouteSpecSpec,
    RouteStatusSpec,
    WireguardSpec,
)


def ether(index: int, mac: str, *, up: bool = False, kind: str = "", mtu: int = 1500) -> LinkStatusSpec:
    return LinkStatusSpec(
        index=index, type="ether", hardware_addr=mac, broadcast_addr="ff:ff:ff:ff:ff:ff", mtu=mtu, kind=kind,
        flags="UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP" if up else "BROADCAST,MULTICAST",
        operational_state="up" if up else "down", link_state=up,
    )  # fmt: skip


class FakeNetlink:
    def __init__(self, links: dict[str, LinkStatusSpec] | None = None) -> None:
        self.link_table: dict[str, LinkStatusSpec] = dict(links or {})
        self.address_table: list[AddressStatusSpec] = []
        self.route_table: list[RouteStatusSpec] = []
        self.calls: list[str] = []
        self.refuse: set[str] = set()
        """Call names (``add_route``) that fail until removed from this set."""
        self.lacking: set[str] = set()
        """Link kinds this kernel cannot create (it answers EOPNOTSUPP, "Unknown device type")."""
        self.wireguard: dict[str, WireguardSpec] = {}
        self._changed = asyncio.Event()

    def changed(self) -> None:
        self._changed.set()

    # -- reads --------------------------------------------------------------------------------

    async def links(self) -> dict[str, LinkStatusSpec]:
        return dict(self.link_table)

    async def addresses(self) -> list[AddressStatusSpec]:
        return list(self.address_table)

    async def routes(self) -> list[RouteStatusSpec]:
        return list(self.route_table)

    async def changes(self) -> AsyncIterator[None]:
        while True:
            await self._changed.wait()
            self._changed.clear()
            yield None

    # -- writes -------------------------------------------------------------------------------

    def _check(self, call: str, link: str | None) -> LinkStatusSpec | None:
        if call in self.refuse:
            raise NetlinkError(f"{call}: EPERM: refused by the test", hint="the test refuses it", code=1)
        if link is None:
            return None
        if link not in self.link_table:
            raise NetlinkError(f"link {link!r} does not exist", hint="name a link of `talosctl get links`")
        return self.link_table[link]

    async def set_link(self, name: str, *, up: bool | None = None, mtu: int | None = None) -> None:
        link = self._check("set_link", name)
        assert link is not None
        self.calls.append(f"set_link {name} up={up} mtu={mtu}")
        flags = link.flags
        if up is not None:
            flags = "UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP" if up else "BROADCAST,MULTICAST"
        self.link_table[name] = LinkStatusSpec(**{**link.__dict__, "flags": flags, "mtu": mtu or link.mtu,
                                                  "operational_state": "up" if "UP" in flags else "down"})  # fmt: skip
        self.changed()

    async def create_link(self, spec: LinkSpecSpec) -> None:
        self._check("create_link", spec.parent_name or None)
        self.calls.append(f"create_link {spec.name} {spec.kind}")
        if spec.kind in self.lacking:
            raise lacks_kind(spec.kind, spec.name)
        index = max((link.index for link in self.link_table.values()), default=0) + 1
        self.link_table[spec.name] = LinkStatusSpec(
            index=index, type=spec.type or "ether", flags="BROADCAST,MULTICAST", mtu=spec.mtu or 1500,
            kind=spec.kind, operational_state="down",
            link_index=self.link_table[spec.parent_name].index if spec.parent_name else 0,
        )  # fmt: skip
        self.changed()

    async def enslave(self, name: str, master: str) -> None:
        link = self._check("enslave", name)
        bond = self._check("enslave", master)
        assert link is not None and bond is not None
        self.calls.append(f"enslave {name} {master}")
        self.link_table[name] = LinkStatusSpec(**{**link.__dict__, "master_index": bond.index, "slave_kind": "bond",
                                                  "flags": "BROADCAST,MULTICAST"})  # fmt: skip
        self.changed()

    async def configure_wireguard(self, name: str, spec: WireguardSpec) -> None:
        self._check("configure_wireguard", name)
        self.calls.append(f"configure_wireguard {name} peers={len(spec.peers)}")
        self.wireguard[name] = spec

    async def add_address(self, spec: AddressSpecSpec) -> None:
        link = self._check("add_address", spec.link_name)
        assert link is not None
        self.calls.append(f"add_address {spec.link_name} {spec.address}")
        prefix = ipaddress.ip_interface(spec.address)
        self.address_table.append(AddressStatusSpec(
            address=prefix, local=prefix.ip, link_index=link.index, link_name=spec.link_name,
            family=AddressFamily(spec.family), scope=AddressScope(spec.scope), flags=spec.flags,
        ))  # fmt: skip
        self.changed()

    async def remove_address(self, link_name: str, address: str) -> None:
        self._check("remove_address", None)
        self.calls.append(f"remove_address {link_name} {address}")
        self.address_table = [
            a for a in self.address_table if (a.link_name, str(a.address)) != (link_name, address)
        ]
        self.changed()

    async def add_route(self, spec: RouteSpecSpec) -> None:
        link = self._check("add_route", spec.out_link_name or None)
        if spec.gateway and not any(
            ipaddress.ip_address(spec.gateway) in a.address.network for a in self.address_table
            if a.link_name == spec.out_link_name
        ):  # fmt: skip
            raise NetlinkError(f"adding route {spec.id}: ENETUNREACH: (101, 'Network is unreachable')",
                               hint="the gateway must be inside a subnet of an address on the link")  # fmt: skip
        self.calls.append(f"add_route {spec.id}")
        self.route_table.append(RouteStatusSpec(
            family=spec.family, dst=spec.dst, src=spec.src, gateway=spec.gateway,
            out_link_index=link.index if link else 0, out_link_name=spec.out_link_name, table=spec.table,
            priority=spec.priority, scope=spec.scope, type=spec.type, protocol=spec.protocol, mtu=spec.mtu,
        ))  # fmt: skip
        self.changed()

    async def remove_route(self, spec: RouteSpecSpec) -> None:
        self._check("remove_route", None)
        self.calls.append(f"remove_route {spec.id}")
        self.route_table = [r for r in self.route_table if r.id != spec.id]
        self.changed()
