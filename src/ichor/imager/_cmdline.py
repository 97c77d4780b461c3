"""The kernel command line of an image: :func:`ichor.machinery.kernelargs.installer_cmdline` (Talos
1.7's installer and imager assembly: ``talos.platform=metal``, the metal consoles,
``kernel.DefaultArgs``, then ``--extra-kernel-arg`` with ``console``/``talos.platform`` replacing and
``-arg`` dropping, 002:670), after refusing an argument a command line cannot carry.

META values for outputs that have no META partition (``iso``, ``cmdline``, ``kernel``) travel as
``talos.environment=INSTALLER_META_BASE64=<values>``, as Talos's imager passes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ichor.imager import InputError
from ichor.machinery.kernelargs import installer_cmdline
from ichor.machinery.meta import VALUES_ENV, MetaValue, encode_values

__all__ = ["META_ENV", "assemble", "check_arg"]

META_ENV = VALUES_ENV
"""Talos's ``constants.MetaValuesEnvVar``."""

# Whitespace splits an argument; quotes and backslashes the kernel's parser and GRUB's script read.
_BAD = re.compile(r"[\s\"'\\]")
COMMAND_LINE_SIZE = 2048
"""x86's ``COMMAND_LINE_SIZE``: the kernel keeps this many bytes, the NUL included, and drops the rest."""


def check_arg(arg: str) -> None:
    """Refuse what the command line cannot pass as one argument (InputError naming it)."""
    if not arg or _BAD.search(arg) or arg in ("-", "=") or arg.startswith("="):
        raise InputError(
            f"kernel argument {arg!r} cannot be passed on the kernel command line",
            hint="one key or key=value per --extra-kernel-arg, without spaces, quotes or backslashes",
        )


def assemble(extra: Sequence[str], meta: Sequence[MetaValue] = ()) -> str:
    """Talos's metal command line with ``extra`` applied (and ``meta`` as ``talos.environment``)."""
    for arg in extra:
        check_arg(arg)
    environment = [f"{META_ENV}={encode_values(meta)}"] if meta else []
    line = str(installer_cmdline(platform="metal", arch="amd64", extra_args=extra, environment=environment))
    if len(line.encode()) >= COMMAND_LINE_SIZE:
        what = "the --meta values and " if meta else ""
        raise InputError(
            f"the kernel command line would be {len(line.encode())} bytes; the kernel keeps only "
            f"{COMMAND_LINE_SIZE - 1}, so {what}the last --extra-kernel-arg ({extra[-1] if extra else 'none'}) "
            "would be cut off",
            hint="pass fewer or shorter --extra-kernel-arg/--meta values (the metal profile puts --meta into META)",
        )
    return line
