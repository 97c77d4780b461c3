"""Reading a log file that is still being written: ``talosctl logs`` and ``talosctl dmesg`` (with ``-f``).

One reader for every log the node serves (service logs, the console log). It polls the file, as
the files are plain files written by other processes; it must not open them for writing.
"""

from __future__ import annotations

__all__ = ["follow_file"]

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path


async def follow_file(
    path: Path, *, tail: int | None = None, follow: bool = False, poll_interval: float = 0.1
) -> AsyncIterator[bytes]:
    """Lines (each with its ``\\n``) of ``path``: the last ``tail`` already written (all if None, none
    if 0), then, with ``follow``, new lines as they are written, until the consumer stops iterating.

    A last line without its newline yet is shown as it is when not following; when following it is
    held back until it is complete. A file truncated or replaced while followed is read again from
    its start; a missing file reads as empty (and is waited for when following).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    complete_end = data.rfind(b"\n") + 1
    lines = [line + b"\n" for line in data[:complete_end].split(b"\n")[:-1]]
    if complete_end < len(data) and not follow:
        lines.append(data[complete_end:])
    shown = lines if tail is None else lines[-tail:] if tail > 0 else []
    for line in shown:
        yield line
    if not follow:
        return
    position, buffer = complete_end, b""
    while True:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = 0
        if size < position:
            position, buffer = 0, b""  # truncated or replaced: start over
        if size > position:
            with path.open("rb") as handle:
                handle.seek(position)
                chunk = handle.read(size - position)
            position += len(chunk)
            *complete, buffer = (buffer + chunk).split(b"\n")
            for line in complete:
                yield line + b"\n"
        await asyncio.sleep(poll_interval)
