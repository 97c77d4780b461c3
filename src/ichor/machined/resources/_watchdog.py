"""Hardware watchdog timers (the ``WatchdogTimerConfig`` document, 004:757-771): Talos's
``WatchdogTimerConfigs`` and ``WatchdogTimerStatuses`` (namespace ``runtime``, one resource each,
id ``timer``, columns Device and Timeout). Durations are Go's text (``1m0s``; ``0s`` unset), as
Talos's YAML prints a ``time.Duration``.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import PrintColumn, ResourceType

__all__ = [
    "WATCHDOG_TIMER_CONFIGS",
    "WATCHDOG_TIMER_ID",
    "WATCHDOG_TIMER_STATUSES",
    "WATCHDOG_TIMER_TYPES",
    "WatchdogTimerConfigSpec",
    "WatchdogTimerStatusSpec",
]

WATCHDOG_TIMER_ID = "timer"


@dataclasses.dataclass(frozen=True)
class WatchdogTimerConfigSpec:
    """The watchdog device to arm and its timeout."""

    device: str = ""
    timeout: str = "0s"


@dataclasses.dataclass(frozen=True)
class WatchdogTimerStatusSpec:
    """The armed watchdog: device, timeout, and how often machined feeds it."""

    device: str = ""
    timeout: str = "0s"
    feed_interval: str = dataclasses.field(default="0s", metadata={"yaml": "feedInterval"})


_COLUMNS = (PrintColumn("Device", "{.device}"), PrintColumn("Timeout", "{.timeout}"))

WATCHDOG_TIMER_CONFIGS: ResourceType[WatchdogTimerConfigSpec] = ResourceType(
    type="WatchdogTimerConfigs.runtime.talos.dev",
    default_namespace="runtime",
    spec_class=WatchdogTimerConfigSpec,
    print_columns=_COLUMNS,
)
WATCHDOG_TIMER_STATUSES: ResourceType[WatchdogTimerStatusSpec] = ResourceType(
    type="WatchdogTimerStatuses.runtime.talos.dev",
    default_namespace="runtime",
    spec_class=WatchdogTimerStatusSpec,
    print_columns=_COLUMNS,
)

WATCHDOG_TIMER_TYPES = (WATCHDOG_TIMER_CONFIGS, WATCHDOG_TIMER_STATUSES)
"""The watchdog, as Talos's two ``runtime`` controllers run it (:mod:`ichor.machined.controllers.watchdog`):

* ``runtime.WatchdogTimerConfigController``: the ``WatchdogTimerConfig`` document ->
  WatchdogTimerConfig ``timer`` (timeout 1m0s when the document gives none);
* ``runtime.WatchdogTimerController``: WatchdogTimerConfig -> the device opened, its timeout set,
  fed every third of the timeout from machined's event loop (so a machined that hangs is reset by
  the hardware), WatchdogTimerStatus ``timer``; without a config the device gets the magic close
  (``V``) and is disarmed.
"""
