"""The bound on the node's way out: past the limit the process ends with the sequence's code, after
saying so and naming the tasks and threads still waiting; disarmed or in time, nothing happens."""

from __future__ import annotations

import asyncio
import io
import threading
from typing import TextIO

from ichor.machined.exitdeadline import ExitDeadline, pending_task_report


def test_past_the_limit_it_names_the_stuck_task_dumps_threads_and_exits_with_the_code() -> None:
    said: list[str] = []
    exited: list[int] = []
    ended = threading.Event()
    dumped: list[str] = []

    def exit_(code: int) -> None:
        exited.append(code)
        ended.set()

    def dump(out: TextIO) -> None:
        dumped.append("threads")
        out.write("Thread 0x1 (most recent call first):\n")

    out = io.StringIO()
    deadline = ExitDeadline(said.append, limit=0.05, exit=exit_, dump=dump, out=out)

    async def stuck_handler() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.create_task(stuck_handler(), name="grpc call")
        deadline.arm(75)
        deadline.arm(0)  # the first code counts
        while not ended.is_set():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert exited == [75]
    assert said[0] == (
        "the node did not stop within 0 s of stopping its services: exiting with code 75 all the same; "
        "still pending:"
    )
    assert "task 'grpc call': stuck_handler (test_exitdeadline.py:" in said[1]
    assert dumped == ["threads"] and "Thread 0x1" in out.getvalue()


def test_disarmed_before_the_limit_it_never_exits() -> None:
    exited: list[int] = []
    deadline = ExitDeadline(lambda _line: None, limit=0.05, exit=exited.append, out=io.StringIO())

    async def main() -> None:
        deadline.arm(75)
        deadline.disarm()
        await asyncio.sleep(0.2)

    asyncio.run(main())
    assert exited == []


def test_the_report_lists_pending_tasks_by_name_without_itself() -> None:
    async def main() -> str:
        async def waiting() -> None:
            await asyncio.sleep(30)

        task = asyncio.create_task(waiting(), name="b-waiter")
        await asyncio.sleep(0)
        report = pending_task_report(asyncio.get_running_loop())
        task.cancel()
        return report

    report = asyncio.run(main())
    assert report.startswith("task 'b-waiter': waiting (test_exitdeadline.py:")
    assert "main" not in report
