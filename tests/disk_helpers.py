"""Shared pieces of the OS disk tests: tool checks, sparse images and loop devices that always go away."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ichor.machinery import proc

MIB = 1024 * 1024
GIB = 1024 * MIB


def need(*tools: str) -> None:
    """Skip, naming what is missing, unless every tool is on PATH."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/os-packages.txt lists the packages)")


def sparse(path: Path, size: int) -> Path:
    """A sparse file of ``size`` bytes (a disk image)."""
    with path.open("wb") as f:
        f.truncate(size)
    return path


@contextmanager
def loop_device(image: Path, why: str) -> Iterator[Path]:
    """``image`` attached to a free loop device (root only: skips saying ``why``); detached and the
    image removed afterwards, even when the test fails."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root: {why}")
    need("losetup")
    device = proc.run(["losetup", "--find", "--show", str(image)]).stdout.strip()
    try:
        yield Path(device)
    finally:
        proc.run(["losetup", "-d", device], check=False)
        image.unlink(missing_ok=True)
