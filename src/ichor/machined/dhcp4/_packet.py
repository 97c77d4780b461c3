"""DHCPv4 messages (RFC 2131/2132) as bytes and back, and the lease an ACK grants.

Everything that comes from the wire goes through :func:`decode` and :func:`lease_of`, which refuse a
malformed packet with :class:`DHCPPacketError` and never anything else: a DHCP server (or anyone on
the link) can send any bytes. Text options (hostname, domain, search list) end up in ``/etc/hosts``
and ``/etc/resolv.conf``, so names with characters that could inject content are refused.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import re
import struct

__all__ = [
    "BOOTREPLY",
    "BOOTREQUEST",
    "BROADCAST_FLAG",
    "DHCPPacketError",
    "Lease",
    "MessageType",
    "Option",
    "Packet",
    "decode",
    "lease_of",
]

BOOTREQUEST, BOOTREPLY = 1, 2
BROADCAST_FLAG = 0x8000
"""Asks the server to broadcast its reply: the client has no address to receive a unicast on yet."""
_MAGIC = b"\x63\x82\x53\x63"
_FIXED = struct.Struct("!BBBBIHH4s4s4s4s16s64s128s")
_UNSPECIFIED = ipaddress.IPv4Address(0)
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                       r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$")  # fmt: skip


class DHCPPacketError(ValueError):
    """A packet that is not a well-formed DHCPv4 message (or not a usable lease)."""


class MessageType(enum.IntEnum):
    DISCOVER = 1
    OFFER = 2
    REQUEST = 3
    DECLINE = 4
    ACK = 5
    NAK = 6
    RELEASE = 7
    INFORM = 8


class Option(enum.IntEnum):
    PAD = 0
    SUBNET_MASK = 1
    ROUTER = 3
    DNS_SERVERS = 6
    HOSTNAME = 12
    DOMAIN_NAME = 15
    INTERFACE_MTU = 26
    NTP_SERVERS = 42
    REQUESTED_ADDRESS = 50
    LEASE_TIME = 51
    MESSAGE_TYPE = 53
    SERVER_ID = 54
    PARAMETER_LIST = 55
    MESSAGE = 56
    MAX_MESSAGE_SIZE = 57
    RENEWAL_TIME = 58
    REBINDING_TIME = 59
    CLIENT_ID = 61
    DOMAIN_SEARCH = 119
    CLASSLESS_ROUTES = 121
    END = 255


@dataclasses.dataclass(frozen=True)
class Packet:
    """One BOOTP/DHCP message; options keep their wire order, each code at most once."""

    op: int
    xid: int
    chaddr: bytes
    """The client's hardware address (6 bytes for ethernet)."""
    options: tuple[tuple[int, bytes], ...] = ()
    secs: int = 0
    flags: int = 0
    ciaddr: ipaddress.IPv4Address = _UNSPECIFIED
    yiaddr: ipaddress.IPv4Address = _UNSPECIFIED
    siaddr: ipaddress.IPv4Address = _UNSPECIFIED
    giaddr: ipaddress.IPv4Address = _UNSPECIFIED

    def option(self, code: int) -> bytes | None:
        for key, value in self.options:
            if key == code:
                return value
        return None

    @property
    def message_type(self) -> MessageType | None:
        value = self.option(Option.MESSAGE_TYPE)
        if value is None or len(value) != 1 or value[0] not in MessageType._value2member_map_:
            return None
        return MessageType(value[0])

    def encode(self) -> bytes:
        if len(self.chaddr) > 16:
            raise DHCPPacketError(f"hardware address of {len(self.chaddr)} bytes: at most 16")
        fixed = _FIXED.pack(self.op, 1, len(self.chaddr), 0, self.xid, self.secs, self.flags,
                            self.ciaddr.packed, self.yiaddr.packed, self.siaddr.packed, self.giaddr.packed,
                            self.chaddr, b"", b"")  # fmt: skip
        body = bytearray(fixed + _MAGIC)
        for code, value in self.options:
            # RFC 3396: a value over 255 bytes is split over several instances of the option.
            chunks = [value[i : i + 255] for i in range(0, len(value), 255)] or [b""]
            for chunk in chunks:
                body += bytes((code, len(chunk))) + chunk
        body.append(Option.END)
        # RFC 2131's minimum BOOTP message (300 bytes): some relays and servers drop shorter ones.
        return bytes(body.ljust(300, b"\0"))


