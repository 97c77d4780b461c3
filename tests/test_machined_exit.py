"""machined's entry point: its event loop closes without waiting for a worker thread still blocked in
a call (on an installed VM that wait held every reboot for 14 s)."""

from __future__ import annotations

import asyncio
import threading

from ichor.machined.__main__ import _UnjoinedExecutor


def test_the_loop_closes_while_a_worker_thread_is_still_blocked() -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocked() -> None:
        entered.set()
        release.wait(4)

    async def node() -> str:
        asyncio.get_running_loop().set_default_executor(_UnjoinedExecutor(thread_name_prefix="test"))
        asyncio.get_running_loop().run_in_executor(None, blocked)
        await asyncio.to_thread(entered.wait, 5)
        return "stopped"

    try:
        assert asyncio.run(node()) == "stopped"
        # asyncio.run has returned and the call it did not wait for is still in progress.
        assert not release.is_set()
        assert any(t.name.startswith("test") and t.is_alive() for t in threading.enumerate())
    finally:
        release.set()


def test_a_default_executor_would_have_waited() -> None:
    """The control: with asyncio's own executor, asyncio.run returns only after the call ended."""
    finished = threading.Event()

    def short() -> None:
        threading.Event().wait(0.2)
        finished.set()

    async def node() -> None:
        asyncio.get_running_loop().run_in_executor(None, short)

    asyncio.run(node())
    assert finished.is_set()
