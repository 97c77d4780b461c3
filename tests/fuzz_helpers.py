"""Shared by the fuzz tests: the fixed budget, a server kept running across examples, and the
tracebacks it logs (a crash a caller only sees as a status)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

#: Derandomized, no example database, no per-example deadline: the same run in CI as locally.


class Live:
    """A server running on :attr:`loop` between examples; ``run`` drives one coroutine on it.

    Not a dataclass: hypothesis would print all of it with every failing example.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, server: Any, **extra: Any) -> None:
        self.loop = loop
        self.server = server
        self.extra = extra
        self.tracebacks: list[str] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def __repr__(self) -> str:
        return "Live()"


class _Tracebacks(logging.Handler):
    def __init__(self, into: list[str], marks: tuple[str, ...]) -> None:
        super().__init__(logging.ERROR)
        self.into = into
        self.marks = marks

    def emit(self, record: logging.LogRecord) -> None:
        text = logging.Formatter().format(record)
        if any(mark in text for mark in self.marks):
            self.into.append(text)


@contextlib.contextmanager
def collecting_tracebacks(into: list[str], *marks: str) -> Iterator[None]:
    """Collect into ``into`` every error logged whose text (traceback included) names one of ``marks``."""
    handler = _Tracebacks(into, marks)
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
