"""Kernel log delivery (``KmsgLogConfig``, ``talos.logging.kernel``): Talos's resource from the
kernel argument and the documents, and a kernel log (a file of ``/dev/kmsg`` records standing in
for the device) sent as Talos's JSON lines to real TCP and UDP receivers on 127.0.0.1; never sent
from a node whose ``/dev/kmsg`` is the host's.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from controller_helpers import apply, config, run, running

from ichor.machined.controllers import kmsg_log
from ichor.machined.cosi import WAIT_STATUSES, State, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.kmsg import parse_record, read_records
from ichor.machined.logsend import json_line
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import KMSG_LOG_CONFIGS, NETWORK_STATUSES
from ichor.machined.resources._network_stack import NetworkStatusSpec

WAIT_ID = "runtime.KmsgLogDeliveryController"
BOOTED = 1_800_000_000.0


def _documents(*urls: str) -> str:
    return config() + "".join(
        f"---\napiVersion: v1alpha1\nkind: KmsgLogConfig\nname: k{n}\nurl: {url}\n"
        for n, url in enumerate(urls)
    )


def _network_ready(state: State) -> None:
    state.create(NETWORK_STATUSES.new("status", NetworkStatusSpec(address_ready=True)))


def _metal(tmp_path: Path) -> tuple[Layout, Path]:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,1000,-;Linux version 6.6\n3,2,2500000,-;ata1: failed\n SUBSYSTEM=scsi\n")
    return Layout(tmp_path / "root", "127.0.0.1", platform=Platform.METAL, kernel_log=kmsg), kmsg


def _delivery(layout: Layout) -> kmsg_log.KmsgLogDeliveryController:
    return kmsg_log.KmsgLogDeliveryController(layout, booted=lambda: BOOTED, retry_interval=0.05)


def _free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TcpReceiver:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", port)
        return int(self.server.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            self.lines.append(json.loads(line))
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class UdpReceiver(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.datagrams: list[dict[str, Any]] = []

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.datagrams.append(json.loads(data))


async def _until(predicate: Any, timeout: float = 4.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def test_the_kernel_argument_and_every_document_give_the_destinations_once() -> None:
    args = KernelArgs.from_cmdline("talos.logging.kernel=tcp://10.5.0.1:4001 console=ttyS0")

    async def main() -> None:
        async with running(kmsg_log.kmsg_log_config_controller(args)) as state:
            apply(state, _documents("udp://10.5.0.1:4002", "tcp://10.5.0.1:4001"))
            resource = await assert_resource(
                state, KMSG_LOG_CONFIGS, "kmsg-log", lambda r: len(r.spec.destinations) == 2
            )
            assert resource.spec.destinations == ("tcp://10.5.0.1:4001", "udp://10.5.0.1:4002")
            # Talos's YAML shows each as a Go *url.URL
            assert spec_to_plain(resource.spec)["destinations"][1]["host"] == "10.5.0.1:4002"
        async with running(kmsg_log.kmsg_log_config_controller(None)) as state:
            apply(state, _documents("tcp://127.0.0.1:4001"))
            await assert_resource(state, KMSG_LOG_CONFIGS, "kmsg-log")
            apply(state, config())
            await assert_no_resource(state, KMSG_LOG_CONFIGS, "kmsg-log")

    run(main)


def test_a_record_is_talos_json_line() -> None:
    record = b"3,2,2500000,-;ata1: failed \\x41\n SUBSYSTEM=scsi\n"
    assert parse_record(record).facility == "kern"
    event = kmsg_log.kmsg_event(record, BOOTED)
    line = json.loads(json_line(event, {}))
    assert line == {
        "clock": 2500000, "facility": "kern", "msg": "ata1: failed A\n SUBSYSTEM=scsi\n", "priority": "err",
        "seq": 2, "talos-level": "error", "talos-time": "2027-01-15T08:00:02.5Z",
    }  # fmt: skip
    levels = {p: kmsg_log.kmsg_event(f"{p},1,0,-;x\n".encode(), 0).level for p in range(8)}
    assert levels == {
        0: "error",
        1: "error",
        2: "error",
        3: "error",
        4: "warn",
        5: "info",
        6: "info",
        7: "debug",
    }
    assert kmsg_log.kmsg_event(b"30,1,0,-;x\n", 0).fields["facility"] == "daemon"
    # go-kmsg's names (what Talos sends): facility 11 is "local0" there, so syslog's local0 (16) is "local5"
    assert kmsg_log.kmsg_event(b"94,1,0,-;x\n", 0).fields["facility"] == "local0"
    assert kmsg_log.kmsg_event(b"134,1,0,-;x\n", 0).fields["facility"] == "local5"


def test_a_file_of_records_splits_like_the_device(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_bytes(b"6,1,1,-;one\n SUB=x\n6,2,2,-;two\n6,3,3,-;three\n")

    async def main() -> None:
        records = [r async for r in read_records(path)]
        assert records == [b"6,1,1,-;one\n SUB=x\n", b"6,2,2,-;two\n", b"6,3,3,-;three\n"]

    run(main)


def test_the_kernel_log_reaches_a_tcp_receiver_then_follows(tmp_path: Path) -> None:
    layout, kmsg = _metal(tmp_path)

    async def main() -> None:
        receiver = TcpReceiver()
        port = await receiver.start()
        try:
            async with running(kmsg_log.kmsg_log_config_controller(), _delivery(layout)) as state:
                apply(state, _documents(f"tcp://127.0.0.1:{port}"))
                await assert_resource(state, WAIT_STATUSES, WAIT_ID, lambda r: "network" in r.spec.reason)
                _network_ready(state)
                await _until(lambda: len(receiver.lines) == 2)
                with kmsg.open("ab") as f:
                    f.write(b"4,3,3000000,-;eth0: carrier lost\n")
                await _until(lambda: len(receiver.lines) == 3)
        finally:
            await receiver.stop()
        assert [line["seq"] for line in receiver.lines] == [1, 2, 3]
        assert receiver.lines[0]["msg"] == "Linux version 6.6\n"
        assert receiver.lines[2]["talos-level"] == "warn" and receiver.lines[2]["priority"] == "warning"
        assert receiver.lines[1]["talos-time"] == "2027-01-15T08:00:02.5Z"

    run(main)


def test_udp_sends_one_datagram_per_record(tmp_path: Path) -> None:
    layout, _kmsg = _metal(tmp_path)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        receiver = UdpReceiver()
        transport, _ = await loop.create_datagram_endpoint(lambda: receiver, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        try:
            async with running(kmsg_log.kmsg_log_config_controller(), _delivery(layout)) as state:
                _network_ready(state)
                apply(state, _documents(f"udp://127.0.0.1:{port}"))
                await _until(lambda: len(receiver.datagrams) == 2)
        finally:
            transport.close()
        assert [d["msg"] for d in receiver.datagrams] == [
            "Linux version 6.6\n",
            "ata1: failed\n SUBSYSTEM=scsi\n",
        ]

    run(main)


def test_a_destination_that_is_down_loses_nothing(tmp_path: Path) -> None:
    layout, _kmsg = _metal(tmp_path)

    async def main() -> None:
        port = _free_port()
        receiver = TcpReceiver()
        async with running(kmsg_log.kmsg_log_config_controller(), _delivery(layout)) as state:
            _network_ready(state)
            apply(state, _documents(f"tcp://127.0.0.1:{port}"))
            await asyncio.sleep(0.3)  # several refused attempts at the first record
            await receiver.start(port)
            try:
                await _until(lambda: len(receiver.lines) == 2)
            finally:
                await receiver.stop()
        assert [line["seq"] for line in receiver.lines] == [1, 2]

    run(main)


def test_a_container_node_never_sends_the_hosts_kernel_log(tmp_path: Path) -> None:
    layout = Layout(tmp_path, "127.0.0.1", platform=Platform.CONTAINER, own_netns=True)
    said: list[str] = []
    opened: list[Path] = []

    async def records(path: Path) -> Any:
        opened.append(path)
        yield b"6,1,1,-;the host's\n"

    async def main() -> None:
        receiver = TcpReceiver()
        port = await receiver.start()
        delivery = kmsg_log.KmsgLogDeliveryController(layout, say=said.append, records=records)
        try:
            async with running(kmsg_log.kmsg_log_config_controller(), delivery) as state:
                _network_ready(state)
                apply(state, _documents(f"tcp://127.0.0.1:{port}"))
                wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID)
                await asyncio.sleep(0.2)
        finally:
            await receiver.stop()
        assert "a container node shares the host's kernel" in wait.spec.reason
        assert said and said[0].startswith("kernel log not sent: a container node")
        assert receiver.lines == [] and opened == []

    run(main)


def test_machined_exit_drains_the_kernel_log_and_never_waits_for_a_destination_that_is_down(
    tmp_path: Path,
) -> None:
    layout, kmsg = _metal(tmp_path)

    async def main() -> None:
        receiver = TcpReceiver()
        port = await receiver.start()
        delivery = _delivery(layout)
        assert await delivery.drain(timeout=0.1)  # nothing configured: nothing to wait for
        try:
            async with running(kmsg_log.kmsg_log_config_controller(), delivery) as state:
                _network_ready(state)
                apply(state, _documents(f"tcp://127.0.0.1:{port}"))
                await _until(lambda: len(receiver.lines) == 2)
                with kmsg.open("ab") as f:  # the shutdown's last kernel messages
                    f.write(b"6,3,3000000,-;reboot: Restarting system\n")
                assert await delivery.drain(timeout=3)
                assert delivery.sent == 3  # sent before the drain returned
                await _until(lambda: len(receiver.lines) == 3)
        finally:
            await receiver.stop()
        assert receiver.lines[-1]["msg"] == "reboot: Restarting system\n"
        down = _delivery(layout)
        async with running(kmsg_log.kmsg_log_config_controller(), down) as state:
            _network_ready(state)
            apply(state, _documents(f"tcp://127.0.0.1:{_free_port()}"))
            await _until(down.drained)  # its first attempt failed
            started = asyncio.get_running_loop().time()
            assert await down.drain(timeout=3)
            assert asyncio.get_running_loop().time() - started < 0.5

    run(main)
