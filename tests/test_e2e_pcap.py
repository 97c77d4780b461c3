"""``talosctl pcap``'s capture in a fresh network namespace: a real UDP packet written as a pcap file."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest
from test_pcap import CHILD, SRC, read_pcap

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_udp_packet_in_a_fresh_namespace_is_captured_as_pcap() -> None:
    child = subprocess.run(["unshare", "--net", sys.executable, "-c", CHILD], capture_output=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(SRC)}, check=True)  # fmt: skip
    _, packets = read_pcap(child.stdout)
    assert len(packets) == 1
    frame = packets[0]
    assert struct.unpack_from("!H", frame, 12)[0] == 0x0800  # IPv4 in Ethernet
    assert frame[14 + 12 : 14 + 20] == bytes([127, 0, 0, 1, 127, 0, 0, 1])
    assert frame.endswith(b"ichor-pcap-probe")
