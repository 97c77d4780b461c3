"""tests/vlan_probe.py: the tagged ARP request it sends and the replies it accepts."""

from __future__ import annotations

import socket
import struct

from vlan_probe import ETH_P_8021Q, arp_request, reply_from

MAC = bytes.fromhex("020000000001")
VM_MAC = bytes.fromhex("525400494302")


def _reply(vlan: int | None, sender_ip: str, op: int = 2) -> bytes:
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, VM_MAC, socket.inet_aton(sender_ip), MAC,
                      socket.inet_aton("10.9.0.1"))  # fmt: skip
    head = MAC + VM_MAC
    if vlan is None:
        return head + struct.pack("!H", 0x0806) + arp
    return head + struct.pack("!HHH", ETH_P_8021Q, vlan, 0x0806) + arp


def test_the_request_is_a_tagged_arp_who_has() -> None:
    frame = arp_request(MAC, 100, "10.9.0.1", "10.9.0.2")
    assert frame[:12] == b"\xff" * 6 + MAC
    assert struct.unpack("!HHH", frame[12:18]) == (ETH_P_8021Q, 100, 0x0806)
    assert struct.unpack("!HHBBH", frame[18:26]) == (1, 0x0800, 6, 4, 1)
    assert frame[-4:] == socket.inet_aton("10.9.0.2") and len(frame) == 18 + 28


def test_a_reply_counts_only_from_the_target_on_the_vlan() -> None:
    assert reply_from(_reply(100, "10.9.0.2"), None, 100, "10.9.0.2") == "52:54:00:49:43:02"
    assert reply_from(_reply(None, "10.9.0.2"), 100, 100, "10.9.0.2") == "52:54:00:49:43:02"  # tag in auxdata
    assert reply_from(_reply(None, "10.9.0.2"), None, 100, "10.9.0.2") is None  # untagged
    assert reply_from(_reply(200, "10.9.0.2"), None, 100, "10.9.0.2") is None  # another VLAN
    assert reply_from(_reply(100, "10.9.0.3"), None, 100, "10.9.0.2") is None  # another address
    assert reply_from(_reply(100, "10.9.0.2", op=1), None, 100, "10.9.0.2") is None  # a request
