"""What a network config asks that the node cannot do as asked, each problem named by its YAML key.

Talos applies such a config and waits (a LinkSpec waits for its link, a route for an address that
covers its gateway); Ichor does the same and publishes why, with the key to fix, as a wait
(``talosctl get waits``) of the config controller that reads the key:

* ``machine.network.interfaces[N].interface`` names no link of the node;
* ``machine.network.interfaces[N].routes[M].gateway`` is outside every subnet on the link;
* ``machine.network.interfaces[N].vip.ip`` is outside every subnet on the link (hosts on the link
  cannot reach it, though the control planes still elect a holder, as Talos's do).

Before a change is applied, ``ApplyConfiguration`` replies with these as warnings, and with
``machine.network.interfaces[N].addresses[M]`` when a link with dhcp off would keep no address in a
subnet it is reached on now: the change cuts the node off (``--mode=try`` reverts it after its
timeout).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ichor.machined.controllers.network._select import parse_address, select_links
from ichor.machined.cosi import ControllerContext
from ichor.machined.resources import AddressFamily, AddressScope, AddressStatusSpec, LinkStatusSpec
from ichor.machinery.config import Config
from ichor.machinery.config._models import Device

__all__ = [
    "Problem",
    "ProblemWaits",
    "apply_warnings",
    "cutoffs",
    "unknown_links",
    "unreachable_gateways",
    "vips_outside",
]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Problem:
    key: str
    """The YAML key to fix: ``machine.network.interfaces[0].vip.ip``."""
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def _devices(config: Config | None) -> Iterator[tuple[str, Device]]:
    network = config.machine.network if config is not None and config.machine is not None else None
    for n, device in enumerate(network.interfaces or [] if network is not None else []):
        if not device.ignore:
            yield f"machine.network.interfaces[{n}]", device


def _subnets(addresses: Iterable[AddressStatusSpec], link: str) -> list[_Network]:
    """The subnets of the link's global addresses (host-length ones, such as a VIP, cover nothing)."""
    return [
        a.address.network for a in addresses
        if a.link_name == link and a.scope is AddressScope.GLOBAL
        and a.address.network.prefixlen < a.address.max_prefixlen
    ]  # fmt: skip


def _outside(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, subnets: list[_Network]) -> bool:
    return not any(ip.version == net.version and ip in net for net in subnets)


def _shown(subnets: list[_Network]) -> str:
    return ", ".join(sorted({str(net) for net in subnets}))


def unknown_links(config: Config | None, links: Mapping[str, LinkStatusSpec]) -> list[Problem]:
    """Devices naming an ``interface`` the node has no link of."""
    return [
        Problem(
            f"{base}.interface",
            f"the node has no link named {device.interface!r} (`talosctl get links`): its LinkSpec waits "
            "for the link to appear, and its addresses and routes with it",
        )
        for base, device in _devices(config)
        if device.interface and device.interface not in links
    ]


def unreachable_gateways(
    config: Config | None, links: Mapping[str, LinkStatusSpec], addresses: Iterable[AddressStatusSpec]
) -> list[Problem]:
    """Route gateways outside every subnet of their link (once the link has an address to judge by)."""
    addresses = list(addresses)
    problems = []
    for base, device in _devices(config):
        for link in select_links(device, links):
            subnets = _subnets(addresses, link)
            for m, route in enumerate(device.routes or []):
                try:
                    gateway = ipaddress.ip_address((route.gateway or "").strip())
                except ValueError:
                    continue
                # A link-local gateway (IPv6's usual fe80::1) is on every link by definition.
                if (
                    subnets
                    and not (gateway.is_unspecified or gateway.is_link_local)
                    and _outside(gateway, subnets)
                ):
                    problems.append(Problem(
                        f"{base}.routes[{m}].gateway",
                        f"gateway {gateway} is outside every subnet on {link} ({_shown(subnets)}): the kernel "
                        "refuses the route (ENETUNREACH) until an address on the link covers the gateway",
                    ))  # fmt: skip
    return problems


