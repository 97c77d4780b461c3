"""The node's kernel network, read and changed through one small adapter (:class:`Netlink`).

Controllers never talk netlink themselves: they get a :class:`Netlink` and read links, addresses
and routes as the status specs Talos publishes, subscribe to changes, and ask for changes. Two
adapters exist:

* :class:`KernelNetlink`: rtnetlink over pyroute2's asyncio API, in the network namespace machined
  runs in. Changes are netlink multicast events (no polling); every burst of events wakes readers.
* :class:`ProcessNodeView`: what a process node has of its own (its address on the host's ``lo``).
  A process node shares the host's links, addresses and routes, so this view never reports the
  host's and refuses every change: nothing can reach the host's kernel through it.

Unit tests give controllers a fake with the same methods.

Exceptions::

    NetlinkError        the kernel refused a request, or the adapter refuses it (carries a hint)
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
from collections.abc import AsyncIterator
from typing import Any, Protocol

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

__all__ = ["LACKS_KIND", "KernelNetlink", "Netlink", "NetlinkError", "ProcessNodeView", "lacks_kind"]


class NetlinkError(Exception):
    def __init__(self, message: str, *, hint: str = "", code: int = 0) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


class Netlink(Protocol):
    async def links(self) -> dict[str, LinkStatusSpec]:
        """Every link by name."""
        ...

    async def addresses(self) -> list[AddressStatusSpec]: ...

    async def routes(self) -> list[RouteStatusSpec]: ...

    def changes(self) -> AsyncIterator[None]:
        """Yields after links, addresses or routes changed (never, if they cannot)."""
        ...

    async def set_link(self, name: str, *, up: bool | None = None, mtu: int | None = None) -> None: ...

    async def create_link(self, spec: LinkSpecSpec) -> None:
        """Make the logical link ``spec`` describes (bond, VLAN, dummy, WireGuard), down."""
        ...

    async def enslave(self, name: str, master: str) -> None:
        """Make link ``name`` a member of bond ``master``."""
        ...

    async def configure_wireguard(self, name: str, spec: WireguardSpec) -> None: ...

    async def add_address(self, spec: AddressSpecSpec) -> None: ...

    async def remove_address(self, link_name: str, address: str) -> None: ...

    async def add_route(self, spec: RouteSpecSpec) -> None: ...

    async def remove_route(self, spec: RouteSpecSpec) -> None: ...


# --- kernel values <-> Talos's names -----------------------------------------------------------

_FAMILIES = {2: AddressFamily.INET4, 10: AddressFamily.INET6}
_SCOPES = {0: AddressScope.GLOBAL, 200: AddressScope.SITE, 253: AddressScope.LINK, 254: AddressScope.HOST,
           255: AddressScope.NOWHERE}  # fmt: skip
_SCOPE_CODES = {str(name): code for code, name in _SCOPES.items()}
_LINK_TYPES = {1: "ether", 32: "infiniband", 512: "ppp", 768: "ipip", 769: "tunnel6", 772: "loopback",
               776: "sit", 778: "gre", 823: "ip6gre", 65534: "none", 65535: "void"}  # fmt: skip
_OPER_STATES = ("unknown", "notPresent", "down", "lowerLayerDown", "testing", "dormant", "up")
_LINK_FLAGS = ("UP", "BROADCAST", "DEBUG", "LOOPBACK", "POINTTOPOINT", "NOTRAILERS", "RUNNING", "NOARP",
               "PROMISC", "ALLMULTI", "MASTER", "SLAVE", "MULTICAST", "PORTSEL", "AUTOMEDIA", "DYNAMIC",
               "LOWER_UP", "DORMANT", "ECHO")  # fmt: skip
_ADDRESS_FLAGS = ("temporary", "nodad", "optimistic", "dadfailed", "homeaddress", "deprecated", "tentative",
                  "permanent", "managetempaddr", "noprefixroute", "mcautojoin", "stableprivacy")  # fmt: skip
_ROUTE_FLAGS = ("notify", "cloned", "equalize", "prefix", "lookup_table", "fib_match", "offload", "trap")
_TABLES = {0: "unspec", 253: "default", 254: "main", 255: "local"}
_TABLE_CODES = {name: code for code, name in _TABLES.items()}
_ROUTE_TYPES = ("unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole", "unreachable",
                "prohibit", "throw", "nat", "xresolve")  # fmt: skip
_PROTOCOLS = {0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 9: "ra", 16: "dhcp"}
_PROTOCOL_CODES = {name: code for code, name in _PROTOCOLS.items()}


def _bits(value: int, names: tuple[str, ...], shift: int = 0) -> str:
    return ",".join(name for i, name in enumerate(names) if value & (1 << (i + shift)))


def _attr(msg: Any, name: str, default: Any = None) -> Any:
    value = msg.get_attr(name)
    return default if value is None else value


def _link(msg: Any) -> tuple[str, LinkStatusSpec]:
    info = msg.get_attr("IFLA_LINKINFO")
    kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
    slave_kind = info.get_attr("IFLA_INFO_SLAVE_KIND") if info is not None else None
    oper = _attr(msg, "IFLA_OPERSTATE", 0)
    oper_state = oper.lower() if isinstance(oper, str) else _OPER_STATES[oper] if oper < 7 else "unknown"
    if oper_state == "lowerlayerdown":
        oper_state = "lowerLayerDown"
    kind_code = msg["ifi_type"]
    spec = LinkStatusSpec(
        index=msg["index"], type=_LINK_TYPES.get(kind_code, f"LinkType({kind_code})"),
        link_index=_attr(msg, "IFLA_LINK", 0), flags=_bits(msg["flags"], _LINK_FLAGS),
        hardware_addr=_attr(msg, "IFLA_ADDRESS", ""), permanent_addr=_attr(msg, "IFLA_PERM_ADDRESS", ""),
        broadcast_addr=_attr(msg, "IFLA_BROADCAST", ""), mtu=_attr(msg, "IFLA_MTU", 0),
        queue_disc=_attr(msg, "IFLA_QDISC", ""), master_index=_attr(msg, "IFLA_MASTER", 0),
        operational_state=oper_state, kind=kind or "", slave_kind=slave_kind or "",
        link_state=bool(_attr(msg, "IFLA_CARRIER", 0)),
    )  # fmt: skip
    return _attr(msg, "IFLA_IFNAME", f"if{msg['index']}"), spec


def _address(msg: Any, names: dict[int, str]) -> AddressStatusSpec:
    family = _FAMILIES.get(msg["family"], AddressFamily.INET4)
    address = _attr(msg, "IFA_ADDRESS") or _attr(msg, "IFA_LOCAL")
    local = _attr(msg, "IFA_LOCAL")
    flags = _attr(msg, "IFA_FLAGS", msg["flags"])
    return AddressStatusSpec(
        address=ipaddress.ip_interface(f"{address}/{msg['prefixlen']}"),
        local=ipaddress.ip_address(local) if local else None,
        broadcast=ipaddress.ip_address(b) if (b := _attr(msg, "IFA_BROADCAST")) else None,
        link_index=msg["index"], link_name=names.get(msg["index"], ""), family=family,
        scope=_SCOPES.get(msg["scope"], AddressScope.GLOBAL), flags=_bits(flags, _ADDRESS_FLAGS),
    )  # fmt: skip


def _route(msg: Any, names: dict[int, str]) -> RouteStatusSpec:
    family = _FAMILIES.get(msg["family"], AddressFamily.INET4)
    dst = _attr(msg, "RTA_DST")
    oif = _attr(msg, "RTA_OIF", 0)
    table = _attr(msg, "RTA_TABLE", msg["table"])
    metrics = msg.get_attr("RTA_METRICS")
    return RouteStatusSpec(
        family=str(family), dst=f"{dst}/{msg['dst_len']}" if dst else "",
        src=_attr(msg, "RTA_PREFSRC", ""), gateway=_attr(msg, "RTA_GATEWAY", ""),
        out_link_index=oif, out_link_name=names.get(oif, ""),
        table=_TABLES.get(table, f"RoutingTable({table})"),
        priority=_attr(msg, "RTA_PRIORITY", 0), scope=str(_SCOPES.get(msg["scope"], AddressScope.GLOBAL)),
        type=_ROUTE_TYPES[msg["type"]] if msg["type"] < len(_ROUTE_TYPES) else f"RouteType({msg['type']})",
        flags=_bits(msg["flags"], _ROUTE_FLAGS, shift=8),
        protocol=_PROTOCOLS.get(msg["proto"], f"RouteProtocol({msg['proto']})"),
        mtu=(metrics.get_attr("RTAX_MTU") or 0) if metrics is not None else 0,
    )  # fmt: skip


LACKS_KIND = errno.EOPNOTSUPP
"""The code of :func:`lacks_kind`'s error, and what the kernel answers RTM_NEWLINK for a kind it
does not have ("Unknown device type"); an unknown generic netlink family is ENOENT."""


def lacks_kind(kind: str, name: str) -> NetlinkError:
    """The error for a kernel that cannot make ``kind`` links (``name`` is the link asked for, which
    the hint names): the kind, and why; callers do not retry it."""
    return NetlinkError(
        f"this kernel cannot create {kind} links (Unknown device type): it lacks {kind} support",
        hint=f"run the node on a kernel with {kind} support (the VM platform); machine.network.interfaces[] "
        f"for {name} stays unapplied until then",
        code=LACKS_KIND,
    )


def _refused(err: Exception, what: str, hint: str) -> NetlinkError:
    code = getattr(err, "code", 0) or 0
    reason = errno.errorcode.get(code, "") and f"{errno.errorcode[code]}: {err}"
    return NetlinkError(f"{what}: {reason or err}", hint=hint, code=code)


# RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE
_GROUPS = 0x1 | 0x10 | 0x40 | 0x100 | 0x400


class KernelNetlink:
    """rtnetlink in machined's own network namespace. Create and use it inside the event loop."""

    def __init__(self) -> None:
        self._ipr: Any = None
        self._lock = asyncio.Lock()

    async def _socket(self) -> Any:
        if self._ipr is None:
            from pyroute2 import AsyncIPRoute

            self._ipr = AsyncIPRoute()
            await self._ipr.setup_endpoint()
        return self._ipr

    async def _dump(self, kind: str, **kw: Any) -> list[Any]:
        async with self._lock:
            ipr = await self._socket()
            return [msg async for msg in await getattr(ipr, kind)("dump", **kw)]

    async def _request(self, kind: str, command: str, **kw: Any) -> None:
        async with self._lock:
            ipr = await self._socket()
            result = await getattr(ipr, kind)(command, **kw)
            if hasattr(result, "__aiter__"):
                async for _ in result:
                    pass

    async def _names(self) -> dict[int, str]:
        return {msg["index"]: _attr(msg, "IFLA_IFNAME", "") for msg in await self._dump("link")}

    async def _index(self, name: str) -> int:
        for index, link_name in (await self._names()).items():
            if link_name == name:
                return index
        raise NetlinkError(f"link {name!r} does not exist", hint="name a link of `talosctl get links`",
                           code=errno.ENODEV)  # fmt: skip

    async def links(self) -> dict[str, LinkStatusSpec]:
        return dict(_link(msg) for msg in await self._dump("link"))

    async def addresses(self) -> list[AddressStatusSpec]:
        names = await self._names()
        return [_address(msg, names) for msg in await self._dump("addr")]

    async def routes(self) -> list[RouteStatusSpec]:
        names = await self._names()
        return [_route(msg, names) for msg in await self._dump("route")]

    async def changes(self) -> AsyncIterator[None]:
        from pyroute2 import AsyncIPRoute

        async with AsyncIPRoute() as events:
            await events.bind(groups=_GROUPS)
            while True:
                # get() waits for the next datagram and yields its messages: one wake-up per burst.
                async for _ in events.get():
                    pass
                yield None

    async def set_link(self, name: str, *, up: bool | None = None, mtu: int | None = None) -> None:
        index = await self._index(name)
        kw: dict[str, Any] = {}
        if up is not None:
            kw["state"] = "up" if up else "down"
        if mtu:
            kw["mtu"] = mtu
        try:
            await self._request("link", "set", index=index, **kw)
        except Exception as err:
            raise _refused(
                err, f"setting link {name} {kw}", "check machine.network.interfaces[].mtu"
            ) from err

    async def _send(self, msg: Any, msg_type: int, flags: int) -> None:
        async with self._lock:
            ipr = await self._socket()
            async for _ in await ipr.nlm_request(msg, msg_type=msg_type, msg_flags=flags):
                pass

    async def create_link(self, spec: LinkSpecSpec) -> None:
        from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
        from pyroute2.netlink.rtnl import RTM_NEWLINK

        from ichor.machined import linkrequests

        names = {name: index for index, name in (await self._names()).items()}

        def index_of(name: str) -> int:
            if name not in names:
                raise NetlinkError(f"link {spec.name}: its parent {name!r} does not exist",
                                   hint="name a link of `talosctl get links`", code=errno.ENODEV)  # fmt: skip
            return names[name]

        try:
            msg = linkrequests.new_link(spec, index_of)
        except linkrequests.LinkRequestError as err:
            raise NetlinkError(str(err), hint=err.hint, code=errno.EINVAL) from None
        try:
            await self._send(msg, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
        except Exception as err:
            code = getattr(err, "code", 0)
            if code == errno.EEXIST:
                return
            if code == LACKS_KIND:
                raise lacks_kind(spec.kind, spec.name) from err
            raise _refused(err, f"creating {spec.kind} link {spec.name}",
                           "check machine.network.interfaces[] for it") from err  # fmt: skip

    async def enslave(self, name: str, master: str) -> None:
        from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST
        from pyroute2.netlink.rtnl import RTM_NEWLINK

        from ichor.machined import linkrequests

        index, master_index = await self._index(name), await self._index(master)
        try:
            await self._request("link", "set", index=index, state="down")
            await self._send(
                linkrequests.enslave(index, master_index), RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK
            )
        except Exception as err:
            raise _refused(err, f"adding {name} to bond {master}",
                           "check machine.network.interfaces[].bond.interfaces") from err  # fmt: skip

    async def configure_wireguard(self, name: str, spec: WireguardSpec) -> None:
        from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST
        from pyroute2.netlink.generic.wireguard import AsyncWireGuard

        from ichor.machined import linkrequests

        try:
            msg = linkrequests.wireguard_device(name, spec)
        except linkrequests.LinkRequestError as err:
            raise NetlinkError(str(err), hint=err.hint, code=errno.EINVAL) from None
        try:
            async with AsyncWireGuard() as wg:
                await wg.setup_endpoint()
                async for _ in await wg.nlm_request(
                    msg, msg_type=wg.prid, msg_flags=NLM_F_REQUEST | NLM_F_ACK
                ):
                    pass
        except Exception as err:
            if getattr(err, "code", 0) in (LACKS_KIND, errno.ENOENT):
                raise lacks_kind("wireguard", name) from err
            raise _refused(err, f"configuring WireGuard on {name}",
                           "check machine.network.interfaces[].wireguard") from err  # fmt: skip

    async def add_address(self, spec: AddressSpecSpec) -> None:
        index = await self._index(spec.link_name)
        prefix = ipaddress.ip_interface(spec.address)
        kw: dict[str, Any] = {"index": index, "address": str(prefix.ip), "prefixlen": prefix.network.prefixlen,
                              "scope": _SCOPE_CODES.get(spec.scope, 0)}  # fmt: skip
        if prefix.version == 4 and prefix.network.prefixlen < 31:
            kw["broadcast"] = str(prefix.network.broadcast_address)
        try:
            await self._request("addr", "add", **kw)
        except Exception as err:
            if getattr(err, "code", 0) == errno.EEXIST:
                return
            raise _refused(err, f"adding address {spec.address} to {spec.link_name}",
                           "check machine.network.interfaces[].addresses") from err  # fmt: skip

    async def remove_address(self, link_name: str, address: str) -> None:
        prefix = ipaddress.ip_interface(address)
        try:
            index = await self._index(link_name)
            await self._request("addr", "del", index=index, address=str(prefix.ip),
                                prefixlen=prefix.network.prefixlen)  # fmt: skip
        except Exception as err:
            if getattr(err, "code", 0) in (errno.EADDRNOTAVAIL, errno.ENODEV):
                return  # already gone, with its link or by hand
            raise _refused(err, f"removing address {address} from {link_name}", "") from err

    def _route_args(self, spec: RouteSpecSpec, index: int | None) -> dict[str, Any]:
        family = 10 if spec.family == "inet6" else 2
        kw: dict[str, Any] = {"family": family, "dst": spec.dst or ("::/0" if family == 10 else "0.0.0.0/0"),
                              "table": _TABLE_CODES.get(str(spec.table), 254),
                              "proto": _PROTOCOL_CODES.get(str(spec.protocol), 4),
                              "scope": _SCOPE_CODES.get(spec.scope, 0),
                              "type": _ROUTE_TYPES.index(str(spec.type))}  # fmt: skip
        if index is not None:
            kw["oif"] = index
        if spec.gateway:
            kw["gateway"] = spec.gateway
        if spec.src:
            kw["prefsrc"] = spec.src
        if spec.priority:
            kw["priority"] = spec.priority
        if spec.mtu:
            kw["metrics"] = {"attrs": [("RTAX_MTU", spec.mtu)]}
        return kw

    async def add_route(self, spec: RouteSpecSpec) -> None:
        index = await self._index(spec.out_link_name) if spec.out_link_name else None
        try:
            await self._request("route", "replace", **self._route_args(spec, index))
        except Exception as err:
            raise _refused(err, f"adding route {spec.id}",
                           "the gateway must be inside a subnet of an address on the link "
                           "(machine.network.interfaces[].routes[].gateway)") from err  # fmt: skip

    async def remove_route(self, spec: RouteSpecSpec) -> None:
        try:
            index = await self._index(spec.out_link_name) if spec.out_link_name else None
            await self._request("route", "del", **self._route_args(spec, index))
        except Exception as err:
            if getattr(err, "code", 0) in (errno.ESRCH, errno.ENODEV):
                return  # already gone, with its link or by hand
            raise _refused(err, f"removing route {spec.id}", "") from err

    async def close(self) -> None:
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None


class ProcessNodeView:
    """A process node's own network: its loopback address. Reads only; refuses every change."""

    def __init__(self, address: str) -> None:
        self._prefix = ipaddress.ip_interface(f"{address}/{128 if ':' in address else 32}")

    async def links(self) -> dict[str, LinkStatusSpec]:
        lo = LinkStatusSpec(index=1, type="loopback", flags="UP,LOOPBACK,RUNNING,LOWER_UP",
                            hardware_addr="00:00:00:00:00:00", broadcast_addr="00:00:00:00:00:00", mtu=65536,
                            queue_disc="noqueue", operational_state="unknown", link_state=True)  # fmt: skip
        return {"lo": lo}

    async def addresses(self) -> list[AddressStatusSpec]:
        family = AddressFamily.INET6 if self._prefix.version == 6 else AddressFamily.INET4
        return [AddressStatusSpec(address=self._prefix, local=self._prefix.ip, link_index=1, link_name="lo",
                                  family=family, scope=AddressScope.HOST, flags="permanent")]  # fmt: skip

    async def routes(self) -> list[RouteStatusSpec]:
        return []

    async def changes(self) -> AsyncIterator[None]:
        await asyncio.Event().wait()  # a process node's own network never changes
        yield None

    def _refuse(self, what: str) -> NetlinkError:
        return NetlinkError(
            f"{what}: a process node shares the host's network and changes no link, address or route",
            hint="network settings apply to nodes in a network namespace of their own "
            "(python -m ichor.machined --own-netns)",
        )

    async def set_link(self, name: str, *, up: bool | None = None, mtu: int | None = None) -> None:
        raise self._refuse(f"setting link {name}")

    async def create_link(self, spec: LinkSpecSpec) -> None:
        raise self._refuse(f"creating link {spec.name}")

    async def enslave(self, name: str, master: str) -> None:
        raise self._refuse(f"adding {name} to bond {master}")

    async def configure_wireguard(self, name: str, spec: WireguardSpec) -> None:
        raise self._refuse(f"configuring WireGuard on {name}")

    async def add_address(self, spec: AddressSpecSpec) -> None:
        raise self._refuse(f"adding address {spec.address}")

    async def remove_address(self, link_name: str, address: str) -> None:
        raise self._refuse(f"removing address {address}")

    async def add_route(self, spec: RouteSpecSpec) -> None:
        raise self._refuse(f"adding route {spec.id}")

    async def remove_route(self, spec: RouteSpecSpec) -> None:
        raise self._refuse(f"removing route {spec.id}")
