"""The node's hostname and DNS resolvers, layered as Talos layers them.

* ``network.HostnameConfigController``: ``default`` layer ``talos-<address with dashes>``,
  ``configuration`` layer ``machine.network.hostname`` -> layered HostnameSpecs;
* ``network.HostnameMergeController``: the highest layer -> HostnameSpec ``hostname``;
* ``network.HostnameSpecController``: HostnameSpec -> HostnameStatus ``hostname``; on a node with a
  UTS namespace of its own (``Layout.own_uts``) it first sets the kernel's hostname and domain name
  (sethostname/setdomainname). A process node shares the host's UTS namespace: never set there;
* ``network.ResolverConfigController``: ``default`` layer 1.1.1.1 and 8.8.8.8 (Talos's),
  ``configuration`` layer ``machine.network.nameservers`` -> layered ResolverSpecs;
* ``network.ResolverMergeController`` -> ResolverSpec ``resolvers``;
* ``network.ResolverSpecController`` -> ResolverStatus ``resolvers`` (``/etc/resolv.conf`` is the
  etcfiles controllers' job, not built yet).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
from collections.abc import Callable, Iterator

from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.controllers.network._layers import config_controller, merge_controller
from ichor.machined.controllers.network.config import config_or_none
from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_SPECS,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    RESOLVER_ID,
    RESOLVER_SPECS,
    RESOLVER_STATUSES,
    ConfigLayer,
    HostnameSpecSpec,
    HostnameStatusSpec,
    ResolverSpecSpec,
    ResolverStatusSpec,
)
from ichor.machinery.config import Config

__all__ = [
    "DEFAULT_RESOLVERS",
    "default_hostname",
    "hostname_config_controller",
    "hostname_controllers",
    "hostname_merge_controller",
    "hostname_of",
    "hostname_spec_controller",
    "resolver_config_controller",
    "resolver_controllers",
    "resolver_merge_controller",
    "resolver_spec_controller",
    "set_kernel_hostname",
]

DEFAULT_RESOLVERS = ("1.1.1.1", "8.8.8.8")


def default_hostname(address: str) -> str:
    """Talos's address-derived default (``talos-<ip with dashes>``), used when the config names none."""
    return "talos-" + address.replace(".", "-").replace(":", "-")


def hostname_of(config: Config, address: str) -> str:
    """``machine.network.hostname``, else Talos's address-derived default."""
    network = config.machine.network if config.machine is not None else None
    return (network.hostname if network is not None else None) or default_hostname(address)


def _split(fqdn: str, layer: ConfigLayer) -> HostnameSpecSpec:
    host, _, domain = fqdn.partition(".")
    return HostnameSpecSpec(hostname=host, domainname=domain, layer=layer)


def hostname_config_controller(layout: Layout) -> TransformController[HostnameSpecSpec]:
    def derive(ctx: ControllerContext) -> Iterator[tuple[str, HostnameSpecSpec]]:
        yield HOSTNAME_STATUS_ID, _split(default_hostname(layout.address), ConfigLayer.DEFAULT)
        config = config_or_none(ctx)
        network = config.machine.network if config is not None and config.machine is not None else None
        if network is not None and network.hostname:
            yield HOSTNAME_STATUS_ID, _split(network.hostname, ConfigLayer.CONFIGURATION)

    return config_controller("network.HostnameConfigController", HOSTNAME_SPECS, [ACTIVE_CONFIG], derive)


def hostname_merge_controller() -> TransformController[HostnameSpecSpec]:
    return merge_controller("network.HostnameMergeController", HOSTNAME_SPECS)


KernelHostname = Callable[[str, str], None]
"""Sets the kernel's (hostname, domain name): :func:`set_kernel_hostname`, or a test's recorder."""