def decode(data: bytes) -> Packet:
    """Bytes of a UDP payload -> :class:`Packet`; :class:`DHCPPacketError` for anything malformed."""
    if len(data) < _FIXED.size + len(_MAGIC):
        raise DHCPPacketError(f"{len(data)} bytes: a DHCP message has at least {_FIXED.size + 4}")
    op, _, hlen, _, xid, secs, flags, ci, yi, si, gi, chaddr, _, _ = _FIXED.unpack_from(data)
    if op not in (BOOTREQUEST, BOOTREPLY):
        raise DHCPPacketError(f"op {op}: neither BOOTREQUEST nor BOOTREPLY")
    if hlen > 16:
        raise DHCPPacketError(f"hardware address length {hlen}: at most 16")
    if data[_FIXED.size : _FIXED.size + 4] != _MAGIC:
        raise DHCPPacketError("no DHCP magic cookie: a plain BOOTP message")
    options: dict[int, bytes] = {}
    pos, end = _FIXED.size + 4, len(data)
    while True:
        if pos >= end:
            raise DHCPPacketError("options run past the end of the packet without an END option")
        code = data[pos]
        if code == Option.END:
            break
        if code == Option.PAD:
            pos += 1
            continue
        if pos + 2 > end or pos + 2 + data[pos + 1] > end:
            raise DHCPPacketError(f"option {code} is truncated")
        length = data[pos + 1]
        # RFC 3396: repeated instances of an option are one value, concatenated.
        options[code] = options.get(code, b"") + data[pos + 2 : pos + 2 + length]
        pos += 2 + length
    addr = ipaddress.IPv4Address
    return Packet(op=op, xid=xid, chaddr=chaddr[:hlen], options=tuple(options.items()),
                  secs=secs, flags=flags, ciaddr=addr(ci), yiaddr=addr(yi), siaddr=addr(si), giaddr=addr(gi))  # fmt: skip


# --- the lease an ACK grants ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Lease:
    address: ipaddress.IPv4Interface
    """The leased address with the subnet's prefix (``10.5.0.2/24``)."""
    server: ipaddress.IPv4Address
    """The server identifier: where renewals go."""
    lease_time: int
    """Seconds; ``0xffffffff`` is infinite."""
    renew_after: int
    """T1, seconds after the ACK."""
    rebind_after: int
    """T2, seconds after the ACK."""
    routers: tuple[ipaddress.IPv4Address, ...] = ()
    classless_routes: tuple[tuple[ipaddress.IPv4Network, ipaddress.IPv4Address], ...] = ()
    dns_servers: tuple[ipaddress.IPv4Address, ...] = ()
    hostname: str = ""
    domain_name: str = ""
    search_domains: tuple[str, ...] = ()
    ntp_servers: tuple[ipaddress.IPv4Address, ...] = ()
    mtu: int = 0


def _u32(value: bytes, name: str) -> int:
    if len(value) != 4:
        raise DHCPPacketError(f"{name} is {len(value)} bytes, not 4")
    return int.from_bytes(value, "big")


def _addresses(value: bytes | None, name: str) -> tuple[ipaddress.IPv4Address, ...]:
    if value is None:
        return ()
    if not value or len(value) % 4:
        raise DHCPPacketError(f"{name} is {len(value)} bytes, not a list of IPv4 addresses")
    return tuple(ipaddress.IPv4Address(value[i : i + 4]) for i in range(0, len(value), 4))


def _name(value: bytes | None) -> str:
    """A DNS name from a text option, or "" when it is not one: it goes into /etc files, and a
    hostname with a newline must not add a line to them (Talos drops such names the same way)."""
    if value is None:
        return ""
    text = value.rstrip(b"\0").decode("ascii", errors="replace")
    return text if _DNS_NAME.match(text) else ""


