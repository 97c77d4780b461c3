"""grub.cfg as Talos 1.7 writes it, plus Ichor's boot-counting block.

Talos's template (``bootloader/grub/encode.go``): ``set default``/``set fallback``, ``timeout=3``,
one entry per slot ``"A - Talos v1.7.6"`` booting ``/A/vmlinuz`` + ``/A/initramfs.xz``, and a
"Reset Talos installation and return to maintenance mode" entry that boots the default slot with
``talos.experimental.wipe=system:EPHEMERAL,STATE``. With ``counting`` (Ichor's default) every entry
gets ``--id <slot>`` and ``ichor.slot=<slot>`` on its command line, and a block before the entries
reads the grubenv and does what :func:`~ichor.machinery.bootloader.boot` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ichor.machinery.bootloader._slots import DEFAULT_TRIES, Slot
from ichor.machinery.errors import BootloaderError

__all__ = [
    "GRUBENV_PATH",
    "SLOT_ARG",
    "MenuEntry",
    "parse_cmdlines",
    "quote",
    "render_grub_cfg",
    "slot_arg",
    "unquote",
]

GRUBENV_PATH = "($root)/grub/grubenv"
"""Where the counting block reads and saves the grubenv: ``/grub/grubenv`` on BOOT."""
RESET_TITLE = "Reset Talos installation and return to maintenance mode"
RESET_ARG = "talos.experimental.wipe=system:EPHEMERAL,STATE"
_SPECIAL = '\\{}&$|;<>"'
FAILED_REASON = "no healthy boot in its tries"
SLOT_ARG = "ichor.slot"
"""The kernel argument naming the slot an entry boots (machined reads it to know its slot)."""


def slot_arg(slot: str) -> str:
    """``ichor.slot=<slot>``, as every counting entry ends its command line."""
    return f"{SLOT_ARG}={slot}"


def quote(text: str) -> str:
    """Escape what GRUB's script would expand in a kernel command line (Talos's ``Quote``)."""
    for c in _SPECIAL:
        text = text.replace(c, "\\" + c)
    return text


def unquote(text: str) -> str:
    for c in '{}&$|;<>\\"':
        text = text.replace("\\" + c, c)
    return text


@dataclass(frozen=True)
class MenuEntry:
    """A slot's entry: its version (for the title) and kernel command line."""

    version: str
    cmdline: str


def _title(slot: Slot, version: str, name: str) -> str:
    return f"{slot} - {name} {version}"


def _counting_block(good: Slot, max_tries: int) -> list[str]:
    keys = "ichor_good ichor_try ichor_tries ichor_ver_A ichor_ver_B ichor_failed"
    lines = [
        "# Ichor boot counting: the last good slot boots unless a slot on trial has tries left.",
        f"set ichor_good={good}",
        'set ichor_try=""',
        "set ichor_tries=0",
        f"if [ -f {GRUBENV_PATH} ]; then",
        f"  load_env -f {GRUBENV_PATH} {keys}",
        "fi",
        'set default="${ichor_good}"',
        'if [ "${ichor_try}" != "" ]; then',
        '  set fallback="${ichor_good}"',
    ]
    for n in range(max_tries, 0, -1):
        keyword = "if" if n == max_tries else "elif"
        lines += [
            f'  {keyword} [ "${{ichor_tries}}" = "{n}" ]; then',
            f"    set ichor_tries={n - 1}",
            '    set default="${ichor_try}"',
        ]
    lines.append("  else")
    for slot in Slot:
        lines.append(
            f'    if [ "${{ichor_try}}" = "{slot}" ]; then set ichor_failed="{slot}:${{ichor_ver_{slot}}}:{FAILED_REASON}"; fi'
        )
    lines += [
        '    set ichor_try=""',
        "    set ichor_tries=0",
        "  fi",
        f"  save_env -f {GRUBENV_PATH} ichor_try ichor_tries ichor_failed",
        "fi",
        "",
    ]
    return lines


def _entry(
    title: str, slot: str, cmdline: str, *, counting: bool, entry_id: str, extra: str = ""
) -> list[str]:
    args = quote(cmdline) + (f" {slot_arg(slot)}" if counting else "") + (f" {extra}" if extra else "")
    head = f'menuentry "{title}" --id {entry_id} {{' if counting else f'menuentry "{title}" {{'
    return [
        head,
        "  set gfxmode=auto",
        "  set gfxpayload=text",
        f"  linux /{slot}/vmlinuz {args}",
        f"  initrd /{slot}/initramfs.xz",
        "}",
    ]


def render_grub_cfg(
    entries: Mapping[Slot, MenuEntry],
    default: Slot,
    *,
    fallback: Slot | None = None,
    add_reset: bool = True,
    counting: bool = True,
    name: str = "Talos",
    max_tries: int = DEFAULT_TRIES,
    timeout: int = 3,
) -> str:
    """grub.cfg for the slots in ``entries``; ``default`` is the last good slot.

    ``counting=False`` gives Talos 1.7's file byte for byte (with ``timeout`` 3, Talos's menu wait).
    Upgrades must not give a slot more tries than ``max_tries``: the counting block spells each
    count out (GRUB has no arithmetic).
    """
    if default not in entries:
        raise BootloaderError(f"invalid default entry: {default}")
    if fallback is not None and fallback not in entries:
        raise BootloaderError(f"invalid fallback entry: {fallback}")
    if fallback == default:
        raise BootloaderError("default and fallback entries must not be the same")
    for slot, entry in entries.items():
        if '"' in entry.version or "\n" in entry.version or "\n" in entry.cmdline:
            raise BootloaderError(
                f"slot {slot}: a version or command line GRUB cannot hold: {entry.version!r}"
            )
    lines = [f'set default="{_title(default, entries[default].version, name)}"']
    if fallback is not None:
        lines.append(f'set fallback="{_title(fallback, entries[fallback].version, name)}"')
    else:
        lines.append("")
    lines += [
        f"set timeout={timeout}",
        "",
        "insmod all_video",
        "",
        "terminal_input console",
        "terminal_output console",
        "",
    ]
    if counting:
        lines += _counting_block(default, max_tries)
    for slot in sorted(entries):
        entry = entries[slot]
        lines += _entry(
            _title(slot, entry.version, name), slot, entry.cmdline, counting=counting, entry_id=slot
        )
    if add_reset:
        # With counting the last good slot may change after this file is written (a bless only
        # rewrites the grubenv), so the reset entry boots whatever ${ichor_good} is at boot time.
        reset_slot = "${ichor_good}" if counting else str(default)
        good = entries[default]
        lines += _entry(
            RESET_TITLE, reset_slot, good.cmdline, counting=counting, entry_id="Reset", extra=RESET_ARG
        )
    return "\n".join(lines) + "\n"


_LINUX = re.compile(r"^\s*linux\s+/([AB])/vmlinuz\s+(.*)$", re.MULTILINE)


def parse_cmdlines(cfg: str) -> dict[Slot, str]:
    """Each slot's kernel command line in a grub.cfg this module (or Talos) wrote, unquoted,
    without Ichor's ``ichor.slot=X`` (the reset entry, which adds its wipe argument, is skipped)."""
    out: dict[Slot, str] = {}
    for slot, args in _LINUX.findall(cfg):
        if RESET_ARG in args or Slot(slot) in out:
            continue
        args = args.removesuffix(f" {slot_arg(slot)}")
        out[Slot(slot)] = unquote(args)
    return out
