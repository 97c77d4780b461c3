"""Hardware watchdog timers: ``runtime.WatchdogTimerConfigController`` and
``runtime.WatchdogTimerController`` (see :data:`ichor.machined.resources.WATCHDOG_TIMER_TYPES`).

With a ``WatchdogTimerConfig`` document the node opens the device, sets its timeout, and feeds it
every third of the timeout from machined's event loop: when machined hangs (a deadlock, a busy
loop, a kernel that stops scheduling it) the feeding stops and the hardware resets the machine,
which on an upgrade trial also spends one of the trial slot's GRUB tries (Talos's boot counting
has nothing for a hang; Ichor's trial does). Removing the document disarms the watchdog with the
magic close (``V``), as Talos does.

Without the document, a node booted on an upgrade **trial** (its booted ``BootSlots`` slot is
``trial``) arms :data:`TRIAL_DEVICE` with :data:`TRIAL_TIMEOUT` when the machine has one: a hang
during the trial then resets the machine and spends a try, as a panic does (``panic=``) and as a
missed health deadline does, so the node falls back to its last good slot (issue 23: Talos counts
none of them). Blessing the slot ends the trial and disarms it; the document, when present, wins.
Whether a node may arm one is the platform's answer
(:meth:`~ichor.machined.platform.Layout.watchdog_refusal`): a container or process node would arm
the host's watchdog, so it publishes the config, says why not, and never opens the device.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from ichor.machined.controllers._common import SayOnce
from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.cosi import Controller, ControllerContext, Input, Output, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    BOOT_SLOTS,
    MACHINE_CONFIGS,
    WATCHDOG_TIMER_CONFIGS,
    WATCHDOG_TIMER_ID,
    WATCHDOG_TIMER_STATUSES,
    WatchdogTimerConfigSpec,
    WatchdogTimerStatusSpec,
)
from ichor.machined.resources._config import ACTIVE_CONFIG_ID
from ichor.machinery import goduration
from ichor.machinery.bootloader import SlotStatus
from ichor.machinery.config._models import WatchdogTimerConfigV1Alpha1
from ichor.machinery.errors import DurationError

__all__ = [
    "DEFAULT_TIMEOUT",
    "TRIAL_DEVICE",
    "TRIAL_TIMEOUT",
    "WAITING_FOR",
    "WDIOC_KEEPALIVE",
    "WDIOC_SETTIMEOUT",
    "DeviceWatchdog",
    "Watchdog",
    "WatchdogTimerController",
    "open_device",
    "watchdog_controllers",
    "watchdog_timer_config_controller",
]

DEFAULT_TIMEOUT = timedelta(minutes=1)
"""``WatchdogTimerConfig.timeout`` when the document gives none (Talos's default)."""
TRIAL_DEVICE = "/dev/watchdog0"
"""The device a trial boot arms without the document (the first watchdog, as the seed's example)."""
TRIAL_TIMEOUT = timedelta(minutes=2)
"""A trial's watchdog timeout: twice Talos's default, so a guest slowed by a loaded host is not
reset while machined still runs (it is fed every 40 s from machined's event loop)."""
WAITING_FOR = "hardware watchdog armed"
"""What ``get waits`` says the controller waits for while the watchdog cannot be armed."""
RETRY_AFTER = 30.0
"""Seconds between attempts at a device that could not be opened or set."""

# linux/watchdog.h: _IOR('W', 5, int) and _IOWR('W', 6, int).
WDIOC_KEEPALIVE = 0x80045705
WDIOC_SETTIMEOUT = 0xC0045706


class Watchdog(Protocol):
    """An open watchdog device."""

    def set_timeout(self, seconds: int) -> int:
        """Set the timeout; the seconds the driver chose (a driver may round)."""
        ...

    def keepalive(self) -> None: ...

    def disarm(self) -> None:
        """The magic close: write ``V``, then close (the driver stops the timer)."""
        ...


class DeviceWatchdog:
    """A watchdog character device (``/dev/watchdog0``), driven with the kernel's ioctls."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def set_timeout(self, seconds: int) -> int:
        out = fcntl.ioctl(self._fd, WDIOC_SETTIMEOUT, struct.pack("i", seconds))
        return int(struct.unpack("i", out)[0])

    def keepalive(self) -> None:
        fcntl.ioctl(self._fd, WDIOC_KEEPALIVE, struct.pack("i", 0))

    def disarm(self) -> None:
        try:
            os.write(self._fd, b"V")
        finally:
            os.close(self._fd)


def open_device(path: str) -> Watchdog:
    return DeviceWatchdog(path)


def _timeout(text: str | None) -> timedelta:
    return goduration.parse(text, what="WatchdogTimerConfig.timeout") if text else DEFAULT_TIMEOUT


def _on_trial(ctx: ControllerContext) -> bool:
    """The node booted a slot that is on trial."""
    return any(r.spec.booted and r.spec.state == SlotStatus.TRIAL for r in ctx.list(BOOT_SLOTS))


def watchdog_timer_config_controller(
    device_exists: Callable[[str], bool] = os.path.exists,
) -> TransformController[WatchdogTimerConfigSpec]:
    """The document's config; else, on a trial boot whose machine has :data:`TRIAL_DEVICE`, the
    trial's (``device_exists`` looks for it)."""

    def derive(ctx: ControllerContext) -> dict[str, WatchdogTimerConfigSpec]:
        resource = ctx.get_or_none(MACHINE_CONFIGS, ACTIVE_CONFIG_ID)
        for doc in resource.spec.parsed if resource is not None else ():
            model = doc.model
            if isinstance(model, WatchdogTimerConfigV1Alpha1):
                try:
                    timeout = _timeout(model.timeout)
                except DurationError as err:  # validation refuses it; a wait in case one slipped through
                    raise WaitingFor("WatchdogTimerConfig.timeout", str(err)) from None
                return {WATCHDOG_TIMER_ID: WatchdogTimerConfigSpec(
                    device=str(model.device or ""), timeout=goduration.format(timeout),
                )}  # fmt: skip
        if _on_trial(ctx) and device_exists(TRIAL_DEVICE):
            return {WATCHDOG_TIMER_ID: WatchdogTimerConfigSpec(
                device=TRIAL_DEVICE, timeout=goduration.format(TRIAL_TIMEOUT),
            )}  # fmt: skip
        return {}

    return TransformController(
        "runtime.WatchdogTimerConfigController",
        inputs=[ACTIVE_CONFIG, Input(BOOT_SLOTS)],
        output=WATCHDOG_TIMER_CONFIGS,
        map_inputs=derive,
    )


class WatchdogTimerController(Controller):
    """``runtime.WatchdogTimerController`` (see the module doc)."""

    name = "runtime.WatchdogTimerController"
    inputs = (Input(WATCHDOG_TIMER_CONFIGS, id=WATCHDOG_TIMER_ID),)
    outputs = (Output(WATCHDOG_TIMER_STATUSES),)
    writes = "(the hardware watchdog device, on a node whose machine is its own)"

    def __init__(
        self,
        layout: Layout,
        opener: Callable[[str], Watchdog] = open_device,
        *,
        say: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self._layout = layout
        self._open = opener
        self._say_once = SayOnce(say)
        self._clock = clock
        self._retry_after = retry_after
        self._device: Watchdog | None = None
        self._path = ""
        self._config: WatchdogTimerConfigSpec | None = None
        self._feed_seconds = 0.0

    async def run(self, ctx: ControllerContext) -> None:
        retry: float | None = None
        next_feed = 0.0
        try:
            while True:
                await ctx.changed(timeout=retry)
                retry = None
                config = ctx.get_or_none(WATCHDOG_TIMER_CONFIGS, WATCHDOG_TIMER_ID)
                if config is None:
                    self._close(ctx)
                    ctx.clean_up_outputs(WATCHDOG_TIMER_STATUSES, set())
                    ctx.clear_waiting()
                    continue
                refusal = self._layout.watchdog_refusal()
                if refusal is not None:
                    ctx.waiting(WAITING_FOR, f"{config.spec.device} {refusal}")
                    self._say_once(f"watchdog {config.spec.device} {refusal}")
                    continue
                try:
                    if self._device is None or self._config != config.spec:
                        status = self._arm(ctx, config.spec)
                        self._config = config.spec
                        ctx.clear_waiting()
                        ctx.modify(WATCHDOG_TIMER_STATUSES, WATCHDOG_TIMER_ID, status)
                        next_feed = self._clock() + self._feed_seconds
                    elif self._clock() >= next_feed:
                        self._device.keepalive()
                        next_feed = self._clock() + self._feed_seconds
                except OSError as err:
                    self._close(ctx)
                    ctx.clean_up_outputs(WATCHDOG_TIMER_STATUSES, set())
                    reason = f"{config.spec.device}: {err.strerror or err}"
                    ctx.waiting(WAITING_FOR, reason, retry_after=self._retry_after)
                    self._say_once(f"watchdog not armed: {reason}")
                    retry = self._retry_after
                    continue
                retry = max(0.0, next_feed - self._clock())
        finally:
            self._close(None)

    def _arm(self, ctx: ControllerContext, spec: WatchdogTimerConfigSpec) -> WatchdogTimerStatusSpec:
        """Open (or reopen, for another device) and set the timeout; feed once. The status."""
        if self._device is not None and self._path != spec.device:
            self._close(ctx)
        if self._device is None:
            self._device = self._open(spec.device)
            self._path = spec.device
            ctx.logger.info("opened hardware watchdog", path=spec.device)
        timeout = goduration.parse(spec.timeout)
        seconds = self._device.set_timeout(int(timeout.total_seconds()))
        self._device.keepalive()
        actual = timedelta(seconds=seconds) if seconds > 0 else timeout
        feed = actual / 3  # three feeds per timeout, as Talos
        status = WatchdogTimerStatusSpec(
            device=spec.device, timeout=goduration.format(actual), feed_interval=goduration.format(feed)
        )
        self._feed_seconds = feed.total_seconds()
        ctx.logger.info(
            "set hardware watchdog timeout", timeout=status.timeout, feed_interval=status.feed_interval
        )
        self._say_once(
            f"watchdog {spec.device} armed: timeout {status.timeout}, fed every {status.feed_interval}"
        )
        return status

    def _close(self, ctx: ControllerContext | None) -> None:
        if self._device is None:
            return
        device, self._device, self._config = self._device, None, None
        try:
            device.disarm()
        except OSError as err:
            if ctx is not None:
                ctx.logger.warning("failed to send magic close to watchdog", path=self._path, error=str(err))
        if ctx is not None:
            ctx.logger.info("closing hardware watchdog", path=self._path)
            self._say_once(f"watchdog {self._path} disarmed")


def watchdog_controllers(
    layout: Layout,
    opener: Callable[[str], Watchdog] = open_device,
    *,
    say: Callable[[str], None] | None = None,
    device_exists: Callable[[str], bool] = os.path.exists,
) -> list[Controller]:
    """Config (or a trial boot) -> WatchdogTimerConfig -> the device, in registration order."""
    return [watchdog_timer_config_controller(device_exists), WatchdogTimerController(layout, opener, say=say)]