def _search_list(value: bytes) -> tuple[str, ...]:
    """Option 119: RFC 1035 names, with compression pointers (RFC 3397)."""
    names: list[str] = []
    pos = 0
    while pos < len(value):
        labels: list[str] = []
        cursor, jumped, hops = pos, False, 0
        while True:
            if cursor >= len(value):
                raise DHCPPacketError("domain search list: a name runs past the option")
            length = value[cursor]
            if length & 0xC0 == 0xC0:
                if cursor + 1 >= len(value):
                    raise DHCPPacketError("domain search list: truncated compression pointer")
                target = ((length & 0x3F) << 8) | value[cursor + 1]
                hops += 1
                if target >= cursor or hops > 64:
                    raise DHCPPacketError("domain search list: a compression pointer does not point back")
                if not jumped:
                    pos = cursor + 2
                jumped, cursor = True, target
                continue
            if length & 0xC0:
                raise DHCPPacketError(f"domain search list: label length byte {length:#x}")
            if length == 0:
                if not jumped:
                    pos = cursor + 1
                break
            labels.append(value[cursor + 1 : cursor + 1 + length].decode("ascii", errors="replace"))
            cursor += 1 + length
        names.append(_name(".".join(labels).encode()))
    return tuple(name for name in names if name)


def _classless(value: bytes) -> tuple[tuple[ipaddress.IPv4Network, ipaddress.IPv4Address], ...]:
    """Option 121 (RFC 3442): width, significant octets of the destination, router."""
    routes = []
    pos = 0
    while pos < len(value):
        width = value[pos]
        if width > 32:
            raise DHCPPacketError(f"classless static route with a /{width} destination")
        octets = (width + 7) // 8
        if pos + 1 + octets + 4 > len(value):
            raise DHCPPacketError("classless static routes: a route is truncated")
        dst = value[pos + 1 : pos + 1 + octets].ljust(4, b"\0")
        router = ipaddress.IPv4Address(value[pos + 1 + octets : pos + 5 + octets])
        network = ipaddress.IPv4Network((int.from_bytes(dst, "big"), width), strict=False)
        routes.append((network, router))
        pos += 5 + octets
    return tuple(routes)


def lease_of(packet: Packet) -> Lease:
    """The lease an OFFER or ACK carries; :class:`DHCPPacketError` when it carries none."""
    if packet.yiaddr == _UNSPECIFIED:
        raise DHCPPacketError("the reply offers no address (yiaddr 0.0.0.0)")
    server = _addresses(packet.option(Option.SERVER_ID), "server identifier")
    if len(server) != 1:
        raise DHCPPacketError("the reply names no server identifier (option 54)")
    mask = packet.option(Option.SUBNET_MASK)
    try:
        prefix = ipaddress.IPv4Network(f"0.0.0.0/{ipaddress.IPv4Address(mask)}").prefixlen if mask else 32
    except (ValueError, ipaddress.AddressValueError) as err:
        raise DHCPPacketError(f"subnet mask {mask!r} is not a netmask") from err
    raw_time = packet.option(Option.LEASE_TIME)
    lease_time = _u32(raw_time, "lease time") if raw_time is not None else 3600
    t1 = packet.option(Option.RENEWAL_TIME)
    t2 = packet.option(Option.REBINDING_TIME)
    mtu_raw = packet.option(Option.INTERFACE_MTU)
    if mtu_raw is not None and len(mtu_raw) != 2:
        raise DHCPPacketError(f"interface MTU is {len(mtu_raw)} bytes, not 2")
    mtu = int.from_bytes(mtu_raw, "big") if mtu_raw else 0
    search = packet.option(Option.DOMAIN_SEARCH)
    return Lease(
        address=ipaddress.IPv4Interface((packet.yiaddr, prefix)), server=server[0], lease_time=lease_time,
        renew_after=_u32(t1, "renewal time") if t1 is not None else lease_time // 2,
        rebind_after=_u32(t2, "rebinding time") if t2 is not None else lease_time * 7 // 8,
        routers=_addresses(packet.option(Option.ROUTER), "router option"),
        classless_routes=_classless(packet.option(Option.CLASSLESS_ROUTES) or b""),
        dns_servers=_addresses(packet.option(Option.DNS_SERVERS), "DNS servers option"),
        hostname=_name(packet.option(Option.HOSTNAME)),
        domain_name=_name(packet.option(Option.DOMAIN_NAME)),
        search_domains=_search_list(search) if search else (),
        ntp_servers=_addresses(packet.option(Option.NTP_SERVERS), "NTP servers option"),
        mtu=mtu if mtu >= 68 else 0,
    )  # fmt: skip
