"""Kernel log delivery: ``runtime.KmsgLogConfigController`` and ``runtime.KmsgLogDeliveryController``.

Destinations come from the kernel argument ``talos.logging.kernel=<url>`` (metal nodes: the node's
own command line) and every ``KmsgLogConfig`` document's ``url`` (a URL given twice is sent to once),
as Talos 1.7 collects them into ``KmsgLogConfigs/kmsg-log``. Each kernel log record then goes to
every destination as Talos's ``json_lines`` sender writes it (newline-delimited over TCP, one
datagram per record over UDP)::

    {"clock":5140900,"facility":"kern","msg":"eth0: link up\\n","priority":"info","seq":339,
     "talos-level":"info","talos-time":"2026-11-27T12:00:05.1409Z"}

``clock`` is microseconds since boot, ``talos-time`` boot time plus ``clock``, ``msg`` the record's
text as go-kmsg keeps it, ``talos-level`` zap's level for the priority (emerg/alert/crit/err ->
error, warning -> warn, notice/info -> info, debug). Talos's behaviour kept: nothing is sent before
the node has an address; the log is read from its oldest record once, so a config change neither
resends nor skips; a record is retried every second until one destination took it, and meanwhile no
further record is read. So a destination that is down holds one record in memory: the kernel's
ring buffer keeps the rest (it overwrites its oldest records, which are then skipped). At machined's
exit the node drains it as Talos does: records keep going out until none came for a moment (up to
10 s; destinations that fail delay nothing).

Only a node whose kernel is its own sends: on metal ``/dev/kmsg`` is the machine's log. On a container
or process node it would be the host's kernel log (every other node's and the host's messages), so the
resource is still derived (``get kmsglogconfigs`` shows what is configured) but nothing is read or
sent, and ``get waits`` and the console say why. (Talos's docker nodes do read the host's log.)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from ichor.machined.controllers._common import SayOnce, poll_until
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import Controller, ControllerContext, Input, TransformController
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.kmsg import boot_time, parse_record, read_records
from ichor.machined.logsend import JsonLinesSender, LogEvent, SendError
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    KMSG_LOG_CONFIG_ID,
    KMSG_LOG_CONFIGS,
    MACHINE_CONFIGS,
    NETWORK_STATUS_ID,
    NETWORK_STATUSES,
    KmsgLogConfigSpec,
)
from ichor.machined.resources._config import ACTIVE_CONFIG_ID
from ichor.machinery.config._models import KmsgLogConfigV1Alpha1

__all__ = [
    "DRAIN_QUIET",
    "DRAIN_TIMEOUT",
    "KERNEL_ARG",
    "RETRY_INTERVAL",
    "WAITING_FOR",
    "KmsgLogDeliveryController",
    "kmsg_event",
    "kmsg_log_config_controller",
    "kmsg_log_controllers",
]

KERNEL_ARG = "talos.logging.kernel"
WAITING_FOR = "kernel log delivery"
RETRY_INTERVAL = 1.0
"""Seconds between attempts at a record no destination took (Talos's)."""
DRAIN_TIMEOUT = 10.0
"""Seconds machined waits at exit for the last kernel records to be sent (Talos's drain budget)."""
DRAIN_QUIET = 0.3
"""At exit the kernel log counts as drained after this long without a new record (Talos: 100 ms;
longer here because an idle ``/dev/kmsg`` is polled every 0.2 s)."""

_LEVELS = {"emerg": "error", "alert": "error", "crit": "error", "err": "error", "warning": "warn",
           "notice": "info", "info": "info", "debug": "debug"}  # fmt: skip


def kmsg_log_config_controller(
    kernel_args: KernelArgs | None = None,
) -> TransformController[KmsgLogConfigSpec]:
    """The kernel argument's URL first, then each ``KmsgLogConfig`` document's not already listed."""

    def derive(ctx: ControllerContext) -> dict[str, KmsgLogConfigSpec]:
        argument = kernel_args.first(KERNEL_ARG) if kernel_args is not None else None
        urls = [argument] if argument is not None else []
        resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        for doc in resource.spec.parsed if resource is not None else ():
            if isinstance(doc.model, KmsgLogConfigV1Alpha1) and doc.model.url and doc.model.url not in urls:
                urls.append(str(doc.model.url))
        return {KMSG_LOG_CONFIG_ID: KmsgLogConfigSpec(destinations=tuple(urls))} if urls else {}

    return TransformController(
        "runtime.KmsgLogConfigController",
        inputs=[ACTIVE_CONFIG],
        output=KMSG_LOG_CONFIGS,
        map_inputs=derive,
    )


def kmsg_event(record: bytes, booted: float) -> LogEvent:
    """One raw kernel log record as the log event Talos sends (``ValueError`` for a non-record)."""
    parsed = parse_record(record)
    return LogEvent(
        msg=parsed.message,
        time=parsed.timestamp(booted),
        level=_LEVELS[parsed.priority],
        fields={
            "facility": parsed.facility,
            "seq": parsed.seq,
            "clock": parsed.clock,
            "priority": parsed.priority,
        },
    )


Records = Callable[[Path], AsyncIterator[bytes]]


def _follow(path: Path) -> AsyncIterator[bytes]:
    return read_records(path, follow=True)


class KmsgLogDeliveryController(Controller):
    """``runtime.KmsgLogDeliveryController`` (see the module doc)."""

    name = "runtime.KmsgLogDeliveryController"
    inputs = (
        Input(KMSG_LOG_CONFIGS, id=KMSG_LOG_CONFIG_ID),
        Input(NETWORK_STATUSES, id=NETWORK_STATUS_ID),
    )
    reads = "(the node's own kernel log, /dev/kmsg, on metal)"
    writes = "(JSON lines to the KmsgLogConfig destinations)"

    def __init__(
        self,
        layout: Layout,
        *,
        say: Callable[[str], None] | None = None,
        records: Records = _follow,
        booted: Callable[[], float] = boot_time,
        retry_interval: float = RETRY_INTERVAL,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._layout = layout
        self._say_once = SayOnce(say)
        self._records = records
        self._booted = booted
        self._retry_interval = retry_interval
        self._sleep = sleep
        self._senders: tuple[JsonLinesSender, ...] = ()
        self._have_senders = asyncio.Event()
        self._last_record = 0.0
        """``time.monotonic()`` when the last record was read."""
        self._sending = False
        self._sent = 0
        self._failing = False
        """The last attempt reached no destination."""

    def refusal(self) -> str | None:
        """Why this node sends no kernel log; None when it does (its kernel log is its own)."""
        if self._layout.kernel_log is not None:
            return None
        return (
            f"not sent: a {self._layout.platform.value} node shares the host's kernel, so /dev/kmsg is the "
            "host's kernel log (every node's and the host's messages); kernel logs are sent from metal nodes"
        )

    @property
    def sent(self) -> int:
        """Records a destination took since the controller was made."""
        return self._sent

    def drained(self, quiet: float = DRAIN_QUIET, *, since: float = 0.0) -> bool:
        """Nothing left to send at exit: no destination, destinations that fail, or no record in
        hand and none read for ``quiet`` seconds (counted from ``since`` at the earliest)."""
        if not self._senders or self._failing:
            return True
        return not self._sending and time.monotonic() - max(self._last_record, since) >= quiet

    async def drain(self, timeout: float = DRAIN_TIMEOUT, *, quiet: float = DRAIN_QUIET) -> bool:
        """At machined's exit (Talos's drainer): wait up to ``timeout`` s until :meth:`drained`, at
        least ``quiet`` s, so what the kernel logged just before is read and sent."""
        started = time.monotonic()
        return await poll_until(lambda: self.drained(quiet, since=started), timeout)

    async def run(self, ctx: ControllerContext) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                reader: asyncio.Task[None] | None = None
                while True:
                    await ctx.changed()
                    wanted = self._wanted(ctx)
                    await self._use(wanted)
                    if wanted and reader is None and self._layout.kernel_log is not None:
                        # Read once for the controller's life, so a config change keeps the position.
                        reader = group.create_task(self._deliver(ctx, self._layout.kernel_log))
        finally:
            await self._use(())

    def _wanted(self, ctx: ControllerContext) -> tuple[str, ...]:
        """The destinations to send to now (none while there is nothing to do, with the reason)."""
        config = ctx.get_or_none(KMSG_LOG_CONFIGS, KMSG_LOG_CONFIG_ID)
        if config is None:
            ctx.clear_waiting()
            return ()
        refusal = self.refusal()
        if refusal is not None:
            ctx.waiting(WAITING_FOR, refusal)
            self._say_once(f"kernel log {refusal}")
            return ()
        network = ctx.get_or_none(NETWORK_STATUSES, NETWORK_STATUS_ID)
        if network is None or not network.spec.address_ready:
            ctx.waiting(WAITING_FOR, "waiting for the node's network address to be ready")
            return ()
        ctx.clear_waiting()
        return config.spec.destinations

    async def _use(self, destinations: tuple[str, ...]) -> None:
        if tuple(s.endpoint for s in self._senders) == destinations:
            return
        old = self._senders
        senders = []
        for url in destinations:
            with contextlib.suppress(ValueError):  # validation refuses others; a kernel argument may not
                senders.append(JsonLinesSender(url))
        self._senders = tuple(senders)
        if self._senders:
            self._have_senders.set()
        else:
            self._have_senders.clear()
        for sender in old:
            await sender.close()

    async def _deliver(self, ctx: ControllerContext, path: Path) -> None:
        booted = self._booted()
        async for record in self._records(path):
            self._last_record = time.monotonic()
            try:
                event = kmsg_event(record, booted)
            except ValueError as err:
                ctx.logger.debug("skipping kernel log record", error=str(err))
                continue
            await self._resend(ctx, event)

    async def _resend(self, ctx: ControllerContext, event: LogEvent) -> None:
        """Talos's ``resend``: to every destination at once; done when one took it (or said not to
        retry), else again after the retry interval."""
        while True:
            await self._have_senders.wait()
            senders = self._senders
            self._sending = True
            try:
                results = await asyncio.gather(*(s.send(event) for s in senders), return_exceptions=True)
            finally:
                self._sending = False
            self._failing = not any(r is None for r in results)
            if any(r is None or (isinstance(r, SendError) and not r.retry) for r in results):
                if not self._failing:
                    self._sent += 1
                return
            for r in results:
                if isinstance(r, BaseException):
                    ctx.logger.debug("error sending kernel log record", error=str(r))
            await self._sleep(self._retry_interval)


def kmsg_log_controllers(
    layout: Layout, kernel_args: KernelArgs | None = None, *, say: Callable[[str], None] | None = None
) -> list[Controller]:
    """Config (+ kernel argument) -> KmsgLogConfig -> the kernel log sent, in registration order."""
    return [kmsg_log_config_controller(kernel_args), KmsgLogDeliveryController(layout, say=say)]
