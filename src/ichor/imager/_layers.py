"""Layer trees and their squashfs images, each cached by a key over exactly its inputs.

A layer is built in a scratch directory of the cache and renamed to ``layers/<name>-<key>.sqsh``
only when complete, so an interrupted build leaves nothing a later build could mistake for a
layer. ``mksquashfs -all-root -noappend -mkfs-time 0 -all-time 0`` makes the image depend only on
the tree's names, modes and bytes; ``.pyc`` files are compiled at build time with
``--invalidation-mode unchecked-hash`` (the layers are read-only and a TCG guest compiles slowly),
with their recorded paths being the guest's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from ichor.imager import InputError
from ichor.machinery import proc

__all__ = [
    "cached_layer",
    "compile_pyc",
    "normalise_modes",
    "open_directories",
    "squash",
    "tree_digest",
    "unpack_wheel",
]

SITE = "usr/lib/python3/dist-packages"
"""Where Debian's python3.11 looks for third-party packages (and where the image puts them)."""


def squash(tree: Path, out: Path) -> None:
    """``tree`` as a reproducible zstd squashfs at ``out``."""
    proc.run(
        ["mksquashfs", str(tree), str(out), "-all-root", "-noappend", "-no-xattrs", "-mkfs-time", "0",
         "-all-time", "0", "-comp", "zstd", "-processors", str(min(2, os.cpu_count() or 1)), "-quiet",
         "-no-progress"],
        timeout=900, hint="install squashfs-tools (scripts/os-packages.txt)",
    )  # fmt: skip


def normalise_modes(tree: Path) -> None:
    """Directories 0755, files 0644 or 0755 (by their owner-execute bit): umask-independent."""
    for root, dirs, files in os.walk(tree):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, 0o755 if mode & stat.S_IXUSR else 0o644)


def open_directories(tree: Path) -> None:
    """Every directory 0755, files untouched: a layer's directories merge with the same directories
    of the layers below, and overlayfs shows the topmost one's mode (a 0700 ``/usr`` in an extension
    would close ``/usr`` to every service that is not root)."""
    for root, dirs, _files in os.walk(tree):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)


def compile_pyc(tree: Path, *directories: str) -> None:
    """Compile every ``.py`` under ``directories`` (paths in the tree) as the guest will import them."""
    targets = [str(tree / d) for d in directories if (tree / d).is_dir()]
    if not targets:
        return
    proc.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "2", "--invalidation-mode", "unchecked-hash",
         "-s", str(tree), "-p", "/", *targets],
        timeout=900, check=False,
    )  # fmt: skip
    # compileall exits 1 for files that are not Python 3.11 (test data, py2 leftovers): those
    # simply get no .pyc, as pip's own byte-compilation does.


def record_dataclass_code(site: Path) -> None:
    """Write :data:`ichor.machinery.codecache.FILE_NAME` into the ``ichor`` package under ``site``: the
    methods every dataclass of the booting stack gets, compiled by importing that stack from ``site``
    in a fresh interpreter (a fixed hash seed, so two builds write the same bytes)."""
    from ichor.machinery.codecache import FILE_NAME

    if not (site / "ichor/machinery/codecache.py").is_file():  # removed with --rm: nothing to run
        return
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    proc.run([sys.executable, "-m", "ichor.machinery.codecache", str(site / "ichor" / FILE_NAME)],
             env=env, timeout=300)  # fmt: skip


def unpack_wheel(wheel: Path, site: Path) -> None:
    """Install ``wheel`` into ``site`` as pip would with ``--no-compile`` (no scripts, no RECORD rewrite).

    ``<name>.data/purelib`` and ``platlib`` go into ``site``; ``scripts``, ``headers`` and ``data``
    are dropped (the image runs modules, never console scripts). Names leaving ``site`` are refused.
    """
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            parts = name.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            if any(p in ("", ".", "..") for p in parts) or name.startswith("/"):
                raise InputError(f"wheel {wheel.name}: member {name!r} would leave site-packages")
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(target, 0o755 if mode & 0o100 else 0o644)


def tree_digest(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> str:
    """sha256 over the names, executable bits and bytes of every file under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if skip(path) or not path.is_file():
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(b"x" if os.stat(path).st_mode & stat.S_IXUSR else b"-")
        with path.open("rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


def cached_layer(
    cache: Path, name: str, key_material: object, fill: Callable[[Path], None], say: Callable[[str], None]
) -> Path:
    """The squashfs of layer ``name`` for ``key_material`` (JSON-able), built by ``fill(tree)`` if new."""
    key = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()[:16]
    layers = cache / "layers"
    layers.mkdir(parents=True, exist_ok=True)
    image = layers / f"{name}-{key}.sqsh"
    if image.is_file():
        say(f"layer {name}: cached ({image.name})")
        return image
    say(f"layer {name}: building ({image.name})")
    with tempfile.TemporaryDirectory(dir=layers, prefix=f".{name}-") as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        fill(tree)
        # The root of every layer is the image's "/" where it lies on top: never the umask's.
        os.chmod(tree, 0o755)
        partial = Path(scratch) / "layer.sqsh"
        squash(tree, partial)
        os.replace(partial, image)
    # Only this layer's older builds: another layer's name may begin with this one's.
    own = re.compile(re.escape(name) + r"-[0-9a-f]{16}\.sqsh")
    for stale in layers.glob(f"{name}-*.sqsh"):
        if stale != image and own.fullmatch(stale.name):
            stale.unlink()
    return image
