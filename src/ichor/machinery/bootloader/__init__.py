"""Boot files and the A/B slot state: grub.cfg, grubenv, and the slot state machine with boot counting.

- :func:`render_grub_cfg` writes Talos 1.7's grub.cfg (entries ``"A - Talos vX"``, the reset entry)
  plus Ichor's counting block (``ichor.slot=X`` on every entry's command line).
- :func:`read_env`/:func:`write_env`/:func:`update_env` read and rewrite the 1024-byte grubenv in
  place, as GRUB's ``save_env`` needs; :func:`create_env` makes one at install time.
- :class:`BootDir` carries them out on a mounted BOOT (slot files, grub.cfg, grubenv; crash-safe order).
- :func:`upgrade`, :func:`boot`, :func:`bless`, :func:`fatal_error`, :func:`rollback` are the slot
  transitions as pure functions over :class:`BootState` (the grubenv's ``ichor_*`` keys).

Errors: :class:`~ichor.machinery.errors.BootloaderError` for files,
:class:`~ichor.machinery.errors.SlotError` for refused transitions. Nothing here mounts, reboots
or decides when to bless; machined does.
"""

from ichor.machinery.bootloader._bootdir import BootDir
from ichor.machinery.bootloader._grubcfg import (
    GRUBENV_PATH,
    SLOT_ARG,
    MenuEntry,
    parse_cmdlines,
    quote,
    render_grub_cfg,
    slot_arg,
    unquote,
)
from ichor.machinery.bootloader._grubenv import (
    ENV_SIZE,
    create_env,
    parse_env,
    read_env,
    render_env,
    update_env,
    write_env,
)
from ichor.machinery.bootloader._slots import (
    DEFAULT_TRIES,
    BootState,
    Slot,
    SlotRow,
    SlotStatus,
    Transition,
    bless,
    boot,
    fatal_error,
    installed,
    rollback,
    upgrade,
)
from ichor.machinery.errors import BootloaderError, SlotError

__all__ = [
    "DEFAULT_TRIES",
    "ENV_SIZE",
    "GRUBENV_PATH",
    "SLOT_ARG",
    "BootDir",
    "BootState",
    "BootloaderError",
    "MenuEntry",
    "Slot",
    "SlotError",
    "SlotRow",
    "SlotStatus",
    "Transition",
    "bless",
    "boot",
    "create_env",
    "fatal_error",
    "installed",
    "parse_cmdlines",
    "parse_env",
    "quote",
    "read_env",
    "render_env",
    "render_grub_cfg",
    "rollback",
    "slot_arg",
    "unquote",
    "update_env",
    "upgrade",
    "write_env",
]
