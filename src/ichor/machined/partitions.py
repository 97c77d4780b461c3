"""A node's system partitions as a reset sees them: which labels it has, and wiping them.

The sequencer's reset and the API's checks ask a :class:`SystemPartitions` and never which
platform they run on; the composition root (:mod:`ichor.machined.node`) picks the implementation:

* :class:`DirectoryPartitions` (container and process nodes): STATE, EPHEMERAL and META are
  directories under the node's root (:data:`~ichor.machined.platform.PARTITIONS`); a wipe empties
  them (the console log survives an EPHEMERAL wipe, as a serial console would);
* :class:`DiskPartitions` (a node booted from its installed disk): the partitions of the system
  disk's GPT. A wipe unmounts what is mounted (STATE on ``/system/state``, EPHEMERAL on ``/var``;
  a mount still busy -- machined's own log files -- is shut down first, ``XFS_IOC_GOINGDOWN``, so
  nothing written later reaches the wiped device, then detached), then carries out Talos's
  ``ResetSystemDiskSpec`` (:func:`ichor.installer.reset_partitions`: STATE/EPHEMERAL/META zeroed,
  formatted again on their next mount; BOOT/EFI re-formatted) or, without labels, ``ResetSystemDisk``
  (FastWipe of the whole disk). Wiping STATE but not META deletes META's StateEncryptionConfig tag,
  as Talos 1.7 does.

:meth:`SystemPartitions.wipe` blocks (device I/O): the sequencer runs it in a worker thread.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import struct
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

from ichor.machined.platform import PARTITIONS, Layout
from ichor.machinery.blockdev import Label, fast_wipe, open_device, read_disk_table
from ichor.machinery.meta import MetaKey

__all__ = ["DirectoryPartitions", "DiskPartitions", "SystemPartitions"]

XFS_IOC_GOINGDOWN = 0x8004587D
"""``_IOR('X', 125, __u32)``: shut an xfs down; every later write fails instead of reaching the disk."""
XFS_FSOP_GOING_FLAGS_NOLOGFLUSH = 2
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


class SystemPartitions(Protocol):
    """What a reset needs to know about, and do to, a node's system partitions."""

    system_disk: str | None
    """The device the node booted from (user disks may not be it); None without one."""

    def labels(self) -> Collection[str]:
        """The system partition labels this node has (what ``--system-labels-to-wipe`` may name)."""
        ...

    def wipe(self, labels: Sequence[str] | None, say: Callable[[str], None]) -> None:
        """Wipe ``labels`` (None: the whole system disk, Talos's ``ResetSystemDisk``); blocking."""
        ...

    def wipe_disks(self, devices: Sequence[str], say: Callable[[str], None]) -> None:
        """FastWipe the user disks ``devices`` (``--user-disks-to-wipe``, checked by the API); blocking."""
        ...


class DirectoryPartitions:
    """System partitions as directories under the node's root (container and process nodes)."""

    system_disk: str | None = None

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def labels(self) -> Collection[str]:
        return tuple(PARTITIONS)

    def wipe(self, labels: Sequence[str] | None, say: Callable[[str], None]) -> None:
        layout = self.layout
        for label in labels if labels is not None else tuple(PARTITIONS):
            target = layout.partition(label)
            for child in target.iterdir() if target.exists() else ():
                if child == layout.console_log.parent and label == Label.EPHEMERAL:
                    continue  # keep the console log readable across a reset, as a serial console is
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
            say(f"wiped {label}")

    def wipe_disks(self, devices: Sequence[str], say: Callable[[str], None]) -> None:
        if devices:  # the API refuses them first: such a node lists no disks
            raise OSError(errno.ENODEV, f"this node has no disks of its own: {', '.join(devices)}")


class DiskPartitions:
    """The system disk's partitions (a node booted from its installed disk)."""

    def __init__(
        self,
        disk: str,
        layout: Layout,
        *,
        delete_meta_key: Callable[[int], object] | None = None,
        mountpoints: dict[str, Path] | None = None,
    ) -> None:
        self.system_disk: str | None = disk
        self.disk = disk
        self._mountpoints = mountpoints if mountpoints is not None else {
            label: layout.partition(label) for label in (Label.STATE, Label.EPHEMERAL)
        }  # fmt: skip
        self._delete_meta_key = delete_meta_key

    def labels(self) -> Collection[str]:
        table = read_disk_table(self.disk)
        return tuple(table.names()) if table is not None else ()

    def wipe_disks(self, devices: Sequence[str], say: Callable[[str], None]) -> None:
        for device in devices:
            with open_device(device, write=True) as fd:
                fast_wipe(fd)
            say(f"wiped user disk {device}")

    def wipe(self, labels: Sequence[str] | None, say: Callable[[str], None]) -> None:
        from ichor.installer import reset_partitions

        for label, mountpoint in self._mountpoints.items():
            if labels is None or label in labels:
                _unmount(mountpoint, say)
        if labels is None:
            with open_device(self.disk, write=True) as fd:
                fast_wipe(fd)
            say(f"wiped the system disk {self.disk}")
            return
        reset_partitions(Path(self.disk), labels, printf=say)
        if Label.STATE in labels and Label.META not in labels and self._delete_meta_key is not None:
            self._delete_meta_key(MetaKey.StateEncryptionConfig)


def _unmount(mountpoint: Path, say: Callable[[str], None]) -> None:
    """Unmount ``mountpoint``; when busy, shut its xfs down (nothing more reaches the device) and detach it."""
    path = os.fsencode(mountpoint)
    if _libc.umount2(path, 0) == 0:
        say(f"unmounted {mountpoint}")
        return
    err = ctypes.get_errno()
    if err == errno.EINVAL:  # not a mount point
        return
    if err != errno.EBUSY:
        raise OSError(err, f"unmounting {mountpoint}: {os.strerror(err)}")
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, XFS_IOC_GOINGDOWN, struct.pack("I", XFS_FSOP_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)
    if _libc.umount2(path, MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"detaching {mountpoint}: {os.strerror(err)}")
    say(f"shut down and detached {mountpoint} (still in use)")
