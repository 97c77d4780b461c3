"""``machine.network.interfaces`` -> layered LinkSpecs, AddressSpecs, RouteSpecs and OperatorSpecs.

Two layers come from here: ``default`` (loopback up with 127.0.0.1/8 and ::1/128, every physical
link the config does not mention brought up and run with DHCPv4, as Talos does) and
``configuration`` (the machine config; bonds, VLANs, dummy and WireGuard links from
:mod:`.logical`, a VLAN's addresses, routes, DHCP and VIP on ``<link>.<vlanId>``). An
interface is named by ``interface`` or picked by ``deviceSelector`` (``hardwareAddr``, ``driver``,
``busPath``, wildcards allowed, ``physical``) among the links the kernel reports; a selector applies
to every link it matches. ``ignore: true`` leaves an interface alone. ``dhcp: true`` becomes a
``dhcp4`` OperatorSpec, which ``network.OperatorSpecController`` runs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.controllers.network._layers import config_controller
from ichor.machined.controllers.network._select import parse_address, select_by_selector, select_links
from ichor.machined.controllers.network.checks import (
    ProblemWaits,
    unknown_links,
    unreachable_gateways,
    vips_outside,
)
from ichor.machined.controllers.network.logical import logical_link_specs, vlan_name
from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController
from ichor.machined.resources import (
    ADDRESS_SPECS,
    ADDRESS_STATUSES,
    DEFAULT_ROUTE_METRIC,
    LINK_SPECS,
    LINK_STATUSES,
    OPERATOR_SPECS,
    ROUTE_SPECS,
    AddressSpecSpec,
    AddressStatusSpec,
    ConfigLayer,
    DHCP4OperatorSpec,
    LinkSpecSpec,
    LinkStatusSpec,
    OperatorSpecSpec,
    RouteSpecSpec,
    VIPOperatorSpec,
)
from ichor.machinery.config import Config
from ichor.machinery.config._models import Device, Vlan
from ichor.machinery.constants import DEFAULT_SERVICE_SUBNET

__all__ = [
    "address_config_controller",
    "config_or_none",
    "link_config_controller",
    "operator_config_controller",
    "parse_address",
    "route_config_controller",
    "route_spec_of",
    "select_links",
]

_CONFIGURATION = ConfigLayer.CONFIGURATION
_INPUTS = [ACTIVE_CONFIG, Input(LINK_STATUSES)]
_WITH_ADDRESSES = [*_INPUTS, Input(ADDRESS_STATUSES)]


def config_or_none(ctx: ControllerContext) -> Config | None:
    """The machine config, or None in maintenance mode (the default layer needs none)."""
    try:
        return active_config(ctx)
    except SkipReconcile:
        return None


def _devices(config: Config | None) -> list[Device]:
    network = config.machine.network if config is not None and config.machine is not None else None
    return list(network.interfaces or []) if network is not None else []


def _links(ctx: ControllerContext) -> dict[str, LinkStatusSpec]:
    return {r.id: r.spec for r in ctx.list(LINK_STATUSES)}


def _addresses(ctx: ControllerContext) -> list[AddressStatusSpec]:
    return [r.spec for r in ctx.list(ADDRESS_STATUSES)]


def _configured(config: Config | None, links: Mapping[str, LinkStatusSpec]) -> Iterator[tuple[str, Device]]:
    """(link name, device) for every device not ignored."""
    for device in _devices(config):
        if device.ignore:
            continue
        for name in select_links(device, links):
            yield name, device


def _addressed(
    config: Config | None, links: Mapping[str, LinkStatusSpec]
) -> Iterator[tuple[str, Device | Vlan]]:
    """(link name, entry) for every link that takes addresses, routes, DHCP and a VIP from the
    config: each device not ignored, then its VLANs (``<link>.<vlanId>``)."""
    for name, device in _configured(config, links):
        yield name, device
        for vlan in device.vlans or []:
            yield vlan_name(name, vlan), vlan


def _unmentioned_physical(config: Config | None, links: Mapping[str, LinkStatusSpec]) -> list[str]:
    """Physical links no device entry names or selects (ignored ones count as named) and no bond
    takes as a member: Talos's default layer brings them up and runs DHCPv4 on them. (A bond's
    member has a LinkSpec of the configuration layer, so Talos runs no default DHCP on it: a lease
    on ``eth0`` beside ``bond0`` over it would hold the node's address on a link that no longer
    receives.)"""
    mentioned = {name for device in _devices(config) for name in select_links(device, links)}
    for name, device in _configured(config, links):
        if device.bond is not None:
            members = logical_link_specs(name, device, links, lambda s: select_by_selector(s, links))
            mentioned.update(spec.name for _, spec in members if spec.master_name == name)
    return [name for name, link in links.items() if link.physical and name not in mentioned]


def _family(version: int) -> str:
    return "inet6" if version == 6 else "inet4"


def link_config_controller() -> TransformController[LinkSpecSpec]:
    waits = ProblemWaits()

    def derive(ctx: ControllerContext) -> Iterator[tuple[str, LinkSpecSpec]]:
        links = _links(ctx)
        config = config_or_none(ctx)
        waits.publish(ctx, unknown_links(config, links))
        yield "lo", LinkSpecSpec(name="lo", up=True, type="loopback")
        for name in _unmentioned_physical(config, links):
            yield name, LinkSpecSpec(name=name, up=True)
        for name, device in _configured(config, links):
            logical: dict[str, LinkSpecSpec | None] = dict(
                logical_link_specs(name, device, links, lambda s: select_by_selector(s, links))
            )
            yield name, logical.pop(name, None) or LinkSpecSpec(name=name, up=True, mtu=device.mtu or 0,
                                                                layer=_CONFIGURATION)  # fmt: skip
            yield from ((id, spec) for id, spec in logical.items() if spec is not None)

    return config_controller("network.LinkConfigController", LINK_SPECS, _INPUTS, derive)


SERVICE_DNS_INDEX = 9
"""Talos takes the service subnet's address + 9 (``10.96.0.9`` for ``10.96.0.0/12``)."""


