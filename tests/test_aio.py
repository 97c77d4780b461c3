"""machinery/aio.py: ``race`` against an event or any awaitable; the loser is cancelled."""

from __future__ import annotations

import asyncio

from ichor.machinery.aio import race


def test_race_returns_the_work_or_says_the_stop_came_first_and_cancels_the_loser() -> None:
    async def main() -> None:
        assert await race(asyncio.sleep(0, "done"), asyncio.Event()) == (False, "done")
        stop = asyncio.Event()
        stop.set()
        never = asyncio.ensure_future(asyncio.Event().wait())
        assert await race(never, stop) == (True, None)
        assert never.cancelled()
        slow = asyncio.ensure_future(asyncio.sleep(60))
        assert await race(slow, asyncio.sleep(0)) == (True, None)  # an awaitable as the stop
        assert slow.cancelled()
        assert await race(asyncio.sleep(0, None), asyncio.sleep(60)) == (False, None)  # None is a result

    asyncio.run(asyncio.wait_for(main(), 10))
