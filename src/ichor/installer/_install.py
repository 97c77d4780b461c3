"""The installer's disk step: Talos 1.7's layout on a disk or image file, BOOT with a slot, GRUB files, META."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ichor.installer._bios import install_bios_boot
from ichor.installer._filesystems import Target, make_boot_xfs, make_efi_vfat
from ichor.machinery.blockdev import (
    FileSystem,
    Label,
    PartitionTable,
    device_size,
    fast_wipe,
    is_block_device,
    open_device,
    partition_path,
    plan,
    sector_size,
    sync_partitions,
    talos_layout,
    write_table,
    zero_range,
)
from ichor.machinery.bootloader import BootState, MenuEntry, Slot, create_env, installed, render_grub_cfg
from ichor.machinery.errors import InstallError, MachineryError
from ichor.machinery.meta import Meta

__all__ = ["InstallResult", "InstallSpec", "install"]

KERNEL_ASSET = "vmlinuz"
INITRAMFS_ASSET = "initramfs.xz"


@dataclass(frozen=True)
class InstallSpec:
    """What to install where. ``disk`` is a block device (as root) or an image file of the disk's size.

    ``efi_files``/``boot_files`` map a path on EFI/BOOT to a host file (GRUB's EFI image, module
    directories); ``bios_core``/``bios_boot`` are GRUB's i386-pc ``core.img`` and ``boot.img``
    written into the BIOS partition and the MBR. ``meta`` keys are
    written to META. GUIDs, the xfs UUID and the vfat volume id are random unless given.
    """

    disk: Path
    kernel: Path
    initramfs: Path
    version: str
    cmdline: str
    slot: Slot = Slot.A
    legacy_bios: bool = False
    """Talos's ``machine.install.legacyBIOSSupport``: mark the protective MBR's entry bootable (some
    BIOSes boot nothing else). GRUB for BIOS is set up whenever ``bios_core`` is given, as Talos does."""
    meta: Mapping[int, bytes] = field(default_factory=dict)
    efi_files: Mapping[str, Path] = field(default_factory=dict)
    boot_files: Mapping[str, Path] = field(default_factory=dict)
    bios_core: Path | None = None
    bios_boot: Path | None = None
    disk_guid: uuid.UUID | None = None
    boot_uuid: str | None = None
    efi_volume_id: str | None = None
    source_date_epoch: int | None = None
    """With ``disk_guid``, ``boot_uuid`` and ``efi_volume_id``: the same image bytes every time
    (partition GUIDs derived from the disk GUID, file times pinned)."""


@dataclass(frozen=True)
class InstallResult:
    table: PartitionTable
    boot_state: BootState
    grub_cfg: str


def _target(spec: InstallSpec, table: PartitionTable, label: str, block: bool) -> Target:
    part = table.by_name(label)
    if part is None:
        raise InstallError(f"the layout has no {label} partition")
    ss = table.sector_size
    if block:
        return Target(Path(partition_path(spec.disk, part.number)), 0, part.size(ss), True)
    return Target(spec.disk, part.offset(ss), part.size(ss), False)


def install(spec: InstallSpec, *, printf: Callable[[str], None] = print) -> InstallResult:
    """Partition, format and fill ``spec.disk`` as Talos 1.7's installer does in install mode.

    Everything on the disk is lost. STATE and EPHEMERAL are left zeroed (machined formats them on
    first mount); BIOS and META are zeroed, then META gets ``spec.meta``. Raises
    :class:`~ichor.machinery.errors.InstallError` (or the machinery error of the step that failed).
    """
    for source in (spec.kernel, spec.initramfs):
        if not Path(source).is_file():
            raise InstallError(f"{source} does not exist or is not a file")
    try:
        return _install(spec, printf)
    except InstallError:
        raise
    except MachineryError as e:
        raise InstallError(f"installing to {spec.disk} failed: {e}", hint=e.hint) from e
    except OSError as e:
        raise InstallError(
            f"installing to {spec.disk} failed: {e.filename or spec.disk}: {e.strerror}"
        ) from e


def _install(spec: InstallSpec, printf: Callable[[str], None]) -> InstallResult:
    with open_device(spec.disk, write=True) as fd:
        size, ss, block = device_size(fd), sector_size(fd), is_block_device(fd)
        layout = talos_layout()
        # A given disk GUID makes the partitions' GUIDs too (reproducible images).
        guids = [uuid.uuid5(spec.disk_guid, s.label) for s in layout] if spec.disk_guid else None
        table = plan(
            size,
            layout,
            sector_size=ss,
            mbr_bootable=spec.legacy_bios,
            disk_guid=spec.disk_guid,
            partition_guids=guids,
        )
        printf(f"partitioning {spec.disk}: {', '.join(p.name for p in table.partitions)}")
        fast_wipe(fd)
        write_table(fd, table)
        sync_partitions(fd, table)
        specs = {s.label: s for s in talos_layout()}
        for part in table.partitions:
            if specs[part.name].filesystem == FileSystem.NONE:
                how = zero_range(fd, part.offset(ss), part.size(ss))
                printf(f"zeroed {part.name} ({part.size(ss) // 1024} KiB, {how})")
        if spec.bios_core is not None:  # Talos installs GRUB for i386-pc always; the flag only marks the MBR
            install_bios_boot(fd, table, spec.bios_core, spec.bios_boot)
            printf("wrote GRUB's boot.img to the MBR and core.img to BIOS")

    state = installed(spec.version, spec.slot)
    entries = {spec.slot: MenuEntry(spec.version, spec.cmdline)}
    grub_cfg = render_grub_cfg(entries, spec.slot)
    with tempfile.TemporaryDirectory(prefix="ichor-install-") as tmp:
        cfg, env = Path(tmp) / "grub.cfg", Path(tmp) / "grubenv"
        cfg.write_text(grub_cfg)
        create_env(env, state.to_env())
        boot_files = {
            **spec.boot_files,
            f"{spec.slot}/{KERNEL_ASSET}": spec.kernel,
            f"{spec.slot}/{INITRAMFS_ASSET}": spec.initramfs,
            "grub/grub.cfg": cfg,
            "grub/grubenv": env,
        }
        make_boot_xfs(
            _target(spec, table, Label.BOOT, block),
            boot_files,
            uuid=spec.boot_uuid,
            source_date_epoch=spec.source_date_epoch,
        )
        printf(f"formatted BOOT (xfs) with slot {spec.slot}: {spec.version}")
    make_efi_vfat(
        _target(spec, table, Label.EFI, block),
        spec.efi_files,
        volume_id=spec.efi_volume_id,
        source_date_epoch=spec.source_date_epoch,
    )
    printf("formatted EFI (vfat)")
    meta_target = _target(spec, table, Label.META, block)
    meta = Meta(meta_target.path, printer=printf, offset=meta_target.offset, size=meta_target.size)
    meta.reload()
    for tag, value in spec.meta.items():
        meta.set(tag, value)
    meta.flush()
    return InstallResult(table, state, grub_cfg)
