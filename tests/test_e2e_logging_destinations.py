"""End to end: ``machine.logging.destinations`` (004:712-722) on a process cluster.

One control plane whose config sends ``json_lines`` to a TCP and a UDP receiver this test runs on
the loopback, each with its own ``extraTags``: both receive the node's service logs (machined's,
etcd's, ...) as Talos's JSON objects (``msg``, ``talos-service``, ``talos-level``, ``talos-time`` and
the tags), newline-delimited over TCP and one per datagram over UDP.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import talosctl_in

pytestmark = pytest.mark.e2e


class _Receivers:
    """A TCP and a UDP receiver on 127.0.0.1 collecting JSON objects, in threads."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.5)
        self.tcp.settimeout(0.5)
        self.tcp_events: list[dict[str, Any]] = []
        self.udp_events: list[dict[str, Any]] = []
        self.tcp_raw = b""
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._serve_tcp), threading.Thread(target=self._serve_udp)]
        for thread in self.threads:
            thread.start()

    def _serve_tcp(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except TimeoutError:
                continue
            conn.settimeout(0.5)
            with conn:
                while not self.stop.is_set():
                    try:
                        data = conn.recv(65536)
                    except TimeoutError:
                        continue
                    if not data:
                        break
                    self.tcp_raw += data
                    *lines, self.tcp_raw = self.tcp_raw.split(b"\n")
                    self.tcp_events += [json.loads(line) for line in lines if line]

    def _serve_udp(self) -> None:
        while not self.stop.is_set():
            try:
                self.udp_events.append(json.loads(self.udp.recv(65536)))
            except TimeoutError:
                continue

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)
        self.tcp.close()
        self.udp.close()


def test_service_logs_reach_tcp_and_udp_receivers_with_extra_tags(tmp_path: Path) -> None:
    name, prefix = "logdest", f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    receivers = _Receivers()
    tcp_port, udp_port = receivers.tcp.getsockname()[1], receivers.udp.getsockname()[1]
    (tmp_path / "logging.yaml").write_text(
        "machine:\n  logging:\n    destinations:\n"
        f"      - endpoint: tcp://127.0.0.1:{tcp_port}/\n        format: json_lines\n"
        "        extraTags:\n          server: s03-rack07\n"
        f"      - endpoint: udp://127.0.0.1:{udp_port}/\n        format: json_lines\n"
        "        extraTags:\n          via: udp\n"
    )
    try:
        created = talosctl_in(tmp_path, "cluster", "create", "--provisioner", "process", "--name", name,
                              "--cidr", f"{prefix}.0/24", "--workers", "0", "--wait-timeout", "3m",
                              "--config-patch", f"@{tmp_path / 'logging.yaml'}", timeout=300)  # fmt: skip
        try:
            assert created.exit_code == 0, created.stderr[-3000:]
            deadline = time.monotonic() + 30
            wanted = {"machined", "etcd"}
            while time.monotonic() < deadline:
                tcp = {e.get("talos-service") for e in receivers.tcp_events}
                udp = {e.get("talos-service") for e in receivers.udp_events}
                if wanted <= tcp and wanted <= udp:
                    break
                time.sleep(0.5)
            tcp_services = {e.get("talos-service") for e in receivers.tcp_events}
            udp_services = {e.get("talos-service") for e in receivers.udp_events}
            assert wanted <= tcp_services and wanted <= udp_services, (tcp_services, udp_services)
            for event in receivers.tcp_events:
                assert event["server"] == "s03-rack07" and "via" not in event, event
                assert {"msg", "talos-level", "talos-service", "talos-time"} <= set(event), event
            assert all(e["via"] == "udp" and "server" not in e for e in receivers.udp_events)
            booted = [e for e in receivers.tcp_events if e["talos-service"] == "machined"]
            assert any(e["msg"].startswith("serving machine API on ") for e in booted), booted[:5]
        finally:
            destroyed = talosctl_in(tmp_path, "cluster", "destroy", "--name", name)
        assert destroyed.exit_code == 0, destroyed.stderr
    finally:
        receivers.close()
