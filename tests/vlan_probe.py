"""``python vlan_probe.py <link> <vlan id> <sender ip> <target ip> [seconds]``: ask ``target ip`` for its
MAC address with an 802.1Q-tagged ARP request on ``link`` and wait for the tagged reply.

Run inside a network namespace of the test's own: it proves VLAN traffic reaches a node and comes
back without a VLAN device on this side (a host-side ``type vlan`` link needs the ``8021q`` module
in the host's kernel, which a test must not load). The reply's tag is read from the frame or, when
the link strips it on receive (VLAN offload), from the packet socket's auxiliary data. Prints the
replying MAC address and exits 0, or exits 1 after ``seconds`` (default 5) of silence.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4
_AUXDATA = struct.Struct("=IIIHHHH")  # tpacket_auxdata: status, len, snaplen, mac, net, vlan_tci, vlan_tpid


def arp_request(mac: bytes, vlan: int, sender: str, target: str) -> bytes:
    arp = struct.pack(
        "!HHBBH6s4s6s4s",
        1,
        0x0800,
        6,
        4,
        1,
        mac,
        socket.inet_aton(sender),
        b"\0" * 6,
        socket.inet_aton(target),
    )
    return b"\xff" * 6 + mac + struct.pack("!HHH", ETH_P_8021Q, vlan & 0x0FFF, ETH_P_ARP) + arp


def reply_from(frame: bytes, aux_vlan: int | None, vlan: int, target: str) -> str | None:
    """The MAC address of ``target``'s ARP reply on ``vlan`` in ``frame``, or None."""
    (ethertype,) = struct.unpack("!H", frame[12:14])
    if ethertype == ETH_P_8021Q:
        tci, inner = struct.unpack("!HH", frame[14:18])
        tag, payload = tci & 0x0FFF, frame[18:]
    else:
        tag, inner, payload = aux_vlan, ethertype, frame[14:]
    if tag != vlan or inner != ETH_P_ARP or len(payload) < 28:
        return None
    op, sender_mac, sender_ip = struct.unpack("!6xH6s4s", payload[:18])
    if op != 2 or socket.inet_ntoa(sender_ip) != target:
        return None
    return ":".join(f"{b:02x}" for b in sender_mac)


def main(argv: list[str]) -> int:
    link, vlan, sender, target = argv[0], int(argv[1]), argv[2], argv[3]
    limit = float(argv[4]) if len(argv) > 4 else 5.0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as sock:
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        sock.bind((link, 0))
        mac = sock.getsockname()[4]
        sock.send(arp_request(mac, vlan, sender, target))
        deadline = time.monotonic() + limit
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                frame, ancillary, _flags, _address = sock.recvmsg(2048, socket.CMSG_SPACE(_AUXDATA.size))
            except TimeoutError:
                break
            aux_vlan = None
            for level, kind, data in ancillary:
                if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= _AUXDATA.size:
                    status, _, _, _, _, tci, _ = _AUXDATA.unpack(data[: _AUXDATA.size])
                    if status & TP_STATUS_VLAN_VALID:
                        aux_vlan = tci & 0x0FFF
            found = reply_from(frame, aux_vlan, vlan, target)
            if found is not None:
                print(found)
                return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
