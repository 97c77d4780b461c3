"""A mounted BOOT partition as the A/B slots live on it: slot directories, grub.cfg and the grubenv.

The transitions of :mod:`._slots` carried out on files, in the order that survives a crash at any
point: an upgrade writes and fsyncs the new slot's kernel and initramfs first, then grub.cfg
(written to a new file and renamed: GRUB only reads it), and only then the grubenv (rewritten in
place), whose change is what makes GRUB try the new slot. Bless, fatal error and rollback touch
only the grubenv.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ichor.machinery.bootloader._grubcfg import MenuEntry, parse_cmdlines, render_grub_cfg, slot_arg
from ichor.machinery.bootloader._grubenv import create_env, read_env, write_env
from ichor.machinery.bootloader._slots import (
    DEFAULT_TRIES,
    BootState,
    Slot,
    Transition,
    bless,
    boot,
    fatal_error,
    rollback,
    upgrade,
)
from ichor.machinery.errors import SlotError

__all__ = ["BootDir"]

KERNEL = "vmlinuz"
INITRAMFS = "initramfs.xz"


def _fsync_copy(source: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".new")
    with source.open("rb") as src, tmp.open("wb") as dst:
        shutil.copyfileobj(src, dst, 4 * 1024 * 1024)
        dst.flush()
        os.fsync(dst.fileno())
    tmp.replace(dest)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class BootDir:
    """BOOT mounted at ``root`` (``/boot`` on a node): ``A/``, ``B/``, ``grub/grub.cfg``, ``grub/grubenv``."""

    root: Path

    @property
    def grubenv(self) -> Path:
        return self.root / "grub" / "grubenv"

    @property
    def grub_cfg(self) -> Path:
        return self.root / "grub" / "grub.cfg"

    def state(self) -> BootState:
        return BootState.from_env(read_env(self.grubenv))

    def holds(self, slot: Slot) -> bool:
        """The slot's directory has both boot files (Talos's rollback checks the directory)."""
        return (self.root / slot / KERNEL).is_file() and (self.root / slot / INITRAMFS).is_file()

    def save(self, t: Transition) -> Transition:
        """Save ``t``'s state into the grubenv (in place)."""
        env = read_env(self.grubenv)
        env.update(t.state.to_env())
        write_env(self.grubenv, env)
        return t

    def _write_cfg(self, state: BootState, cmdlines: dict[Slot, str]) -> None:
        entries = {
            s: MenuEntry(state.version(s), cmdlines[s]) for s in Slot if state.version(s) and s in cmdlines
        }
        text = render_grub_cfg(entries, state.good)
        tmp = self.grub_cfg.with_name("grub.cfg.new")
        tmp.write_text(text)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(self.grub_cfg)
        _fsync_dir(self.grub_cfg.parent)

    def install_first(
        self, version: str, kernel: Path, initramfs: Path, cmdline: str, slot: Slot = Slot.A
    ) -> BootState:
        """A fresh BOOT (mounted, empty): ``slot`` holds ``version``, grub.cfg and a new grubenv."""
        state = BootState(good=slot, versions={slot: version})
        (self.root / slot).mkdir(parents=True, exist_ok=True)
        (self.root / "grub").mkdir(parents=True, exist_ok=True)
        _fsync_copy(kernel, self.root / slot / KERNEL)
        _fsync_copy(initramfs, self.root / slot / INITRAMFS)
        self._write_cfg(state, {slot: cmdline})
        create_env(self.grubenv, state.to_env())
        return state

    def upgrade(
        self,
        version: str,
        kernel: Path,
        initramfs: Path,
        cmdlines: dict[Slot, str],
        *,
        force: bool = False,
        tries: int = DEFAULT_TRIES,
    ) -> Transition:
        """Write ``version`` into the slot that is not good and put it on trial (see :func:`upgrade`).

        ``cmdlines`` gives the command line of every slot that should keep an entry (the good one's
        is usually its current one). Refusals raise :class:`SlotError` before anything is written.
        """
        t = upgrade(self.state(), version, force=force, tries=tries)
        target = t.state.trial
        assert target is not None
        if target not in cmdlines or t.state.good not in cmdlines:
            raise SlotError(
                f"no kernel command line given for slot {target if target not in cmdlines else t.state.good}"
            )
        (self.root / target).mkdir(exist_ok=True)
        _fsync_copy(kernel, self.root / target / KERNEL)
        _fsync_copy(initramfs, self.root / target / INITRAMFS)
        _fsync_dir(self.root / target)
        self._write_cfg(t.state, cmdlines)
        return self.save(t)

    def boot(self) -> tuple[Slot, Transition]:
        """GRUB's counting step done by machined itself before a kexec: the slot to load next."""
        slot, t = self.next_boot()
        return slot, self.save(t)

    def next_boot(self) -> tuple[Slot, Transition]:
        """The slot GRUB would boot next and the state its counting step would save, nothing written
        (a kexec saves it with :meth:`save` once the slot's kernel is loaded)."""
        return boot(self.state())

    def entry(self, slot: Slot) -> tuple[Path, Path, str]:
        """``slot``'s kernel, initramfs and command line as its GRUB entry boots them (with
        ``ichor.slot=``); :class:`SlotError` when the slot holds no install or grub.cfg no entry."""
        if not self.holds(slot):
            raise SlotError(f"slot {slot} holds no kernel and initramfs")
        cmdlines = parse_cmdlines(self.grub_cfg.read_text())
        if slot not in cmdlines:
            raise SlotError(f"grub.cfg has no entry for slot {slot}")
        return self.root / slot / KERNEL, self.root / slot / INITRAMFS, f"{cmdlines[slot]} {slot_arg(slot)}"

    def bless(self, booted: Slot) -> Transition:
        return self.save(bless(self.state(), booted))

    def fatal_error(self, booted: Slot, reason: str) -> Transition:
        return self.save(fatal_error(self.state(), booted, reason))

    def rollback(self, booted: Slot) -> Transition:
        """``talosctl rollback``: refused with Talos's text unless the other slot holds an install."""
        if not self.holds(booted.other):
            raise SlotError('cannot rollback to "", label does not exist')
        return self.save(rollback(self.state(), booted))