def set_kernel_hostname(hostname: str, domainname: str) -> None:
    """sethostname(2) and setdomainname(2) in the calling process's UTS namespace."""
    socket.sethostname(hostname)
    libc = ctypes.CDLL(None, use_errno=True)
    name = domainname.encode()
    if libc.setdomainname(name, len(name)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setdomainname({domainname!r}): {os.strerror(err)}")


def hostname_spec_controller(
    layout: Layout | None = None, set_kernel: KernelHostname = set_kernel_hostname
) -> TransformController[HostnameStatusSpec]:
    own_uts = layout is not None and layout.own_uts

    def derive(ctx: ControllerContext) -> dict[str, HostnameStatusSpec]:
        spec = ctx.get_or_none(HOSTNAME_SPECS, HOSTNAME_STATUS_ID)
        if spec is None:
            raise SkipReconcile
        if own_uts:
            try:
                set_kernel(spec.spec.hostname, spec.spec.domainname)
            except OSError as err:
                raise WaitingFor(
                    "kernel hostname set", f"{err} (machine.network.hostname)", retry_after=5.0
                ) from err
        return {HOSTNAME_STATUS_ID: HostnameStatusSpec(spec.spec.hostname, spec.spec.domainname)}

    controller = TransformController(
        "network.HostnameSpecController", inputs=[Input(HOSTNAME_SPECS, id=HOSTNAME_STATUS_ID)],
        output=HOSTNAME_STATUSES, map_inputs=derive,
    )  # fmt: skip
    if own_uts:
        controller.writes = "(the kernel's hostname, in the node's UTS namespace)"
    return controller


def hostname_controllers(layout: Layout) -> list[TransformController[HostnameSpecSpec] | TransformController[HostnameStatusSpec]]:  # fmt: skip
    """Config -> layered specs -> merged spec -> status, in registration order."""
    return [hostname_config_controller(layout), hostname_merge_controller(), hostname_spec_controller(layout)]


def resolver_config_controller() -> TransformController[ResolverSpecSpec]:
    def derive(ctx: ControllerContext) -> Iterator[tuple[str, ResolverSpecSpec]]:
        yield RESOLVER_ID, ResolverSpecSpec(dns_servers=DEFAULT_RESOLVERS, layer=ConfigLayer.DEFAULT)
        config = config_or_none(ctx)
        network = config.machine.network if config is not None and config.machine is not None else None
        servers: list[str] = []
        for text in (network.nameservers or []) if network is not None else []:
            try:
                servers.append(str(ipaddress.ip_address(text.strip())))
            except ValueError:
                ctx.logger.warning(f"skipping nameserver {text!r}: not an IP address",
                                   key="machine.network.nameservers")  # fmt: skip
        if servers:
            yield RESOLVER_ID, ResolverSpecSpec(dns_servers=tuple(servers), layer=ConfigLayer.CONFIGURATION)

    return config_controller("network.ResolverConfigController", RESOLVER_SPECS, [ACTIVE_CONFIG], derive)


def resolver_merge_controller() -> TransformController[ResolverSpecSpec]:
    return merge_controller("network.ResolverMergeController", RESOLVER_SPECS)


def resolver_spec_controller() -> TransformController[ResolverStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, ResolverStatusSpec]:
        spec = ctx.get_or_none(RESOLVER_SPECS, RESOLVER_ID)
        if spec is None:
            raise SkipReconcile
        return {RESOLVER_ID: ResolverStatusSpec(dns_servers=spec.spec.dns_servers,
                                                search_domains=spec.spec.search_domains)}  # fmt: skip

    return TransformController(
        "network.ResolverSpecController", inputs=[Input(RESOLVER_SPECS, id=RESOLVER_ID)],
        output=RESOLVER_STATUSES, map_inputs=derive,
    )  # fmt: skip


def resolver_controllers() -> list[
    TransformController[ResolverSpecSpec] | TransformController[ResolverStatusSpec]
]:
    return [resolver_config_controller(), resolver_merge_controller(), resolver_spec_controller()]
