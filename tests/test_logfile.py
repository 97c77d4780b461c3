"""The one log reader behind ``talosctl logs`` and ``talosctl dmesg`` (ichor.machined.logfile)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from ichor.machined.logfile import follow_file

POLL = 0.01


def read(path: Path, tail: int | None = None) -> list[bytes]:
    async def main() -> list[bytes]:
        return [line async for line in follow_file(path, tail=tail)]

    return asyncio.run(main())


async def take(lines: AsyncIterator[bytes], count: int) -> list[bytes]:
    out: list[bytes] = []
    async with asyncio.timeout(10):
        async for line in lines:
            out.append(line)
            if len(out) == count:
                break
    return out


def test_tail_counts_lines_and_none_means_all(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\nb\nc\n")
    assert read(log) == [b"a\n", b"b\n", b"c\n"]
    assert read(log, tail=2) == [b"b\n", b"c\n"]
    assert read(log, tail=10) == [b"a\n", b"b\n", b"c\n"]
    assert read(log, tail=0) == []


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read(tmp_path / "none.log", tail=10) == []


def test_unfinished_last_line_is_shown_without_follow(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\nb\npart")
    assert read(log) == [b"a\n", b"b\n", b"part"]
    assert read(log, tail=1) == [b"part"]  # the unfinished line is the last line
    assert read(log, tail=0) == []


def test_follow_holds_an_unfinished_line_until_it_is_complete(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\npar")

    async def main() -> list[bytes]:
        lines = follow_file(log, tail=5, follow=True, poll_interval=POLL)
        first = await take(lines, 1)
        with log.open("ab") as handle:
            handle.write(b"tial\nnext\n")
        return first + await take(lines, 2)

    assert asyncio.run(main()) == [b"a\n", b"partial\n", b"next\n"]


def test_follow_with_tail_zero_shows_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_bytes(b"[talos] booting\n")

    async def main() -> list[bytes]:
        async with asyncio.TaskGroup() as group:
            taken = group.create_task(take(follow_file(log, tail=0, follow=True, poll_interval=POLL), 1))
            await asyncio.sleep(POLL * 5)  # the reader has opened the file by now
            with log.open("ab") as handle:
                handle.write(b"[talos] ready\n")
        return taken.result()

    assert asyncio.run(main()) == [b"[talos] ready\n"]


def test_follow_starts_over_when_the_file_is_truncated_or_created(tmp_path: Path) -> None:
    log = tmp_path / "x.log"

    async def main() -> list[bytes]:
        lines = follow_file(log, follow=True, poll_interval=POLL)
        log.write_bytes(b"one\ntwo\n")
        seen = await take(lines, 2)
        log.write_bytes(b"3\n")  # rotated: shorter than what was read
        return seen + await take(lines, 1)

    assert asyncio.run(main()) == [b"one\n", b"two\n", b"3\n"]
