"""GRUB's environment block (``grubenv``): a 1024-byte file GRUB reads with ``load_env`` and writes with ``save_env``.

GRUB writes the file through its block list, never changing its size or place on disk, so Linux
must do the same: :func:`write_env` rewrites the 1024 bytes in place (``pwrite`` + ``fsync``),
never truncating or renaming. :func:`create_env` makes a new file (at install time only).
Format: ``# GRUB Environment Block\\n``, then ``key=value\\n`` lines, padded with ``#`` to 1024 bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ichor.machinery.errors import BootloaderError

__all__ = ["ENV_SIZE", "create_env", "parse_env", "read_env", "render_env", "update_env", "write_env"]

ENV_SIZE = 1024
_HEADER = b"# GRUB Environment Block\n"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def render_env(env: Mapping[str, str]) -> bytes:
    """The 1024 bytes of a grubenv holding ``env`` (in the order given)."""
    body = bytearray(_HEADER)
    for key, value in env.items():
        if not _NAME.match(key):
            raise BootloaderError(f"grubenv key {key!r} is not a GRUB variable name")
        if "\n" in value or "\\" in value:
            raise BootloaderError(f"grubenv value of {key} holds a newline or backslash: {value!r}")
        body += f"{key}={value}\n".encode()
    if len(body) > ENV_SIZE:
        raise BootloaderError(f"grubenv would need {len(body)} bytes; GRUB's block is {ENV_SIZE}")
    return bytes(body.ljust(ENV_SIZE, b"#"))


def parse_env(data: bytes) -> dict[str, str]:
    """The variables of a grubenv block; raises :class:`BootloaderError` when it is not one."""
    if len(data) != ENV_SIZE or not data.startswith(_HEADER):
        raise BootloaderError(f"not a GRUB environment block ({len(data)} bytes)")
    env: dict[str, str] = {}
    for line in data[len(_HEADER) :].decode(errors="replace").split("\n"):
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def read_env(path: str | os.PathLike[str]) -> dict[str, str]:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BootloaderError(f"cannot read {path}: {e.strerror}") from e
    return parse_env(data)


def create_env(path: str | os.PathLike[str], env: Mapping[str, str]) -> None:
    """Create a new grubenv (refuses to replace one: an existing file must be rewritten in place)."""
    data = render_env(env)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise BootloaderError(f"cannot create {path}: {e.strerror}") from e
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_env(path: str | os.PathLike[str], env: Mapping[str, str]) -> None:
    """Rewrite an existing 1024-byte grubenv in place with exactly ``env``; fsync."""
    data = render_env(env)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise BootloaderError(f"cannot open {path}: {e.strerror}") from e
    try:
        size = os.fstat(fd).st_size
        if size != ENV_SIZE:
            raise BootloaderError(f"{path} is {size} bytes, not {ENV_SIZE}: it is not a grubenv to rewrite")
        if os.pwrite(fd, data, 0) != ENV_SIZE:
            raise BootloaderError(f"short write to {path}")
        os.fsync(fd)
    finally:
        os.close(fd)


def update_env(path: str | os.PathLike[str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """Set (or, with None, remove) variables in an existing grubenv in place; returns the new env."""
    env = read_env(path)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    write_env(path, env)
    return env
