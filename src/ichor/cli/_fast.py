"""Answers ``talosctl --help`` and ``talosctl version --client`` without importing click.

Start-up is most of what these two commands cost, and importing click (with ``inspect``, ``ast``
and ``dis`` behind it) is most of start-up. This module renders the root help from the same command
table the click group is built from, laid out the way click lays it out (tests compare the two at
every width click uses), and the client version from the same function ``talosctl version`` uses.
Anything else goes to click.

It must import nothing heavier than the standard library's ``os``, ``sys`` and ``textwrap``: no
click, no grpclib, protobuf, cryptography, pydantic or rich.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

_HELP_ARGS = (["--help"], ["-h"])
_USAGE = "Usage: talosctl [OPTIONS] COMMAND [ARGS]..."
_HELP_OPTION = ("-h, --help", "Show this message and exit.")


def client_version_text() -> str:
    """The ``Client:`` block of ``talosctl version``."""
    from ichor import __version__
    from ichor.machinery import TALOS_VERSION

    # os.uname() and sys.version, not the platform module: that one imports re, a start-up cost.
    uname = os.uname()
    machine = uname.machine.lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return (
        "Client:\n"
        f"\tTag:         {TALOS_VERSION}\n"
        f"\tSHA:         ichor-{__version__}\n"
        f"\tBuilt:       \n"
        f"\tGo version:  python{sys.version.split()[0]}\n"
        f"\tOS/Arch:     {uname.sysname.lower()}/{arch}\n"
    )


def terminal_columns() -> int:
    """Columns as :func:`shutil.get_terminal_size` finds them ($COLUMNS, the terminal, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def help_width(columns: int) -> int:
    """The width click's help formatter wraps to for a terminal of ``columns``."""
    return max(min(columns, 80) - 2, 50)


def _paragraphs(text: str, width: int, indent: str) -> list[str]:
    """``text`` split at blank lines; ``\\b`` paragraphs kept line for line, others re-wrapped."""
    import textwrap

    out = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        if lines[0].strip() == "\b":
            out.append("\n".join(indent + line for line in lines[1:]))
            continue
        own = len(lines[0]) - len(lines[0].lstrip())
        prefix = indent + " " * own
        joined = " ".join(line.strip() for line in lines)
        wrapped = textwrap.fill(
            joined, width, initial_indent=prefix, subsequent_indent=prefix, replace_whitespace=False
        )
        out.append(wrapped)
    return out


def _definitions(rows: list[tuple[str, str]], width: int) -> list[str]:
    """A two-column list, indented two spaces, the way click writes Options and Commands."""
    import textwrap

    first = min(max(len(term) for term, _ in rows), 30) + 2
    text_width = max(width - first - 2, 10)
    out = []
    for term, text in rows:
        lines = textwrap.wrap(text, text_width, replace_whitespace=False) or [""]
        head = f"  {term}".ljust(first + 2) if len(term) <= first - 2 else f"  {term}\n{' ' * (first + 2)}"
        out.append(head + lines[0])
        out.extend(" " * (first + 2) + line for line in lines[1:])
    return out


def root_help(description: str, commands: Iterable[tuple[str, str]], width: int) -> str:
    """The root ``--help`` page for ``commands`` (name, one-line help), wrapped to ``width``."""
    parts = [_USAGE, "", "\n\n".join(_paragraphs(description, width, "  ")), "", "Options:"]
    parts += _definitions([_HELP_OPTION], width)
    parts += ["", "Commands:", *_definitions(sorted(commands), width)]
    return "\n".join(parts) + "\n"


def answer(args: list[str], description: str, commands: Iterable[tuple[str, str]]) -> bool:
    """Print the answer and return True when ``args`` is one of the commands answered here."""
    if args in _HELP_ARGS:
        sys.stdout.write(root_help(description, commands, help_width(terminal_columns())))
    elif args[:1] == ["version"] and sorted(args[1:]) in (["--client"], ["--client", "--short"]):
        from ichor.machinery import TALOS_VERSION

        sys.stdout.write(f"Client {TALOS_VERSION}\n" if "--short" in args else client_version_text())
    else:
        return False
    sys.stdout.flush()
    return True
