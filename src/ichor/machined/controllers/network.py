"""Area ``network``: the node's hostname and addresses.

* ``network.HostnameController``: MachineConfig -> HostnameStatus (``machine.network.hostname``,
  else Talos's address-derived default);
* ``network.NodeAddressController``: the node's one address -> NodeAddresses (default, current,
  routed, accumulative): a process node owns one 127.x address, whatever the config says;
* ``network.AddressStatusController``: that address as an AddressStatus on ``lo``.
"""

from __future__ import annotations

import ipaddress

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, TransformController
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_STATUSES,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    NODE_ADDRESS_ACCUMULATIVE_ID,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESS_DEFAULT_ID,
    NODE_ADDRESS_ROUTED_ID,
    NODE_ADDRESSES,
    AddressFamily,
    AddressScope,
    AddressStatusSpec,
    HostnameStatusSpec,
    NodeAddressSpec,
)
from ichor.machinery.config import Config

__all__ = [
    "address_status_controller",
    "default_hostname",
    "hostname_controller",
    "hostname_of",
    "node_address_controller",
]


def default_hostname(address: str) -> str:
    """Talos's address-derived default (``talos-<ip with dashes>``), used when the config names none."""
    return "talos-" + address.replace(".", "-").replace(":", "-")


def hostname_of(config: Config, address: str) -> str:
    """``machine.network.hostname``, else Talos's address-derived default."""
    network = config.machine.network if config.machine is not None else None
    return (network.hostname if network is not None else None) or default_hostname(address)


def hostname_controller(layout: Layout) -> TransformController[HostnameStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, HostnameStatusSpec]:
        host, _, domain = hostname_of(active_config(ctx), layout.address).partition(".")
        return {HOSTNAME_STATUS_ID: HostnameStatusSpec(host, domain)}

    return TransformController(
        "network.HostnameController", inputs=[ACTIVE_CONFIG], output=HOSTNAME_STATUSES, map_inputs=derive
    )


def _own_prefix(layout: Layout) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    return ipaddress.ip_interface(f"{layout.address}/{32 if ':' not in layout.address else 128}")


def node_address_controller(layout: Layout) -> TransformController[NodeAddressSpec]:
    prefix = _own_prefix(layout)
    ids = (
        NODE_ADDRESS_DEFAULT_ID,
        NODE_ADDRESS_CURRENT_ID,
        NODE_ADDRESS_ROUTED_ID,
        NODE_ADDRESS_ACCUMULATIVE_ID,
    )

    def derive(ctx: ControllerContext) -> dict[str, NodeAddressSpec]:
        spec = NodeAddressSpec((prefix,))
        return dict.fromkeys(ids, spec)

    return TransformController(
        "network.NodeAddressController", inputs=[], output=NODE_ADDRESSES, map_inputs=derive
    )


def address_status_controller(layout: Layout) -> TransformController[AddressStatusSpec]:
    prefix = _own_prefix(layout)
    family = AddressFamily.INET6 if prefix.version == 6 else AddressFamily.INET4

    def derive(ctx: ControllerContext) -> dict[str, AddressStatusSpec]:
        spec = AddressStatusSpec(address=prefix, local=prefix.ip, link_index=1, link_name="lo", family=family,
                                 scope=AddressScope.HOST, flags="permanent")  # fmt: skip
        return {f"lo/{prefix}": spec}

    return TransformController(
        "network.AddressStatusController", inputs=[], output=ADDRESS_STATUSES, map_inputs=derive
    )
