"""Network resources about reachability and identity, in namespace ``network``, as Talos 1.7 has them.

* ``HardwareAddresses`` (id ``first``): the name and MAC of the first physical link (Talos's rule:
  type ``ether`` and no kind, so a container node's ``veth`` is not one, as on Talos in Docker; a
  process node sees the host's links, so its first physical link is the host's);
* ``DNSUpstreams`` (id = the resolver's address): each upstream the host DNS forwards to while host
  DNS is enabled, and whether it answered its last health check (Talos's has no protobuf spec:
  only its YAML, ``healthy`` and ``addr``, both strings);
* ``ProbeSpecs`` (id ``tcp:<host:port>``): a TCP reachability probe to run;
* ``ProbeStatuses`` (aliases ``probe``, ``probes``): each probe's result.

Types only; ``controllers.network.probes`` fills them.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from ichor.machined.cosi import PrintColumn, ResourceType
from ichor.machined.resources._network_stack import ConfigLayer

__all__ = [
    "DNS_UPSTREAMS",
    "FIRST_HARDWARE_ADDR_ID",
    "HARDWARE_ADDRESSES",
    "NETWORK_PROBE_TYPES",
    "PROBE_SPECS",
    "PROBE_STATUSES",
    "DNSUpstreamSpec",
    "HardwareAddrSpec",
    "ProbeSpecSpec",
    "ProbeStatusSpec",
    "TCPProbeSpec",
]

FIRST_HARDWARE_ADDR_ID = "first"


@dataclasses.dataclass(frozen=True)
class HardwareAddrSpec:
    name: str = ""
    hardware_addr: str = ""
    """``aa:bb:cc:dd:ee:ff``, as Talos's YAML writes a ``nethelpers.HardwareAddr``."""


@dataclasses.dataclass(frozen=True)
class DNSUpstreamSpec:
    """Talos marshals both values as strings (``"true"``, ``"8.8.8.8:53"``)."""

    healthy: str = "false"
    addr: str = ""


@dataclasses.dataclass(frozen=True)
class TCPProbeSpec:
    endpoint: str = ""
    """``host:port``."""
    timeout: timedelta = timedelta(0)


@dataclasses.dataclass(frozen=True)
class ProbeSpecSpec:
    interval: timedelta = timedelta(0)
    """Between two probes (Go's zero, 0s, is taken as one second)."""
    failure_threshold: int = 0
    """Consecutive failures before a probe that succeeded is reported failed."""
    tcp: TCPProbeSpec = TCPProbeSpec()
    layer: ConfigLayer = ConfigLayer.DEFAULT

    @property
    def id(self) -> str:
        """Talos's id of the probe: ``tcp:<endpoint>``."""
        return f"tcp:{self.tcp.endpoint}"


@dataclasses.dataclass(frozen=True)
class ProbeStatusSpec:
    success: bool = False
    last_error: str = ""


HARDWARE_ADDRESSES: ResourceType[HardwareAddrSpec] = ResourceType(
    type="HardwareAddresses.net.talos.dev", default_namespace="network", spec_class=HardwareAddrSpec
)
DNS_UPSTREAMS: ResourceType[DNSUpstreamSpec] = ResourceType(
    type="DNSUpstreams.net.talos.dev", default_namespace="network", spec_class=DNSUpstreamSpec,
    print_columns=(PrintColumn("Healthy", "{.healthy}"), PrintColumn("Address", "{.addr}")),
)  # fmt: skip
PROBE_SPECS: ResourceType[ProbeSpecSpec] = ResourceType(
    type="ProbeSpecs.net.talos.dev", default_namespace="network", spec_class=ProbeSpecSpec
)
PROBE_STATUSES: ResourceType[ProbeStatusSpec] = ResourceType(
    type="ProbeStatuses.net.talos.dev", default_namespace="network", spec_class=ProbeStatusSpec,
    aliases=("probe", "probes"), print_columns=(PrintColumn("Success", "{.success}"),),
)  # fmt: skip

NETWORK_PROBE_TYPES: tuple[ResourceType[Any], ...] = (
    HARDWARE_ADDRESSES,
    DNS_UPSTREAMS,
    PROBE_SPECS,
    PROBE_STATUSES,
)
