"""Compiled code for the methods ``dataclasses`` writes, made once when an image is built.

CPython 3.11's ``@dataclass`` writes the source of each method it adds (``__init__``, ``__repr__``,
``__eq__``, ...) and compiles it with ``exec``: importing machined's stack compiles 1,446 such
texts for 266 dataclasses, 0.23-0.36 s of the ~1.2 s of CPU the import takes on the host (the
.pyc files are there), and some 25 times that in a TCG guest, at every boot. The text is a pure
function of the class, so the imager compiles every text the stack writes once
(:func:`record`, run by ``python -m ichor.machinery.codecache``) into :data:`FILE_NAME` beside the
package, and a booting node (:func:`install`) hands ``dataclasses`` the compiled code for a text it
has seen; a text it has not (a class changed since, a module imported later) is compiled as
before. Without the file, or when it was written by another bytecode version, nothing changes;
nor with ``ICHOR_CODECACHE=off`` in the environment (a kernel argument reaches PID 1's environment:
``benchmarks/boot.py --compare-arg ICHOR_CODECACHE=off`` measures the cache in the guest).

The hook is the module-level name ``exec`` in ``dataclasses`` (a global found before the builtin),
not a private function: only the argument types of ``exec`` are relied on.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["FILE_NAME", "STACK_MODULES", "CodeCache", "default_path", "install", "record"]

FILE_NAME = "_dataclass_code.bin"
"""Beside ``ichor/__init__.py`` in an image; never in a source checkout."""

STACK_MODULES = (
    "ichor.machined.h2writes",
    "ichor.machined.memory",
    "ichor.machined.node",
    "ichor.machined._metal_boot",
    "ichor.installer.__main__",
)
"""What a booting node imports: the texts recorded into an image."""

_MAX_BYTES = 32 << 20
"""A bound on the file read at boot (the stack's texts make ~1 MB)."""


def default_path() -> Path:
    """Where an image keeps the file: beside the ``ichor`` package's ``__init__.py``."""
    return Path(__file__).resolve().parent.parent / FILE_NAME


def _compile(text: str) -> CodeType:
    # As ``exec(text)`` compiles it when called from dataclasses.py, which has no __future__ imports.
    return compile(text, "<string>", "exec", dont_inherit=True)


class CodeCache:
    """A stand-in for ``exec`` that runs known texts from their compiled code; ``recorded`` keeps
    each text compiled here, in order, when recording."""

    def __init__(self, codes: dict[str, CodeType], *, recording: bool = False) -> None:
        self.codes = codes
        self.recording = recording
        self.hits = 0
        self.misses = 0

    def __call__(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        if isinstance(source, str):
            code = self.codes.get(source)
            if code is None:
                self.misses += 1
                code = _compile(source)
                if self.recording:
                    self.codes[source] = code
            else:
                self.hits += 1
            source = code
        builtins.exec(source, globals, locals)

    def dumps(self) -> bytes:
        """The file's bytes: the bytecode magic number, then the texts and their code."""
        return importlib.util.MAGIC_NUMBER + marshal.dumps(self.codes)

    @classmethod
    def loads(cls, data: bytes) -> CodeCache | None:
        """The cache in ``data``; ``None`` when another bytecode version wrote it or it is not one."""
        magic = importlib.util.MAGIC_NUMBER
        if not data.startswith(magic):
            return None
        try:
            codes = marshal.loads(data[len(magic) :])
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(codes, dict) or not all(
            isinstance(k, str) and isinstance(v, CodeType) for k, v in codes.items()
        ):
            return None
        return cls(codes)


def install(path: Path | None = None) -> CodeCache | None:
    """Hand ``dataclasses`` the compiled code in ``path`` (default :func:`default_path`); ``None``,
    changing nothing, when there is no usable file. Installing twice keeps the first."""
    current = vars(dataclasses).get("exec")
    if isinstance(current, CodeCache):
        return current
    if os.environ.get("ICHOR_CODECACHE") == "off":
        return None
    path = default_path() if path is None else path
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > _MAX_BYTES:
        return None
    cache = CodeCache.loads(data)
    if cache is not None:
        dataclasses.exec = cache  # type: ignore[attr-defined]
    return cache


def record(out: Path, modules: tuple[str, ...] = STACK_MODULES, *, skipped: list[str] | None = None) -> int:
    """Import ``modules`` with a recording cache in place and write what it compiled to ``out``;
    the number of texts. A module that cannot be imported (an image built with parts removed) is
    named in ``skipped`` and the others are recorded. Run in a fresh interpreter: a module imported
    before is not recorded."""
    cache = CodeCache({}, recording=True)
    dataclasses.exec = cache  # type: ignore[attr-defined]
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError as err:
                if skipped is not None:
                    skipped.append(f"{name}: {err}")
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    out.write_bytes(cache.dumps())
    return len(cache.codes)


def main(argv: list[str] | None = None) -> int:
    """``python -m ichor.machinery.codecache OUT``: record the stack's texts into OUT."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ichor.machinery.codecache OUT", file=sys.stderr)
        return 2
    skipped: list[str] = []
    count = record(Path(args[0]), skipped=skipped)
    print(f"{count} dataclass method texts compiled into {args[0]}")
    for line in skipped:
        print(f"not recorded (import failed): {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
