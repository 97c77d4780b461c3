"""A DHCPv4 client of Ichor's own: messages, the lease state machine, and the link transport.

* :mod:`._packet`: DHCP messages to bytes and back, and the :class:`Lease` an ACK grants;
* :mod:`._client`: :class:`DHCP4Client`, RFC 2131's states with an injectable clock;
* :mod:`._socket`: :func:`raw_transports`, the packet/UDP sockets on one link.

Why not pyroute2's ``AsyncDHCPClient`` (0.9): it keeps its lease in a JSON file and a pidfile,
installs process-wide signal handlers and reads the wall clock directly; machined needs leases as
resources, no global state and a clock tests can drive.

Exceptions::

    DHCPPacketError (ValueError)   bytes that are not a well-formed DHCPv4 message or usable lease
    OSError                        the link's sockets could not be opened (no such link, no CAP_NET_RAW)

This package never changes the kernel's addresses or routes: the network operator turns leases into
specs.
"""

from __future__ import annotations

from ichor.machined.dhcp4._client import DHCP4Client, Transport, TransportFactory
from ichor.machined.dhcp4._packet import (
    BOOTREPLY,
    BOOTREQUEST,
    DHCPPacketError,
    Lease,
    MessageType,
    Option,
    Packet,
    decode,
    lease_of,
)
from ichor.machined.dhcp4._socket import raw_transports

__all__ = [
    "BOOTREPLY",
    "BOOTREQUEST",
    "DHCP4Client",
    "DHCPPacketError",
    "Lease",
    "MessageType",
    "Option",
    "Packet",
    "Transport",
    "TransportFactory",
    "decode",
    "lease_of",
    "raw_transports",
]
