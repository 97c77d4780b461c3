"""The node's console: ``[talos] <message>`` lines in the console log (``talosctl dmesg``) and on stderr."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

__all__ = ["Console"]


class Console:
    def __init__(self, path: Path, clock: Callable[[], datetime]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._clock = clock

    def print(self, message: str) -> None:
        stamp = self._clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        text = "".join(f"{stamp} [talos] {line}\n" for line in message.splitlines() or [""])
        sys.stderr.write(text)
        # The log's filesystem may be gone (a reset shut EPHEMERAL down under it): stderr still has it.
        with contextlib.suppress(OSError):
            self._file.write(text)
            self._file.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
