"""End to end: an ``EventSinkConfig`` document on a process cluster streams the node's events.

One control plane created with a config patch that adds the document, pointing at a gRPC
``events.EventSinkService`` this test runs on 127.0.0.1 (grpclib, in a thread): the boot's sequence
events (``initialize`` and ``boot``, start and stop, published before the sink was connected, so
they come from the history) arrive in order, then the services' state events, each as Talos sends
them (``type.googleapis.com/machine.<Event>``, the event's xid). A ``KmsgLogConfig`` on the same node
is derived but never sent (its ``/dev/kmsg`` is the host's), with the reason in ``get waits``. When
the cluster is destroyed, the services' last state events still reach the sink (machined drains it). Time budget: 60 s (11 s measured:
the cluster create with its wait, then the events within a second; destroy included).
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import talosctl_in
from grpclib.server import Server

from ichor.api.gen.events import events_grpc, events_pb2
from ichor.api.gen.machine import machine_pb2

pytestmark = pytest.mark.e2e


class _Sink(events_grpc.EventSinkServiceBase):
    def __init__(self) -> None:
        self.requests: list[events_pb2.EventRequest] = []

    async def Publish(self, stream: Any) -> None:
        self.requests.append(await stream.recv_message())
        await stream.send_message(events_pb2.EventResponse())


class _SinkThread:
    """The sink served by its own event loop in a thread, on an ephemeral port of 127.0.0.1."""

    def __init__(self) -> None:
        self.sink = _Sink()
        self.loop = asyncio.new_event_loop()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.server = self.loop.run_until_complete(self._start())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _start(self) -> Server:
        server = Server([self.sink])  # made in the loop that serves it
        await server.start("127.0.0.1", self.port)
        return server

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def sequences(self) -> list[str]:
        out = []
        for request in list(self.sink.requests):
            if request.data.type_url == "type.googleapis.com/machine.SequenceEvent":
                event = machine_pb2.SequenceEvent()
                request.data.Unpack(event)
                out.append(f"{event.sequence}:{machine_pb2.SequenceEvent.Action.Name(event.action)}")
        return out


def test_the_boot_sequence_events_reach_an_event_sink(tmp_path: Path) -> None:
    name, prefix = "evsink", f"127.{random.randint(150, 199)}.{random.randint(0, 255)}"
    sink = _SinkThread()
    kmsg = socket.create_server(("127.0.0.1", 0))  # a KmsgLogConfig destination that must get nothing
    kmsg.settimeout(0.2)
    (tmp_path / "sink.yaml").write_text(
        f"apiVersion: v1alpha1\nkind: EventSinkConfig\nendpoint: 127.0.0.1:{sink.port}\n---\n"
        f"apiVersion: v1alpha1\nkind: KmsgLogConfig\nname: kernel\nurl: tcp://127.0.0.1:{kmsg.getsockname()[1]}\n"
    )
    wanted = ["initialize:START", "initialize:STOP", "boot:START", "boot:STOP"]
    try:
        started = time.monotonic()
        created = talosctl_in(tmp_path, "cluster", "create", "--provisioner", "process", "--name", name,
                              "--cidr", f"{prefix}.0/24", "--workers", "0", "--wait-timeout", "3m",
                              "--config-patch", f"@{tmp_path / 'sink.yaml'}", timeout=300)  # fmt: skip
        try:
            assert created.exit_code == 0, created.stderr[-3000:]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not set(wanted) <= set(sink.sequences()):
                time.sleep(0.2)
            sequences = sink.sequences()
            kinds = {r.data.type_url for r in sink.sink.requests}
            assert [s for s in sequences if s in wanted] == wanted, (sequences, kinds)
            machine = "type.googleapis.com/machine."
            assert {machine + "SequenceEvent", machine + "ServiceStateEvent"} <= kinds, kinds
            ids = [r.id for r in sink.sink.requests]
            assert len(set(ids)) == len(ids) and all(len(i) == 20 for i in ids)  # each event once, an xid
            # The same node's kernel log is the host's: configured, never sent, and said why.
            node = f"{prefix}.2"
            configs = talosctl_in(tmp_path, "-n", node, "get", "kmsglogconfigs", "-o", "yaml")
            assert configs.exit_code == 0 and f"host: 127.0.0.1:{kmsg.getsockname()[1]}" in configs.stdout, (
                configs
            )
            waits = talosctl_in(
                tmp_path, "-n", node, "get", "waits", "runtime.KmsgLogDeliveryController", "-o", "yaml"
            )
            assert "a process node shares the host's kernel" in waits.stdout, waits
            with pytest.raises(TimeoutError):
                kmsg.accept()
            print(f"events sink: {len(ids)} events, {time.monotonic() - started:.1f}s after create started")
        finally:
            destroyed = talosctl_in(tmp_path, "cluster", "destroy", "--name", name)
        assert destroyed.exit_code == 0, destroyed.stderr
        # The node's last events (its services stopping) reached the sink before machined exited.
        stopped = set()
        for request in list(sink.sink.requests):
            if request.data.type_url.endswith(".ServiceStateEvent"):
                event = machine_pb2.ServiceStateEvent()
                request.data.Unpack(event)
                if event.action == machine_pb2.ServiceStateEvent.FINISHED:
                    stopped.add(event.service)
        assert {"apid", "etcd"} <= stopped, stopped
    finally:
        sink.close()
        kmsg.close()