def host_dns_service_address(config: Config | None) -> str:
    """With ``machine.features.hostDNS.forwardKubeDNSToHost``, the address CoreDNS forwards to: the
    first service subnet's tenth (Talos's); "" without it (or with no valid subnet)."""
    machine = config.machine if config is not None else None
    features = machine.features if machine is not None else None
    host_dns = features.host_dns if features is not None else None
    if host_dns is None or not host_dns.forward_kube_dns_to_host:
        return ""
    network = config.cluster.network if config is not None and config.cluster is not None else None
    for subnet in (network.service_subnets if network is not None else None) or [DEFAULT_SERVICE_SUBNET]:
        try:
            return str(ipaddress.ip_network(subnet.strip(), strict=False).network_address + SERVICE_DNS_INDEX)
        except ValueError:
            return ""
    return ""


def address_config_controller() -> TransformController[AddressSpecSpec]:
    def derive(ctx: ControllerContext) -> Iterator[tuple[str, AddressSpecSpec]]:
        yield (
            "lo/127.0.0.1/8",
            AddressSpecSpec(address="127.0.0.1/8", link_name="lo", family="inet4", scope="host"),
        )
        yield "lo/::1/128", AddressSpecSpec(address="::1/128", link_name="lo", family="inet6", scope="host")
        config = config_or_none(ctx)
        if service := host_dns_service_address(config):
            # Talos's HostDNSConfigController puts it on lo (operator layer) so the host DNS can listen
            # there: CoreDNS forwards to it through the host-dns Service, whose endpoint it is too.
            host = ipaddress.ip_network(service)
            yield (
                f"lo/{host}",
                AddressSpecSpec(address=str(host), link_name="lo", family=_family(host.version),
                                scope="host", layer=ConfigLayer.OPERATOR),
            )  # fmt: skip
        for name, device in _addressed(config, _links(ctx)):
            for text in [*(device.addresses or []), *([device.cidr] if device.cidr else [])]:
                try:
                    prefix = parse_address(text)
                except ValueError:
                    ctx.logger.warning(f"skipping address {text!r} of {name}: not an address",
                                       key="machine.network.interfaces[].addresses")  # fmt: skip
                    continue
                yield (
                    f"{name}/{prefix}",
                    AddressSpecSpec(
                        address=str(prefix),
                        link_name=name,
                        family=_family(prefix.version),
                        layer=_CONFIGURATION,
                    ),
                )

    return config_controller("network.AddressConfigController", ADDRESS_SPECS, _INPUTS, derive)


