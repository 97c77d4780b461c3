"""Installing to disk, as Talos's install sequence does on a machine with disks of its own (metal).

* :meth:`DiskInstallation.plan`: which disk ``machine.install`` means and why (Talos's errors:
  ``specified install disk does not exist: "/dev/sda"`` with the disks the node has, a selector
  matching none or several), and the wipe guard (a disk holding partitions only with
  ``machine.install.wipe: true`` or when it is the disk the node boots from). Maintenance mode's
  ``apply-config`` runs it before replying, so these are the reply's errors, and ``--dry-run``
  prints the plan. ``machine.install.extensions`` is refused there, naming the key
  (:func:`~ichor.machinery.installdisk.refuse_install_extensions`).
* :meth:`DiskInstallation.install`: the installer's disk step (:func:`ichor.installer.install`:
  Talos 1.7's partitions, BOOT with slot ``A``, GRUB for UEFI and BIOS, META) from the running
  image's own files (``/usr/install/amd64``, kept by stage 1: ``imager/_initramfs.py``), then
  STATE formatted and given ``config.yaml``. Blocking: the sequencer runs it in a worker thread.
* :func:`mount_system_partitions`: at boot, before machined starts, STATE on ``/system/state`` and
  EPHEMERAL on ``/var``, each formatted on first mount as Talos does.

Errors are :class:`~ichor.machinery.errors.InstallError`; nothing here reboots.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ichor.imager._initramfs import ASSETS as INITRAMFS_ASSETS
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.metal import COLDPLUG_DONE
from ichor.machinery import TALOS_VERSION
from ichor.machinery.blockdev import (
    Disk,
    Label,
    PartitionTable,
    find_system_disk,
    list_disks,
    partition_path,
    read_disk_table,
)
from ichor.machinery.config import Config
from ichor.machinery.errors import InstallError, MachineryError, MetaError
from ichor.machinery.installdisk import (
    InstallTarget,
    check_wipe,
    refuse_install_extensions,
    select_install_disk,
)
from ichor.machinery.kernelargs import installer_cmdline
from ichor.machinery.meta import VALUES_ENV, decode_values

__all__ = [
    "ASSETS",
    "DiskInstallation",
    "InstallPlan",
    "mount_system_partitions",
    "system_disk_of",
]

ASSETS = Path("/") / INITRAMFS_ASSETS
"""Where stage 1 keeps the image's own kernel, GRUB images and initramfs files."""

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: Path, fstype: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if _libc.mount(source.encode(), os.fsencode(target), fstype.encode(), 0, None) != 0:
        err = ctypes.get_errno()
        raise InstallError(f"mounting {source} on {target}: {os.strerror(err)}")


def _umount(target: Path) -> None:
    if _libc.umount2(os.fsencode(target), 0) != 0:
        err = ctypes.get_errno()
        raise InstallError(f"unmounting {target}: {os.strerror(err)}")


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


@dataclass(frozen=True)
class InstallPlan:
    """What an install would do: the disk, why it, and what it holds now."""

    target: InstallTarget
    existing: tuple[str, ...]
    """The partition names the disk holds now (erased by the install)."""
    erase_because: str
    cmdline: str
    legacy_bios: bool
    meta: tuple[tuple[int, bytes], ...] = ()
    """META values to write (``INSTALLER_META_BASE64`` in the node's environment), key order."""

    @property
    def device(self) -> str:
        return self.target.disk.device_name

    def summary(self) -> str:
        disk = self.target.disk
        held = (
            f"it holds partitions {', '.join(self.existing)}: erased ({self.erase_because})"
            if self.existing
            else "it holds no partitions"
        )
        return (
            f"install disk: {disk.device_name} ({_size(disk.size)}, model {disk.model or '-'}, "
            f"serial {disk.serial or '-'})\n"
            f"why: {self.target.reason}\n{held}\n"
            f"legacy BIOS support: {'yes' if self.legacy_bios else 'no'}\n"
            f"kernel arguments: {self.cmdline}"
            + (
                f"\nMETA values: {', '.join(f'0x{k:x} ({len(v)} bytes)' for k, v in self.meta)}"
                if self.meta
                else ""
            )
        )


