"""Writing files the way a config tool must: atomically, never clobbering without ``--force``.

A crash mid-write leaves either the old file or the new one, never a truncated mix: data goes to a
temporary file in the same directory, is fsynced, then renamed over the target.
"""

from __future__ import annotations

__all__ = ["check_writable", "write_atomic"]

import contextlib
import os
import tempfile
from pathlib import Path

from ichor.machinery.errors import MachineryError, OutputExistsError


def check_writable(path: Path, *, force: bool, flag: str = "--force") -> None:
    """Raise :class:`OutputExistsError` when ``path`` exists and ``force`` is false."""
    if path.exists() and not force:
        raise OutputExistsError(
            f"file {str(path)!r} already exists",
            hint=f"use {flag} to overwrite it, or choose another output path",
        )


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600, force: bool = True
) -> Path:
    """Write ``data`` to ``path`` atomically with permissions ``mode``; returns the path.

    With ``force=False`` an existing file is an error and nothing is written.
    """
    target = Path(path)
    check_writable(target, force=force)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise MachineryError(f"cannot write {str(target)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise MachineryError(f"cannot write {str(target)!r}: {exc.strerror}") from None
    return target