def route_spec_of(
    link: str, *, network: str | None, gateway: str | None, source: str | None = None,
    metric: int | None = None, mtu: int | None = None, layer: ConfigLayer = _CONFIGURATION,
) -> RouteSpecSpec:  # fmt: skip
    """One ``routes[]`` entry as Talos normalizes it: ``0.0.0.0/0`` and zero addresses become empty."""
    dst = ipaddress.ip_network(network.strip(), strict=False) if network else None
    gw = ipaddress.ip_address(gateway.strip()) if gateway else None
    src = ipaddress.ip_address(source.strip()) if source else None
    version = (gw or dst or src or ipaddress.ip_address("0.0.0.0")).version
    if dst is not None and dst.prefixlen == 0:
        dst = None
    if gw is not None and gw.is_unspecified:
        gw = None
    if dst is not None and gw is None:
        scope = "link"
    elif dst is not None and dst.network_address.is_loopback:
        scope = "host"
    else:
        scope = "global"
    return RouteSpecSpec(
        family=_family(version), dst=str(dst) if dst else "", src=str(src) if src else "",
        gateway=str(gw) if gw else "", out_link_name=link, priority=metric or DEFAULT_ROUTE_METRIC,
        scope=scope, mtu=mtu or 0, layer=layer,
    )  # fmt: skip


def route_config_controller() -> TransformController[RouteSpecSpec]:
    waits = ProblemWaits()

    def derive(ctx: ControllerContext) -> Iterator[tuple[str, RouteSpecSpec]]:
        config, links = config_or_none(ctx), _links(ctx)
        waits.publish(ctx, unreachable_gateways(config, links, _addresses(ctx)))
        for name, device in _addressed(config, links):
            for route in device.routes or []:
                try:
                    spec = route_spec_of(name, network=route.network, gateway=route.gateway,
                                         source=route.source, metric=route.metric, mtu=route.mtu)  # fmt: skip
                except ValueError as err:
                    ctx.logger.warning(f"skipping a route of {name}: {err}",
                                       key="machine.network.interfaces[].routes")  # fmt: skip
                    continue
                yield spec.id, spec

    return config_controller("network.RouteConfigController", ROUTE_SPECS, _WITH_ADDRESSES, derive)


def operator_config_controller() -> TransformController[OperatorSpecSpec]:
    waits = ProblemWaits()

    def derive(ctx: ControllerContext) -> Iterator[tuple[str, OperatorSpecSpec]]:
        links, config = _links(ctx), config_or_none(ctx)
        waits.publish(ctx, vips_outside(config, links, _addresses(ctx)))
        for name in _unmentioned_physical(config, links):
            spec = OperatorSpecSpec(operator="dhcp4", link_name=name, require_up=True,
                                    dhcp4=DHCP4OperatorSpec(route_metric=DEFAULT_ROUTE_METRIC))  # fmt: skip
            yield spec.id, spec
        for name, device in _addressed(config, links):
            options = device.dhcp_options
            if not device.dhcp or (options is not None and options.ipv4 is False):
                continue
            metric = (options.route_metric if options is not None else None) or DEFAULT_ROUTE_METRIC
            spec = OperatorSpecSpec(operator="dhcp4", link_name=name, require_up=True,
                                    dhcp4=DHCP4OperatorSpec(route_metric=metric), layer=_CONFIGURATION)  # fmt: skip
            yield spec.id, spec
        control_plane = (
            config is not None
            and config.machine is not None
            and config.machine.type in ("controlplane", "init")
        )
        for name, device in _addressed(config, links) if control_plane else ():
            if device.vip is not None and device.vip.ip:
                spec = OperatorSpecSpec(operator="vip", link_name=name, require_up=True,
                                        vip=VIPOperatorSpec(ip=device.vip.ip), layer=_CONFIGURATION)  # fmt: skip
                yield spec.id, spec

    return config_controller("network.OperatorConfigController", OPERATOR_SPECS, _WITH_ADDRESSES, derive)