def system_disk_of(
    mounts: Path, state_dir: Path, sys_class_block: Path = Path("/sys/class/block")
) -> str | None:
    """The disk whose partition is mounted on ``state_dir`` (the disk the node booted from), if any."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return None
    source = next(
        (f[0] for f in (line.split() for line in lines) if len(f) > 1 and f[1] == str(state_dir)), None
    )
    if source is None or not source.startswith("/dev/"):
        return None
    part = sys_class_block / os.path.basename(source)
    parent = Path(os.path.realpath(part)).parent
    return f"/dev/{parent.name}" if (parent / "dev").exists() and parent.name != "block" else None


class DiskInstallation:
    """Install to disk on a node that has disks of its own; see the module docstring."""

    def __init__(
        self,
        *,
        sys_block: Path,
        state_dir: Path,
        disks: Callable[[], Sequence[Disk]] | None = None,
        assets: Path = ASSETS,
        mounts: Path = Path("/proc/self/mounts"),
        work_dir: Path | None = None,
        version: str = TALOS_VERSION,
        sys_class_block: Path = Path("/sys/class/block"),
        cmdline: Path = Path("/proc/cmdline"),
    ) -> None:
        self.sys_block = sys_block
        self.disks = disks or (lambda: list_disks(sys_block))
        """The node's disks (``/sys/block``; tests give image files or loop devices)."""
        self.state_dir = state_dir
        self.assets = assets
        self.mounts = mounts
        self.work_dir = work_dir
        self.version = version
        self.sys_class_block = sys_class_block
        self.cmdline = cmdline

    def booted_from(self) -> str | None:
        return system_disk_of(self.mounts, self.state_dir, self.sys_class_block)

    def installed(self) -> bool:
        """The node runs from an installed disk (STATE is mounted): the config only needs saving."""
        return self.booted_from() is not None

    def plan(self, config: Config) -> InstallPlan:
        """The install ``config`` asks for on this node's disks; InstallError says why not."""
        machine = config.machine
        install = machine.install if machine is not None else None
        if install is None:
            raise InstallError('install instructions are required in "metal" mode')
        refuse_install_extensions((e.image for e in install.extensions or []), step="install")
        target = select_install_disk(install.disk, install.disk_selector, self.disks())
        table: PartitionTable | None
        try:
            table = read_disk_table(target.disk.device_name)
        except (MachineryError, OSError) as err:
            raise InstallError(f"cannot read {target.disk.device_name}'s partition table: {err}") from err
        booted = self.booted_from()
        check_wipe(target.disk, table, wipe=bool(install.wipe), booted_from=booted)
        existing = tuple(table.names()) if table is not None else ()
        why = "machine.install.wipe is true" if install.wipe else "it is the disk this node boots from"
        cmdline = installer_cmdline(extra_args=[str(a) for a in install.extra_kernel_args or []])
        meta = self._meta_values(machine.env if machine is not None else None)
        return InstallPlan(target, existing, why, str(cmdline), bool(install.legacy_bios_support), meta)

    def _meta_values(self, machine_env: Mapping[str, str] | None) -> tuple[tuple[int, bytes], ...]:
        """``INSTALLER_META_BASE64`` from the node's environment, as Talos hands its installer:
        ``talos.environment`` kernel arguments, then ``machine.env`` (which wins)."""
        try:
            env = KernelArgs.from_cmdline(self.cmdline.read_text()).environment
        except OSError:
            env = {}
        env.update({str(k): str(v) for k, v in (machine_env or {}).items()})
        encoded = env.get(VALUES_ENV)
        if not encoded:
            return ()
        try:
            values = decode_values(encoded)
        except MetaError as err:
            raise InstallError(
                f"{VALUES_ENV} in the node's environment: {err}",
                hint="fix the talos.environment kernel argument (the image's --meta) or machine.env",
            ) from None
        return tuple(sorted({v.key: v.value.encode() for v in values}.items()))

    def install(self, plan: InstallPlan, config_text: str, printf: Callable[[str], None]) -> None:
        """Install ``plan`` and save ``config_text`` to the new STATE (blocking; minutes on a VM)."""
        from ichor.imager._cpio import write_newc
        from ichor.imager._initramfs import entries, kept_files
        from ichor.installer import InstallSpec, format_if_blank, install

        try:
            files = kept_files(self.assets)
        except FileNotFoundError as err:
            raise InstallError(
                f"this image carries no install assets: {err.filename} is missing",
                hint="boot an image built by `python -m ichor.imager initramfs` (its usr/install/amd64)",
            ) from None
        grub = dict(files.grub or {})
        assert files.kernel is not None
        with tempfile.TemporaryDirectory(prefix="ichor-install-", dir=self.work_dir) as tmp:
            initramfs = Path(tmp) / "initramfs.xz"
            printf(f"writing the initramfs from the running image ({self.assets})")
            with initramfs.open("wb") as out:
                write_newc(out, entries(files))
            install(
                InstallSpec(
                    disk=Path(plan.device),
                    kernel=files.kernel,
                    initramfs=initramfs,
                    version=self.version,
                    cmdline=plan.cmdline,
                    legacy_bios=plan.legacy_bios,
                    efi_files={"EFI/BOOT/BOOTX64.EFI": grub["BOOTX64.EFI"]} if "BOOTX64.EFI" in grub else {},
                    bios_core=grub.get("core.img"),
                    bios_boot=grub.get("boot.img"),
                    meta=dict(plan.meta),
                ),
                printf=printf,
            )
            table = read_disk_table(plan.device)
            state = table.by_name(Label.STATE) if table is not None else None
            if state is None:
                raise InstallError(f"{plan.device} has no STATE partition after the install")
            device = partition_path(plan.device, state.number)
            if format_if_blank(Path(device), Label.STATE):
                printf(f"formatted STATE ({device}) as xfs")
            mountpoint = Path(tmp) / "state"
            _mount(device, mountpoint, "xfs")
            try:
                config = mountpoint / "config.yaml"
                fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.write(fd, config_text.encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                printf(f"saved the machine config to STATE ({device}:/config.yaml)")
            finally:
                _umount(mountpoint)


def mount_system_partitions(
    say: Callable[[str], None],
    *,
    sys_block: Path = Path("/sys/block"),
    coldplug_done: Path = Path(COLDPLUG_DONE),
    wait_s: float = 120.0,
) -> str | None:
    """Mount an installed disk's STATE on ``/system/state`` and EPHEMERAL on ``/var`` (metal boot).

    Waits for PID 1's coldplug (the disks' drivers) first. Each partition is formatted (xfs) on its
    first mount, as Talos does. Returns the system disk, or None when the node has none (not
    installed: maintenance mode or a ``talos.config`` install). Failures are said and skipped."""
    deadline = time.monotonic() + wait_s
    while not coldplug_done.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    from ichor.installer import format_if_blank

    found = find_system_disk(sys_block)
    if found is None:
        return None
    disk, table = found
    for label, target in ((Label.STATE, Path("/system/state")), (Label.EPHEMERAL, Path("/var"))):
        part = table.by_name(label)
        if part is None:
            say(f"{disk} has no {label} partition")
            continue
        device = partition_path(disk, part.number)
        try:
            if format_if_blank(Path(device), label):
                say(f"formatted {label} ({device}) as xfs")
            _mount(device, target, "xfs")
            say(f"mounted {label} ({device}) on {target}")
        except (MachineryError, OSError) as err:
            say(f"cannot mount {label} ({device}) on {target}: {err}")
    return disk
