"""Small helpers two or more controllers share: a console line said once per change, and the
drain poll the delivery controllers run at machined's exit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["SayOnce", "poll_until"]


class SayOnce:
    """Say a line on the console unless it is the one said last (a retry loop's reason repeats)."""

    def __init__(self, say: Callable[[str], None] | None) -> None:
        self._say = say or (lambda _line: None)
        self._said = ""

    def __call__(self, line: str) -> None:
        if line != self._said:
            self._said = line
            self._say(line)


async def poll_until(done: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Wait up to ``timeout`` s, checking ``done`` every ``interval`` s; whether it came true."""
    try:
        async with asyncio.timeout(timeout):
            while not done():
                await asyncio.sleep(interval)
    except TimeoutError:
        return False
    return True
