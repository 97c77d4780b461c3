"""Cron schedules (Ichor's own, for ``EtcdBackupConfig.schedule``): parse, then ask for the next run.

The five standard fields ``minute hour day-of-month month day-of-week`` with ``*``, lists (``1,15``),
ranges (``1-5``), steps (``*/12``, ``0-30/10``), month and weekday names (``jan``, ``mon``; 0 and 7
are Sunday), and Vixie cron's rule that a restricted day-of-month and a restricted day-of-week
match either. The descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/
``@midnight``, ``@hourly``, and ``@every <Go duration>`` (k3s's ``etcd-snapshot-schedule-cron``
accepts the same set, through robfig/cron).

Times are UTC (a Talos node's clock). ``@every D`` slots are aligned to the Unix epoch rather than to
when the node started, so every control plane computes the same slots: that is what lets the etcd
backup claim one snapshot per cluster per slot.

This module is pure: it never reads the clock; callers pass the time.
"""

from __future__ import annotations

__all__ = ["MAX_LOOKAHEAD_YEARS", "CronSchedule", "parse_cron"]

import calendar
import dataclasses
from datetime import UTC, datetime, timedelta

from ichor.machinery import goduration
from ichor.machinery.errors import CronError, DurationError

MAX_LOOKAHEAD_YEARS = 5
"""A schedule with no run within this many years (``0 0 31 2 *``) is refused as never running."""

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))  # fmt: skip
_HINT = (
    "a cron schedule is five fields `minute hour day-of-month month day-of-week` (e.g. `0 */12 * * *`), "
    "a descriptor such as @daily or @hourly, or `@every <duration>` such as `@every 6h`"
)


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    word = text.lower()
    if word in names:
        return names[word]
    if not text.isdigit():
        raise CronError(f"{name} field: {text!r} is not a number", hint=_HINT)
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{name} field: {value} is out of range {low}-{high}", hint=_HINT)
    return value


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it is a bare ``*`` (unrestricted)."""
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name} field: step {step_text!r} is not a positive number", hint=_HINT)
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            lo_text, _, hi_text = base.partition("-")
            first, last = _value(lo_text, name, low, high, names), _value(hi_text, name, low, high, names)
            if first > last:
                raise CronError(f"{name} field: range {base!r} runs backwards", hint=_HINT)
        else:
            first = _value(base, name, low, high, names)
            last = high if slash else first
        values.update(range(first, last + 1, step))
    return frozenset(values), text == "*"


@dataclasses.dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule; :meth:`next_after` gives the first run strictly after a time."""

    text: str
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    any_day: bool = True
    any_weekday: bool = True
    every: timedelta | None = None
    """``@every D``: runs at every multiple of ``D`` since the Unix epoch."""

    def _day_matches(self, day: datetime) -> bool:
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week  # Vixie cron: both restricted -> either matches

    def next_after(self, when: datetime) -> datetime:
        """The first run strictly after ``when`` (an aware datetime; the result is in UTC)."""
        when = when.astimezone(UTC)
        if self.every is not None:
            period = round(self.every.total_seconds() * 1_000_000)
            since_epoch = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
                microseconds=(since_epoch // period + 1) * period
            )
        start = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        limit = day + timedelta(days=366 * MAX_LOOKAHEAD_YEARS)
        while day < limit:
            if day.month not in self.months:
                # jump to the first day of the next month
                day = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
                continue
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = day.replace(hour=hour, minute=minute)
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        raise CronError(f"schedule {self.text!r} never runs", hint=_HINT)


def parse_cron(text: str) -> CronSchedule:
    """Parse a schedule; raises :class:`CronError` saying which field is wrong and why."""
    spec = " ".join(str(text).split())
    if not spec:
        raise CronError("empty schedule", hint=_HINT)
    if spec.startswith("@every"):
        duration_text = spec[len("@every") :].strip()
        try:
            every = goduration.parse(duration_text)
        except DurationError as err:
            raise CronError(f"@every: {err}", hint=_HINT) from None
        if every < timedelta(seconds=1):
            raise CronError(f"@every: {duration_text!r} is shorter than one second", hint=_HINT)
        return CronSchedule(text=spec, every=every)
    if spec.startswith("@"):
        if spec.lower() not in _DESCRIPTORS:
            raise CronError(f"unknown descriptor {spec!r}", hint=_HINT)
        fields = _DESCRIPTORS[spec.lower()].split()
    else:
        fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected 5 fields, found {len(fields)} in {spec!r}", hint=_HINT)
    parsed = [_field(f, *rule) for f, rule in zip(fields, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in parsed[4][0])
    schedule = CronSchedule(
        text=spec, minutes=parsed[0][0], hours=parsed[1][0], days=parsed[2][0], months=parsed[3][0],
        weekdays=weekdays, any_day=parsed[2][1], any_weekday=parsed[4][1],
    )  # fmt: skip
    schedule.next_after(datetime(2000, 1, 1, tzinfo=UTC))  # refuses a schedule that never runs
    return schedule
