"""The event sink (``EventSinkConfig``, ``talos.events.sink``): Talos's resource from the document or
the kernel argument, and every node event delivered to a real gRPC ``events.EventSinkService`` on
127.0.0.1 (grpclib): the history first, then live events in order, resent after the endpoint was
down, and bounded by the node's history while it is.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from controller_helpers import apply, config, run, running
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.events import events_grpc, events_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machined.controllers import event_sink
from ichor.machined.cosi import WAIT_STATUSES, Backoff, State, assert_no_resource, assert_resource
from ichor.machined.events import EventBus
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.resources import EVENT_SINK_CONFIGS, NETWORK_STATUSES
from ichor.machined.resources._network_stack import NetworkStatusSpec

WAIT_ID = "v1alpha1.EventsSinkController"
FAST = Backoff(initial=0.05, factor=2.0, maximum=0.2)


class Receiver(events_grpc.EventSinkServiceBase):
    """An event sink that records what it is sent; ``refuse`` answers that many calls UNAVAILABLE."""

    def __init__(self, refuse: int = 0) -> None:
        self.requests: list[events_pb2.EventRequest] = []
        self.refuse = refuse
        self.calls = 0

    async def Publish(self, stream: Any) -> None:
        request = await stream.recv_message()
        self.calls += 1
        if self.refuse:
            self.refuse -= 1
            raise GRPCError(Status.UNAVAILABLE, "not now")
        self.requests.append(request)
        await stream.send_message(events_pb2.EventResponse())

    def sequences(self) -> list[str]:
        out = []
        for request in self.requests:
            event = machine_pb2.SequenceEvent()
            assert request.data.Unpack(event)
            out.append(f"{event.sequence}:{machine_pb2.SequenceEvent.Action.Name(event.action)}")
        return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serve(receiver: Receiver, port: int) -> Server:
    server = Server([receiver])
    await server.start("127.0.0.1", port)
    return server


def _document(endpoint: str) -> str:
    return config() + f"---\napiVersion: v1alpha1\nkind: EventSinkConfig\nendpoint: '{endpoint}'\n"


def _network_ready(state: State) -> None:
    state.create(NETWORK_STATUSES.new("status", NetworkStatusSpec(address_ready=True)))


def _sequence(bus: EventBus, name: str, action: int = machine_pb2.SequenceEvent.START) -> None:
    bus.publish(machine_pb2.SequenceEvent(sequence=name, action=action), actor_id="actor-1")


async def _until(predicate: Any, timeout: float = 4.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def test_the_document_gives_the_endpoint_and_wins_over_the_kernel_argument() -> None:
    args = KernelArgs.from_cmdline("console=ttyS0 talos.events.sink=10.5.0.1:4002")

    async def main() -> None:
        async with running(event_sink.events_sink_config_controller(args)) as state:
            apply(state, config())
            await assert_resource(
                state, EVENT_SINK_CONFIGS, "event-sink", lambda r: r.spec.endpoint == "10.5.0.1:4002"
            )
            apply(state, _document("[fd00::1]:4003"))
            await assert_resource(
                state, EVENT_SINK_CONFIGS, "event-sink", lambda r: r.spec.endpoint == "[fd00::1]:4003"
            )
        async with running(event_sink.events_sink_config_controller(None)) as state:
            apply(state, _document("127.0.0.1:4002"))
            await assert_resource(state, EVENT_SINK_CONFIGS, "event-sink")
            apply(state, config())  # the document removed: no sink
            await assert_no_resource(state, EVENT_SINK_CONFIGS, "event-sink")

    run(main)


def test_the_history_then_live_events_reach_a_grpc_sink_in_order() -> None:
    async def main() -> None:
        receiver, port = Receiver(), _free_port()
        server = await _serve(receiver, port)
        bus = EventBus()
        _sequence(bus, "boot")  # before the sink is configured: sent from the history
        _sequence(bus, "boot", machine_pb2.SequenceEvent.STOP)
        try:
            async with running(
                event_sink.events_sink_config_controller(), event_sink.EventsSinkController(bus, backoff=FAST)
            ) as state:
                apply(state, _document(f"127.0.0.1:{port}"))
                await assert_resource(
                    state, WAIT_STATUSES, WAIT_ID, lambda r: "network address" in r.spec.reason
                )
                assert receiver.requests == []  # nothing before the node has an address
                _network_ready(state)
                await _until(lambda: len(receiver.requests) == 2)
                _sequence(bus, "reboot")
                await _until(lambda: len(receiver.requests) == 3)
                await assert_no_resource(state, WAIT_STATUSES, WAIT_ID)
        finally:
            server.close()
            await server.wait_closed()
        assert receiver.sequences() == ["boot:START", "boot:STOP", "reboot:START"]
        sent = receiver.requests[0]
        assert sent.data.type_url == "type.googleapis.com/machine.SequenceEvent"
        assert sent.id == bus.history()[0].id and sent.actor_id == "actor-1"
        assert [r.id for r in receiver.requests] == [e.id for e in bus.history()]

    run(main)


def test_a_sink_that_refuses_gets_every_event_once_after_backing_off() -> None:
    async def main() -> None:
        receiver, port = Receiver(refuse=3), _free_port()
        server = await _serve(receiver, port)
        bus = EventBus()
        for name in ("a", "b", "c"):
            _sequence(bus, name)
        try:
            async with running(
                event_sink.events_sink_config_controller(), event_sink.EventsSinkController(bus, backoff=FAST)
            ) as state:
                _network_ready(state)
                apply(state, _document(f"127.0.0.1:{port}"))
                await _until(lambda: len(receiver.requests) == 3)
        finally:
            server.close()
            await server.wait_closed()
        assert receiver.refuse == 0
        assert receiver.sequences() == ["a:START", "b:START", "c:START"]

    run(main)


def test_an_endpoint_that_is_down_is_waited_for_and_resent_from_where_it_stopped() -> None:
    async def main() -> None:
        port = _free_port()  # nothing listens there yet
        bus = EventBus()
        controller = event_sink.EventsSinkController(bus, backoff=FAST)
        _sequence(bus, "boot")
        async with running(event_sink.events_sink_config_controller(), controller) as state:
            _network_ready(state)
            apply(state, _document(f"127.0.0.1:{port}"))
            wait = await assert_resource(
                state, WAIT_STATUSES, WAIT_ID, lambda r: f"127.0.0.1:{port}" in r.spec.reason
            )
            assert wait.spec.waiting_for == "event sink" and wait.spec.next_retry is not None
            _sequence(bus, "install")  # published while the sink is down
            receiver = Receiver()
            server = await _serve(receiver, port)
            try:
                await _until(lambda: len(receiver.requests) == 2)
                _sequence(bus, "reboot")
                await _until(lambda: len(receiver.requests) == 3)
                await assert_no_resource(state, WAIT_STATUSES, WAIT_ID)
            finally:
                server.close()
                await server.wait_closed()
        assert receiver.sequences() == ["boot:START", "install:START", "reboot:START"]
        assert controller.position == bus.published == 3

    run(main)


def test_a_sink_down_for_long_costs_no_more_than_the_history() -> None:
    async def main() -> None:
        port = _free_port()
        bus = EventBus(history=5)
        controller = event_sink.EventsSinkController(bus, backoff=FAST)
        async with running(event_sink.events_sink_config_controller(), controller) as state:
            _network_ready(state)
            apply(state, _document(f"127.0.0.1:{port}"))
            _sequence(bus, "first")
            await assert_resource(state, WAIT_STATUSES, WAIT_ID, lambda r: "127.0.0.1" in r.spec.reason)
            for n in range(20):
                _sequence(bus, f"e{n}")
            assert len(bus.history()) == 5  # what the node keeps for a sink that is down
            receiver = Receiver()
            server = await _serve(receiver, port)
            try:
                await _until(lambda: len(receiver.requests) == 5)
                await asyncio.sleep(0.2)
            finally:
                server.close()
                await server.wait_closed()
        # the oldest 16 fell out of the history while the sink was down; the rest arrive in order
        assert receiver.sequences() == [f"e{n}:START" for n in range(15, 20)]
        assert controller.position == 21

    run(main)


def test_a_new_endpoint_gets_the_next_events_only() -> None:
    async def main() -> None:
        first, second = Receiver(), Receiver()
        ports = _free_port(), _free_port()
        servers = [await _serve(first, ports[0]), await _serve(second, ports[1])]
        bus = EventBus()
        _sequence(bus, "boot")
        try:
            async with running(
                event_sink.events_sink_config_controller(), event_sink.EventsSinkController(bus, backoff=FAST)
            ) as state:
                _network_ready(state)
                apply(state, _document(f"127.0.0.1:{ports[0]}"))
                await _until(lambda: len(first.requests) == 1)
                apply(state, _document(f"127.0.0.1:{ports[1]}"))
                await assert_resource(
                    state, EVENT_SINK_CONFIGS, "event-sink", lambda r: str(ports[1]) in r.spec.endpoint
                )
                await asyncio.sleep(0.1)
                _sequence(bus, "reboot")
                await _until(lambda: len(second.requests) == 1)
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()
        assert first.sequences() == ["boot:START"] and second.sequences() == ["reboot:START"]

    run(main)


def test_event_history_positions() -> None:
    bus = EventBus(history=3)
    woken: list[int] = []
    bus.add_listener(lambda: woken.append(bus.published))
    for name in "abcde":
        _sequence(bus, name)
    assert bus.published == 5 and bus.oldest_kept == 2 and woken == [1, 2, 3, 4, 5]
    events, lost = bus.since(0)
    assert lost == 2 and [e.payload.sequence for e in events] == ["c", "d", "e"]
    events, lost = bus.since(4)
    assert lost == 0 and [e.payload.sequence for e in events] == ["e"]
    assert bus.since(5) == ([], 0)
    assert event_sink.split_endpoint("[fd00::1]:4002") == ("fd00::1", 4002)
    assert event_sink.split_endpoint("sink.lab:4002") == ("sink.lab", 4002)


class SlowReceiver(Receiver):
    async def Publish(self, stream: Any) -> None:
        await asyncio.sleep(0.03)
        await super().Publish(stream)


def test_machined_exit_drains_a_connected_sink_and_never_waits_for_one_that_is_down() -> None:
    async def main() -> None:
        receiver, port = SlowReceiver(), _free_port()
        server = await _serve(receiver, port)
        bus = EventBus()
        controller = event_sink.EventsSinkController(bus, backoff=FAST)
        assert await controller.drain(timeout=0.1)  # nothing configured: nothing to wait for
        try:
            async with running(event_sink.events_sink_config_controller(), controller) as state:
                _network_ready(state)
                apply(state, _document(f"127.0.0.1:{port}"))
                _sequence(bus, "boot")
                await _until(lambda: len(receiver.requests) == 1)
                for name in ("shutdown", "stop-services", "unmount"):
                    _sequence(bus, name)
                assert not controller.drained()
                assert await controller.drain(timeout=3)
                assert receiver.sequences()[-1] == "unmount:START"
        finally:
            server.close()
            await server.wait_closed()
        down = event_sink.EventsSinkController(bus, backoff=FAST)
        async with running(event_sink.events_sink_config_controller(), down) as state:
            _network_ready(state)
            apply(state, _document(f"127.0.0.1:{_free_port()}"))
            await assert_resource(state, WAIT_STATUSES, WAIT_ID, lambda r: "127.0.0.1" in r.spec.reason)
            started = asyncio.get_running_loop().time()
            assert await down.drain(timeout=3)
            assert asyncio.get_running_loop().time() - started < 0.5

    run(main)


def test_events_published_while_backing_off_do_not_hurry_the_retry() -> None:
    async def main() -> None:
        receiver, port = Receiver(refuse=10_000), _free_port()
        server = await _serve(receiver, port)
        bus = EventBus()
        controller = event_sink.EventsSinkController(
            bus, backoff=Backoff(initial=0.25, factor=2.0, maximum=0.25)
        )
        try:
            async with running(event_sink.events_sink_config_controller(), controller) as state:
                _network_ready(state)
                apply(state, _document(f"127.0.0.1:{port}"))
                _sequence(bus, "boot")
                await _until(lambda: receiver.calls >= 1)
                for n in range(50):  # an event every 10 ms for 0.5 s
                    _sequence(bus, f"e{n}")
                    await asyncio.sleep(0.01)
        finally:
            server.close()
            await server.wait_closed()
        assert 2 <= receiver.calls <= 5, receiver.calls  # one attempt per 0.25 s pause, not one per event
        assert receiver.requests == [] and controller.position == 0

    run(main)
