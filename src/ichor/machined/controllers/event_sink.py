"""The event sink: ``runtime.EventsSinkConfigController`` and ``v1alpha1.EventsSinkController``.

With an ``EventSinkConfig`` document (or, on a metal node, the kernel argument
``talos.events.sink=host:port``; the document wins, and Talos too ignores the argument in container
mode) machined streams every event ``talosctl events`` shows (sequence, phase, task, service,
config, machine status, ...) to a gRPC ``events.EventSinkService`` at that address, as Talos 1.7 does:

* plaintext gRPC (HTTP/2 without TLS), one unary ``Publish`` per event: ``EventRequest{data: Any
  (type.googleapis.com/machine.<Event>), id: <the event's xid>, actor_id}``;
* nothing is sent before the node has an address (``NetworkStatuses/status`` address ready);
* the first connection starts with every event the node still keeps (its history, so the boot's
  sequence events arrive even when the sink was configured late), then live events in order;
* a failed ``Publish`` keeps the event: the controller waits (``get waits`` says why and when it
  retries, backing off 0.5 s, 1 s, 2 s ... up to 60 s, through the runtime's injectable sleep) and
  then resends from the first event the sink did not acknowledge; a new endpoint is used from the
  next event on, without resending what the old one took.

Bounded while the sink is down: the controller keeps a position in the node's event history
(:meth:`~ichor.machined.events.EventBus.since`), not a queue, so an endpoint that never answers costs
no memory beyond the history itself (1000 events, as Talos's ring buffer); events that fall out of it
before they were sent are counted in the controller-runtime log and skipped.

When machined stops (reboot, shutdown, reset) the node drains the sink as Talos's drainer does: it
waits up to 10 s (:data:`DRAIN_TIMEOUT`) for a connected sink to take every event published so far
(the shutdown's own sequence events included); a sink that is down or not connected delays nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError

from ichor.api.gen.events import events_grpc, events_pb2
from ichor.machined.controllers._common import poll_until
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import Backoff, Controller, ControllerContext, Input, TransformController
from ichor.machined.events import EventBus, NodeEvent
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.resources import (
    EVENT_SINK_CONFIG_ID,
    EVENT_SINK_CONFIGS,
    MACHINE_CONFIGS,
    NETWORK_STATUS_ID,
    NETWORK_STATUSES,
    EventSinkConfigSpec,
)
from ichor.machined.resources._config import ACTIVE_CONFIG_ID
from ichor.machinery.config._models import EventSinkConfigV1Alpha1
from ichor.machinery.hostport import split_host_port

__all__ = [
    "DRAIN_TIMEOUT",
    "KERNEL_ARG",
    "PUBLISH_TIMEOUT",
    "WAITING_FOR",
    "EventsSinkController",
    "event_sink_controllers",
    "events_sink_config_controller",
    "split_endpoint",
]

KERNEL_ARG = "talos.events.sink"
WAITING_FOR = "event sink"
"""What ``get waits`` says the sender waits for while its endpoint does not take events."""
PUBLISH_TIMEOUT = 10.0
"""Seconds one ``Publish`` may take before the endpoint counts as down."""
DRAIN_TIMEOUT = 10.0
"""Seconds machined waits at exit for a connected sink to take the last events (Talos's)."""


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); ``ValueError`` otherwise (validation refuses
    such documents, the kernel argument is not validated)."""
    try:
        return split_host_port(endpoint)
    except ValueError:
        raise ValueError(f"event sink endpoint {endpoint!r} is not host:port") from None


def events_sink_config_controller(
    kernel_args: KernelArgs | None = None,
) -> TransformController[EventSinkConfigSpec]:
    """The ``EventSinkConfig`` document's endpoint, else the kernel argument's (``kernel_args``: the
    node's own command line, given on metal only)."""

    def derive(ctx: ControllerContext) -> dict[str, EventSinkConfigSpec]:
        endpoint = (kernel_args.first(KERNEL_ARG) if kernel_args is not None else None) or ""
        resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        for doc in resource.spec.parsed if resource is not None else ():
            if isinstance(doc.model, EventSinkConfigV1Alpha1) and doc.model.endpoint:
                endpoint = str(doc.model.endpoint)
                break
        return {EVENT_SINK_CONFIG_ID: EventSinkConfigSpec(endpoint=endpoint)} if endpoint else {}

    return TransformController(
        "runtime.EventsSinkConfigController",
        inputs=[ACTIVE_CONFIG],
        output=EVENT_SINK_CONFIGS,
        map_inputs=derive,
    )


class _Sink:
    """One endpoint's plaintext gRPC channel."""

    def __init__(self, endpoint: str) -> None:
        host, port = split_endpoint(endpoint)
        self.channel = Channel(host, port)
        self.stub = events_grpc.EventSinkServiceStub(self.channel)

    async def publish(self, event: NodeEvent) -> None:
        request = events_pb2.EventRequest(id=event.id, actor_id=event.actor_id)
        request.data.Pack(event.payload)  # type.googleapis.com/machine.<Event>, as Go's anypb.New
        await self.stub.Publish(request, timeout=PUBLISH_TIMEOUT)

    def close(self) -> None:
        self.channel.close()


class EventsSinkController(Controller):
    """``v1alpha1.EventsSinkController`` (see the module doc)."""

    name = "v1alpha1.EventsSinkController"
    inputs = (
        Input(EVENT_SINK_CONFIGS, id=EVENT_SINK_CONFIG_ID),
        Input(NETWORK_STATUSES, id=NETWORK_STATUS_ID),
    )
    reads = "(the node's event history)"
    writes = "(every event, over gRPC, to the event sink)"

    def __init__(self, events: EventBus, *, backoff: Backoff | None = None) -> None:
        self._events = events
        self._backoff = backoff or Backoff()
        self._position: int | None = None
        """The next event to send; None until the first connection (which starts at the history)."""
        self._sink: _Sink | None = None
        self._endpoint = ""
        self._failures = 0
        self._retry_at: datetime | None = None
        """While backing off: when the next attempt is due (the runtime's clock)."""

    @property
    def position(self) -> int | None:
        return self._position

    def drained(self) -> bool:
        """Nothing left to send: every event published so far was taken, or there is no connected
        sink to take them (none configured, not connected yet, or failing)."""
        if self._sink is None or self._failures or self._position is None:
            return True
        return self._position >= self._events.published

    async def drain(self, timeout: float = DRAIN_TIMEOUT, *, poll_interval: float = 0.05) -> bool:
        """At machined's exit: wait up to ``timeout`` s until :meth:`drained`; whether it was."""
        return await poll_until(self.drained, timeout, poll_interval)

    async def run(self, ctx: ControllerContext) -> None:
        self._events.add_listener(ctx.wake)
        retry: float | None = None
        try:
            while True:
                await ctx.changed(timeout=retry)
                retry = await self._pass(ctx)
        finally:
            self._events.remove_listener(ctx.wake)
            self._close()

    async def _pass(self, ctx: ControllerContext) -> float | None:
        """One reconcile: connect as configured, send what is new; the retry delay after a failure."""
        config = ctx.get_or_none(EVENT_SINK_CONFIGS, EVENT_SINK_CONFIG_ID)
        if config is None:
            self._close()
            ctx.clear_waiting()
            return None
        network = ctx.get_or_none(NETWORK_STATUSES, NETWORK_STATUS_ID)
        if network is None or not network.spec.address_ready:
            ctx.waiting(WAITING_FOR, "waiting for the node's network address to be ready")
            return None
        if config.spec.endpoint != self._endpoint:
            self._close()
            self._endpoint, self._failures, self._retry_at = config.spec.endpoint, 0, None
        if self._sink is None:
            try:
                self._sink = _Sink(self._endpoint)
            except ValueError as err:
                ctx.waiting(WAITING_FOR, f"{err} (EventSinkConfig.endpoint or {KERNEL_ARG})")
                return None
            ctx.logger.debug("establishing connection to event sink", endpoint=self._endpoint)
        if self._retry_at is not None and ctx.now() < self._retry_at:
            # woken by a new event while backing off: the endpoint gets its pause all the same
            return (self._retry_at - ctx.now()).total_seconds()
        if self._position is None:
            self._position = self._events.oldest_kept  # Talos's first watch: every event kept
        events, lost = self._events.since(self._position)
        if lost:
            ctx.logger.warning("events dropped from the history before the sink took them", count=lost)
            self._position += lost
        for event in events:
            try:
                await self._sink.publish(event)
            except (GRPCError, StreamTerminatedError, OSError, TimeoutError) as err:
                return self._failed(ctx, err)
            self._position += 1
        if self._failures:
            ctx.logger.info("event sink reachable again", endpoint=self._endpoint)
        self._failures, self._retry_at = 0, None
        ctx.clear_waiting()
        return None

    def _failed(self, ctx: ControllerContext, err: BaseException) -> float:
        self._failures += 1
        delay = self._backoff.delay(self._failures)
        self._retry_at = ctx.now() + timedelta(seconds=delay)
        reason = f"{self._endpoint}: {_describe(err)}"
        ctx.waiting(WAITING_FOR, reason, retry_after=delay)
        if self._failures == 1:
            ctx.logger.error("error publishing event", endpoint=self._endpoint, error=_describe(err))
        self._close()  # a new channel next time: grpclib's stays broken after some failures
        return delay

    def _close(self) -> None:
        if self._sink is not None:
            self._sink.close()
        self._sink = None


def _describe(err: BaseException) -> str:
    if isinstance(err, GRPCError):
        return f"{err.status.name}: {err.message}" if err.message else err.status.name
    if isinstance(err, TimeoutError):
        return f"no answer in {PUBLISH_TIMEOUT:g}s"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or type(err).__name__


def event_sink_controllers(events: EventBus, kernel_args: KernelArgs | None = None) -> list[Controller]:
    """Config -> EventSinkConfig -> the sink, in registration order."""
    return [events_sink_config_controller(kernel_args), EventsSinkController(events)]