def vips_outside(
    config: Config | None, links: Mapping[str, LinkStatusSpec], addresses: Iterable[AddressStatusSpec]
) -> list[Problem]:
    """Shared IPs outside every subnet of their link (control planes only: workers ignore ``vip``)."""
    if config is None or config.machine is None or config.machine.type not in ("controlplane", "init"):
        return []
    addresses = list(addresses)
    problems = []
    for base, device in _devices(config):
        try:
            vip = ipaddress.ip_address((device.vip.ip or "").strip()) if device.vip is not None else None
        except ValueError:
            continue
        for link in select_links(device, links) if vip is not None else []:
            subnets = _subnets(addresses, link)
            if subnets and vip is not None and _outside(vip, subnets):
                problems.append(Problem(
                    f"{base}.vip.ip",
                    f"shared IP {vip} is outside every subnet on {link} ({_shown(subnets)}): hosts on the link "
                    "cannot reach it; pick an unused address of the link's subnet",
                ))  # fmt: skip
    return problems


def cutoffs(
    config: Config, links: Mapping[str, LinkStatusSpec], addresses: Iterable[AddressStatusSpec]
) -> list[Problem]:
    """Links with dhcp off that ``config`` leaves without an address in any subnet they have now."""
    addresses = list(addresses)
    problems = []
    for base, device in _devices(config):
        options = device.dhcp_options
        if device.dhcp and (options is None or options.ipv4 is not False):
            continue
        wanted = [(f"addresses[{m}]", text) for m, text in enumerate(device.addresses or [])]
        wanted += [("cidr", device.cidr)] if device.cidr else []
        parsed = []
        for key, text in wanted:
            try:
                parsed.append((key, parse_address(text).ip))
            except ValueError:
                continue
        for link in select_links(device, links):
            subnets = _subnets(addresses, link)
            if not subnets or any(not _outside(ip, subnets) for _, ip in parsed):
                continue
            why = (
                f"the node is reached on {link} in {_shown(subnets)} now and dhcp is off on it: applying this "
                "cuts it off from those clients (apply with --mode=try to have it reverted after --timeout)"
            )
            if not parsed:
                problems.append(Problem(f"{base}.dhcp", f"no address is given for {link}; {why}"))
            problems.extend(Problem(f"{base}.{key}", f"{ip} is outside every such subnet; {why}")
                            for key, ip in parsed)  # fmt: skip
    return problems


def _planned(config: Config, links: Mapping[str, LinkStatusSpec]) -> list[AddressStatusSpec]:
    """The static addresses ``config`` gives each link, as the kernel will report them."""
    planned = []
    for _, device in _devices(config):
        for text in [*(device.addresses or []), *([device.cidr] if device.cidr else [])]:
            try:
                prefix = parse_address(text)
            except ValueError:
                continue
            family = AddressFamily.INET6 if prefix.version == 6 else AddressFamily.INET4
            planned += [AddressStatusSpec(address=prefix, link_name=link, family=family)
                        for link in select_links(device, links)]  # fmt: skip
    return planned


def apply_warnings(
    config: Config, links: Mapping[str, LinkStatusSpec], addresses: Iterable[AddressStatusSpec]
) -> list[str]:
    """Every problem of ``config`` judged against the node's links and addresses now (plus, for
    gateways and shared IPs, the static addresses ``config`` adds), as warnings."""
    addresses = list(addresses)
    after = [*addresses, *_planned(config, links)]
    found = [
        *cutoffs(config, links, addresses),
        *unknown_links(config, links),
        *unreachable_gateways(config, links, after),
        *vips_outside(config, links, after),
    ]
    return [str(problem) for problem in found]


class ProblemWaits:
    """Publishes one wait per problem under ``<controller>/<key>``; clears those that went away."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def publish(self, ctx: ControllerContext, problems: Iterable[Problem]) -> None:
        ids = set()
        for problem in problems:
            id = f"{ctx.name}/{problem.key}"
            ctx.waiting(problem.key, problem.message, id=id)
            ids.add(id)
        for gone in self._ids - ids:
            ctx.clear_waiting(gone)
        self._ids = ids
