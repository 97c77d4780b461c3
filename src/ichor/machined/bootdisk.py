"""The system disk a node booted from: its A/B boot slots (BOOT's grubenv) and META, as one object.

A node that boots from an installed disk (metal) is given a :class:`BootDisk` at start-up; a node
with no disk of its own (container, process) has none, and the API answers the RPCs that need one
with Talos's refusal. Everything a slot transition or a META change writes goes through here:

* :meth:`BootDisk.upgrade`: the installer's upgrade mode (:func:`ichor.installer.upgrade_disk`)
  writes the slot that is not good and puts it on trial (META ``Upgrade`` = the good slot);
* :meth:`BootDisk.bless`: the trial slot booted healthy and becomes the last good one (META
  ``Upgrade`` deleted, as Talos's ``DropUpgradeFallback`` does);
* :meth:`BootDisk.rollback`: ``talosctl rollback`` (the other slot becomes good; Talos's error when
  it is empty);
* :meth:`BootDisk.meta_write`/:meth:`BootDisk.meta_delete`: ``talosctl meta write|delete``.

Each change re-reads what it wrote; :meth:`BootDisk.publish` (on the event loop: Sources wake
controllers) puts it into the two :class:`~ichor.machined.cosi.Source` s: :attr:`slots` (the
``BootState``, for ``get bootslots``) and :attr:`meta` (the keys, for ``get metakeys``). The booted
slot comes from the kernel command line (``ichor.slot=X``, written into every GRUB entry).

Every other method blocks (mounts, fsyncs): callers on the event loop use ``asyncio.to_thread``. Errors
are :class:`~ichor.machinery.errors.DiskError` s (``SlotError``, ``MetaError``, ``InstallError``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from ichor.machined.cosi import Source
from ichor.machinery.blockdev import (
    Label,
    find_system_disk,
    partition_path,
)
from ichor.machinery.bootloader import SLOT_ARG, BootDir, BootState, Slot, Transition
from ichor.machinery.errors import DiskError, MetaError
from ichor.machinery.meta import Meta, MetaKey

__all__ = ["BootDisk", "booted_slot", "find_boot_disk"]


def booted_slot(cmdline: str) -> Slot | None:
    """The slot GRUB booted (``ichor.slot=A``/``B`` on the kernel command line), None without one."""
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key == SLOT_ARG and value in ("A", "B"):
            return Slot(value)
    return None


class BootDisk:
    """A node's installed system disk; see the module docstring.

    ``boot`` mounts BOOT for the length of a ``with`` block (yielding its root); ``meta_path`` (with
    ``meta_offset``/``meta_size`` inside an image file) is META; ``upgrade_disk`` performs the
    installer's upgrade mode on ``disk``. Tests give a directory, a file and a stand-in.
    """

    def __init__(
        self,
        disk: str,
        *,
        booted: Slot | None,
        boot: Callable[[], AbstractContextManager[Path]],
        meta_path: Path,
        meta_offset: int = 0,
        meta_size: int | None = None,
        upgrade_disk: Callable[..., Transition] | None = None,
    ) -> None:
        self.disk = disk
        self.booted = booted
        self._boot = boot
        self._meta_path, self._meta_offset, self._meta_size = meta_path, meta_offset, meta_size
        self._upgrade_disk = upgrade_disk
        self._lock = threading.Lock()
        self._state: BootState | None = None
        self._keys: Mapping[int, bytes] = {}
        self.slots: Source[BootState | None] = Source("boot slots", None)
        self.meta: Source[Mapping[int, bytes]] = Source("META keys", {})

    def publish(self) -> None:
        """Put what was last read into :attr:`slots` and :attr:`meta` (call on the event loop)."""
        if self.slots.value != self._state:
            self.slots.set(self._state)
        if self.meta.value != self._keys:
            self.meta.set(dict(self._keys))

    # --- reading ---------------------------------------------------------------------------------

    def _meta(self) -> Meta:
        return Meta.open(
            self._meta_path, offset=self._meta_offset, size=self._meta_size, printer=lambda _: None
        )

    def refresh(self) -> BootState:
        """Read the grubenv and META again and publish both; the boot state."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> BootState:
        with self._boot() as root:
            state = BootDir(root).state()
        self._state = state
        try:
            self._keys = self._meta().items()
        except MetaError:
            self._keys = {}
        return state

    def state(self) -> BootState:
        """The boot state as last read (reads it when it has not been)."""
        state = self._state
        return state if state is not None else self.refresh()

    def on_trial(self) -> bool:
        """The node booted the slot that is on trial (its health decides whether it is blessed)."""
        state = self.state()
        return self.booted is not None and state.trial == self.booted

    # --- transitions -----------------------------------------------------------------------------

    def upgrade(
        self,
        *,
        version: str,
        kernel: Path,
        initramfs: Path,
        cmdline: str,
        force: bool,
        printf: Callable[[str], None],
    ) -> Transition:
        """Write ``version`` into the slot that is not good and put it on trial (the installer's upgrade mode)."""
        if self._upgrade_disk is None:
            from ichor.installer import upgrade_disk

            self._upgrade_disk = upgrade_disk
        with self._lock:
            try:
                transition = self._upgrade_disk(Path(self.disk), version=version, kernel=kernel,
                                                initramfs=initramfs, cmdline=cmdline, force=force, printf=printf)  # fmt: skip
            finally:
                self._refresh()
        return transition

    def _transition(self, change: Callable[[BootDir], Transition], *, drop_fallback: bool) -> Transition:
        with self._lock:
            with self._boot() as root:
                transition = change(BootDir(root))
            if drop_fallback:
                meta = self._meta()
                if meta.delete(MetaKey.Upgrade):
                    meta.flush()
            self._refresh()
        return transition

    def bless(self) -> Transition:
        """The booted trial slot is healthy: it becomes the last good one; META's fallback tag goes."""
        booted = self._require_booted()
        return self._transition(lambda boot: boot.bless(booted), drop_fallback=True)

    def rollback(self) -> Transition:
        """The slot other than the booted one becomes good (Talos's error text when it is empty)."""
        booted = self._require_booted()
        return self._transition(lambda boot: boot.rollback(booted), drop_fallback=True)

    def load_next_boot(self, load: Callable[[Path, Path, str], None]) -> Transition:
        """Talos's ``KexecPrepare``: ``load`` (kexec's) the kernel, initramfs and command line of the
        slot GRUB would boot next, then save GRUB's counting step for that boot (a trial uses a try),
        since GRUB will not run. Nothing is saved when the load fails (GRUB counts at the firmware
        reboot instead)."""
        with self._lock:
            with self._boot() as root:
                boot_dir = BootDir(root)
                slot, transition = boot_dir.next_boot()
                load(*boot_dir.entry(slot))
                boot_dir.save(transition)
            self._refresh()
        return transition

    def _require_booted(self) -> Slot:
        if self.booted is None:
            raise DiskError(
                f"the kernel command line names no boot slot ({SLOT_ARG}=A|B)",
                hint="boot the node from its installed disk (its GRUB entries carry the slot)",
            )
        return self.booted

    # --- META ------------------------------------------------------------------------------------

    def meta_write(self, key: int, value: bytes) -> None:
        """Set a META key and flush both copies; ``MetaError("meta write failed")`` when full."""
        with self._lock:
            meta = self._meta()
            meta.set(key, value)
            meta.flush()
            self._keys = meta.items()

    def meta_delete(self, key: int) -> bool:
        """Delete a META key; False when it was not there."""
        with self._lock:
            meta = self._meta()
            if not meta.delete(key):
                return False
            meta.flush()
            self._keys = meta.items()
            return True

    def meta_get(self, key: int) -> bytes | None:
        with self._lock:
            return self._meta().get(key)


def _boot_mount(device: str, parent: Path) -> Callable[[], AbstractContextManager[Path]]:
    from ichor.machinery.mounts import mounted

    @contextlib.contextmanager
    def boot() -> Iterator[Path]:
        with mounted(device, "xfs", parent=parent) as root:
            yield root

    return boot


def find_boot_disk(
    cmdline: str,
    *,
    sys_block: Path = Path("/sys/block"),
    mount_parent: Path = Path("/run/ichor"),
    say: Callable[[str], None] = lambda _: None,
) -> BootDisk | None:
    """The node's installed system disk (BOOT and META on a Talos layout), None when it has none."""
    found = find_system_disk(sys_block)
    if found is None:
        return None
    disk, table = found
    boot, meta = table.by_name(Label.BOOT), table.by_name(Label.META)
    if boot is None or meta is None:
        say(f"{disk} is a system disk without BOOT or META: upgrades and META are unavailable")
        return None
    return BootDisk(
        disk,
        booted=booted_slot(cmdline),
        boot=_boot_mount(partition_path(disk, boot.number), mount_parent),
        meta_path=Path(partition_path(disk, meta.number)),
    )
