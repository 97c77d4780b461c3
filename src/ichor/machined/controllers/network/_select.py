"""Which links a ``machine.network.interfaces[]`` entry names, and how its addresses parse (shared by
the config controllers and the checks of ``checks.py``)."""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Mapping

from ichor.machined.resources import IPPrefix, LinkStatusSpec
from ichor.machinery.config._models import Device, NetworkDeviceSelector

__all__ = ["parse_address", "select_by_selector", "select_links"]


def _glob(pattern: str | None, value: str) -> bool:
    return pattern is None or fnmatch.fnmatchcase(value.lower(), pattern.lower())


def select_links(device: Device, links: Mapping[str, LinkStatusSpec]) -> list[str]:
    """The links a device entry configures: its ``interface``, or every link its selector matches."""
    if device.interface:
        return [device.interface]
    return select_by_selector(device.device_selector, links)


def select_by_selector(
    selector: NetworkDeviceSelector | None, links: Mapping[str, LinkStatusSpec]
) -> list[str]:
    """Every link a ``deviceSelector`` (of an interface or a bond's members) matches, sorted."""
    if selector is None:
        return []
    return sorted(
        name for name, link in links.items()
        if _glob(selector.hardware_addr, link.hardware_addr) and _glob(selector.driver, link.driver)
        and _glob(selector.bus_path, link.bus_path) and (not selector.physical or link.physical)
        and any(v is not None for v in (selector.hardware_addr, selector.driver, selector.bus_path, selector.physical))
    )  # fmt: skip


def parse_address(text: str) -> IPPrefix:
    """``10.5.0.2/24``, or a bare address with a netmask of all ones (``10.5.0.2`` -> ``/32``)."""
    return ipaddress.ip_interface(text.strip())
