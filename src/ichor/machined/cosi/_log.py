"""The controller runtime's own log (``talosctl logs controller-runtime``), in Talos's line shape.

Talos writes one line per event with zap's console encoder::

    2024-05-06T10:00:00.123Z DEBUG controller starting {"component": "controller-runtime", "controller": "network.HostnameController"}
    2024-05-06T10:00:01.456Z ERROR controller failed {"component": "controller-runtime", "controller": "k8s.ManifestApplyController", "error": "..."}

that is: ISO 8601 time with milliseconds, the upper-case level, the message, then the fields as
JSON. :class:`RuntimeLog` appends such lines to a file (and passes them to Python logging, so
warnings and errors also reach the node's own output); :class:`ControllerLogger` is what a
controller logs through, its name filled in.

This module formats and writes; what is worth logging is for the runtime and the controllers.
"""

from __future__ import annotations

__all__ = ["ControllerLogger", "LogLevel", "RuntimeLog"]

import enum
import json
import logging
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from ichor.machined.cosi._resource import Clock, utc_now

log = logging.getLogger("ichor.machined.cosi")

COMPONENT = "controller-runtime"


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


_PYTHON_LEVELS = {
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.INFO: logging.INFO,
    LogLevel.WARN: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}


def format_time(when: datetime) -> str:
    """zap's ISO 8601 encoding: milliseconds, ``Z`` for UTC, else ``+hhmm``."""
    offset = when.strftime("%z")
    zone = "Z" if offset in ("", "+0000") else offset
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}{zone}"


def format_fields(fields: Mapping[str, object]) -> str:
    """zap's console fields: ``{"key": "value", ...}`` (a field that is not JSON becomes its text)."""
    return json.dumps(dict(fields), separators=(", ", ": "), ensure_ascii=False, default=str)


class RuntimeLog:
    """Appends the runtime's lines to ``path`` (none: Python logging only), stamped by ``clock``."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, clock: Clock | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._clock = clock or utc_now

    def write(self, level: LogLevel, controller: str, message: str, **fields: object) -> None:
        encoded = format_fields({"component": COMPONENT, "controller": controller, **fields})
        log.log(_PYTHON_LEVELS[level], "%s %s", message, encoded)
        line = f"{format_time(self._clock())} {level} {message} {encoded}\n"
        if self.path is None:
            return
        try:
            # Opened per line: no handle to own, and a rotated or removed file is simply re-created.
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)


class ControllerLogger:
    """``ctx.logger.info("rendered new static pod", id="kube-apiserver")``: a line naming the controller."""

    def __init__(self, runtime_log: RuntimeLog, controller: str) -> None:
        self._log = runtime_log
        self._controller = controller

    def debug(self, message: str, **fields: object) -> None:
        self._log.write(LogLevel.DEBUG, self._controller, message, **fields)

    def info(self, message: str, **fields: object) -> None:
        self._log.write(LogLevel.INFO, self._controller, message, **fields)

    def warning(self, message: str, **fields: object) -> None:
        self._log.write(LogLevel.WARN, self._controller, message, **fields)

    def error(self, message: str, **fields: object) -> None:
        self._log.write(LogLevel.ERROR, self._controller, message, **fields)


def go_duration(seconds: float) -> str:
    """A delay as Go prints a ``time.Duration`` in "restarting controller in 1.5s" (``500ms``, ``1m0s``)."""
    if seconds < 1:
        return f"{round(seconds * 1000):d}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text
