"""The kernel command line of a metal image: Talos 1.7's defaults plus ``--extra-kernel-arg``.

As Talos's installer assembles it (``cmd/installer/pkg/install``): ``talos.platform=metal``, the
metal platform's consoles, ``kernel.DefaultArgs``, then the extra arguments, where ``console`` and
``talos.platform`` replace what was there, any other key adds a value, and ``-key`` drops the key
(002:670). An argument the command line cannot carry (empty, whitespace, quotes) is refused.
"""

from __future__ import annotations

import re

from ichor.imager import InputError

__all__ = ["DEFAULT_ARGS", "assemble"]

DEFAULT_ARGS: tuple[str, ...] = (
    "talos.platform=metal",
    "console=ttyS0",
    "console=tty0",
    "init_on_alloc=1",
    "slab_nomerge=",
    "pti=on",
    "consoleblank=0",
    "nvme_core.io_timeout=4294967295",
    "printk.devkmsg=on",
    "ima_template=ima-ng",
    "ima_appraise=fix",
    "ima_hash=sha512",
)

_OVERWRITE = ("console", "talos.platform")
_BAD = re.compile(r"[\s\"'\\]")


def _split(arg: str) -> tuple[str, str | None]:
    key, sep, value = arg.partition("=")
    return key, (value if sep else None)


def assemble(extra: tuple[str, ...] | list[str], base: tuple[str, ...] = DEFAULT_ARGS) -> str:
    """``base`` with ``extra`` applied, as one command line."""
    keys: dict[str, list[str | None]] = {}
    for arg in base:
        key, value = _split(arg)
        keys.setdefault(key, []).append(value)
    overwritten: set[str] = set()
    for arg in extra:
        if not arg or _BAD.search(arg) or arg in ("-", "=") or arg.startswith("="):
            raise InputError(
                f"kernel argument {arg!r} cannot be passed on the kernel command line",
                hint="one key or key=value per --extra-kernel-arg, without spaces or quotes",
            )
        if arg.startswith("-"):
            keys.pop(arg[1:].partition("=")[0], None)
            continue
        key, value = _split(arg)
        if key in _OVERWRITE and key not in overwritten:
            keys[key] = []
            overwritten.add(key)
        keys.setdefault(key, []).append(value)
    return " ".join(
        key if value is None else f"{key}={value}" for key, values in keys.items() for value in values
    )
