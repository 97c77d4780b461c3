"""A hand-driven clock for tests of code that takes an injectable ``clock`` (a ``() -> datetime``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """Returns :attr:`now`; time moves only with :meth:`advance` (or by setting ``now``)."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
