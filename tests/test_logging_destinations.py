"""Logging destinations (004:712-722): Talos's log line extraction (the cases of Talos 1.7.6's
``runtime/logging/extract_test.go``), its ``json_lines`` fields with ``extraTags``, and the shipper
sending a service log's lines over TCP and UDP to receivers on the loopback."""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ichor.machined.logsend import JsonLinesSender, LogEvent, LogShipper, json_line, parse_log_line

NOW = datetime(2024, 6, 1, 8, 0, 0, 250000, tzinfo=UTC)


TALOS_NOW = datetime(2021, 10, 19, 12, 42, 37, 123456, tzinfo=UTC)
MIRROR = 'pods \\"kube-controller-manager-talos-dev-qemu-master-1\\" already exists'


@pytest.mark.parametrize(
    ("line", "msg", "level", "when", "fields"),
    [
        ("[talos] task updateBootloader (1/1): done, 219.885384ms",
         "[talos] task updateBootloader (1/1): done, 219.885384ms", "info", TALOS_NOW, {}),
        ('reconfigured wireguard link {"component": "controller-runtime", "controller": "network.LinkSpecController", "link": "kubespan", "peers": 4}',
         "reconfigured wireguard link", "info", TALOS_NOW,
         {"component": "controller-runtime", "controller": "network.LinkSpecController", "link": "kubespan", "peers": 4}),
        ('{"level":"info","ts":"2021-10-19T14:53:05.815Z","caller":"mvcc/kvstore_compaction.go:57","msg":"finished scheduled compaction","compact-revision":34567,"took":"21.041639ms"}',
         "finished scheduled compaction", "info", datetime(2021, 10, 19, 14, 53, 5, 815000, tzinfo=UTC),
         {"caller": "mvcc/kvstore_compaction.go:57", "compact-revision": 34567, "took": "21.041639ms"}),
        ('{"level":"warning","msg":"cleanup warnings time=\\"2021-10-19T14:52:20Z\\" level=info msg=\\"starting signal loop\\" namespace=k8s.io pid=2629\\n","time":"2021-10-19T14:52:20.578858Z"}',
         'cleanup warnings time="2021-10-19T14:52:20Z" level=info msg="starting signal loop" namespace=k8s.io pid=2629',
         "warn", datetime(2021, 10, 19, 14, 52, 20, 578858, tzinfo=UTC), {}),
        ('{"ts":1635266764792.703,"caller":"topologymanager/scope.go:110","msg":"RemoveContainer","v":0,"containerID":"0194fac9"}',
         "RemoveContainer", "info", datetime(2021, 10, 26, 16, 46, 4, 792703, tzinfo=UTC),
         {"caller": "topologymanager/scope.go:110", "containerID": "0194fac9", "v": 0}),
        ('{"ts":1635266751595.943,"caller":"kubelet/kubelet.go:1703","msg":"Failed creating a mirror pod for",'
         f'"pod":"kube-system/kube-controller-manager-talos-dev-qemu-master-1","err":"{MIRROR}"}}',
         'Failed creating a mirror pod for: pods "kube-controller-manager-talos-dev-qemu-master-1" already exists',
         "warn", datetime(2021, 10, 26, 16, 45, 51, 595943, tzinfo=UTC),
         {"caller": "kubelet/kubelet.go:1703", "pod": "kube-system/kube-controller-manager-talos-dev-qemu-master-1"}),
    ],
)  # fmt: skip
def test_lines_become_talos_events(
    line: str, msg: str, level: str, when: datetime, fields: dict[str, object]
) -> None:
    event = parse_log_line(line.encode() + b"\n", TALOS_NOW)
    assert (event.msg, event.level, event.fields) == (msg, level, fields)
    assert abs((event.time - when).total_seconds()) < 0.001


def test_json_line_has_talos_fields_and_extra_tags() -> None:
    event = LogEvent(msg="hello <world>", time=NOW, level="warn", fields={"talos-service": "apid", "n": 1.0})
    line = json_line(event, {"server": "s03-rack07"})
    assert line == (
        b'{"msg":"hello \\u003cworld\\u003e","n":1,"server":"s03-rack07","talos-level":"warn",'
        b'"talos-service":"apid","talos-time":"2024-06-01T08:00:00.25Z"}'
    )


def test_an_endpoint_other_than_tcp_or_udp_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported logging endpoint"):
        JsonLinesSender("http://127.0.0.1:1/")


def test_service_log_lines_reach_tcp_and_udp_receivers(tmp_path: Path) -> None:
    logs = tmp_path / "var/log"
    logs.mkdir(parents=True)
    (logs / "apid.log").write_text("before any destination\n")
    (logs / "console.log").write_text("not a service log\n")
    tcp_lines: list[bytes] = []
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)

    async def receive_tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            tcp_lines.append(line)
        writer.close()

    async def main() -> list[bytes]:
        server = await asyncio.start_server(receive_tcp, "127.0.0.1", 0)
        tcp_port = server.sockets[0].getsockname()[1]
        shipper = LogShipper(logs, now=lambda: NOW, poll_interval=0.05)
        runner = asyncio.create_task(shipper.run())
        try:
            await asyncio.sleep(0.2)  # nothing is sent (nor lost) without a destination
            assert tcp_lines == []
            await shipper.set_senders([
                JsonLinesSender(f"tcp://127.0.0.1:{tcp_port}/", {"server": "s03-rack07"}),
                JsonLinesSender(f"udp://127.0.0.1:{udp.getsockname()[1]}/", {"via": "udp"}),
            ])  # fmt: skip
            with (logs / "etcd.log").open("a") as etcd:
                etcd.write('{"level":"warn","ts":"2024-06-01T07:59:00Z","msg":"slow fdatasync"}\n')
            datagrams = []
            loop = asyncio.get_running_loop()
            while len(datagrams) < 2:
                datagrams.append(await asyncio.wait_for(loop.sock_recv(udp, 65536), 4))
            while len(tcp_lines) < 2:
                await asyncio.sleep(0.02)
            return datagrams
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            server.close()
            udp.close()

    datagrams = asyncio.run(asyncio.wait_for(main(), 8))
    received = sorted((json.loads(line) for line in tcp_lines), key=lambda e: e["talos-service"])
    assert all(line.endswith(b"\n") for line in tcp_lines)  # newline-delimited over TCP
    assert received == [
        {"msg": "before any destination", "server": "s03-rack07", "talos-level": "info",
         "talos-service": "apid", "talos-time": "2024-06-01T08:00:00.25Z"},
        {"msg": "slow fdatasync", "server": "s03-rack07", "talos-level": "warn",
         "talos-service": "etcd", "talos-time": "2024-06-01T07:59:00Z"},
    ]  # fmt: skip
    by_service = {json.loads(d)["talos-service"]: json.loads(d) for d in datagrams}  # one event per datagram
    assert set(by_service) == {"apid", "etcd"} and by_service["etcd"]["via"] == "udp"
