"""Which disk machine.install means (Talos's texts), selectors that must match one disk, and the wipe guard."""

from __future__ import annotations

import uuid

import pytest

from ichor.machinery.blockdev import Disk, DiskType, plan, talos_layout
from ichor.machinery.config._models import InstallDiskSelector as ConfigSelector
from ichor.machinery.errors import InstallError
from ichor.machinery.installdisk import (
    DiskSelector,
    check_wipe,
    glob_match,
    parse_size_condition,
    select_install_disk,
)

GB = 10**9
DISKS = [
    Disk(
        "/dev/vda",
        6 * 2**30,
        model="QEMU HARDDISK",
        serial="ichor-0",
        type=DiskType.HDD,
        bus_path="/pci0000:00/0000:00:04.0/virtio2/",
    ),
    Disk("/dev/vdb", 1 * 2**30, model="QEMU HARDDISK", serial="ichor-1", type=DiskType.HDD),
    Disk("/dev/nvme0n1", 512 * GB, model="Samsung SSD 980", type=DiskType.NVME, wwid="eui.0025"),
]


def test_disk_by_name_as_talos() -> None:
    assert select_install_disk("/dev/vda", None, DISKS).disk.device_name == "/dev/vda"
    with pytest.raises(InstallError) as missing:
        select_install_disk("/dev/sda", None, DISKS)
    assert str(missing.value) == 'specified install disk does not exist: "/dev/sda"'
    assert (
        missing.value.hint is not None
        and "/dev/vda (6442450944 bytes, model QEMU HARDDISK, serial ichor-0, hdd)" in missing.value.hint
    )
    with pytest.raises(InstallError, match="either install disk or diskSelector should be defined"):
        select_install_disk(None, DiskSelector(), DISKS)


def test_selectors() -> None:
    chosen = select_install_disk(None, DiskSelector(size=">= 4GB", model="QEMU*"), DISKS)
    assert chosen.disk.device_name == "/dev/vda"
    assert (
        chosen.reason == "machine.install.diskSelector (size: '>= 4GB', model: 'QEMU*') matches only /dev/vda"
    )
    assert select_install_disk(None, DiskSelector(type="nvme"), DISKS).disk.device_name == "/dev/nvme0n1"
    assert select_install_disk(None, DiskSelector(wwid="eui.*"), DISKS).disk.wwid == "eui.0025"
    config = ConfigSelector.model_validate({"serial": "ichor-1"})
    assert select_install_disk("/dev/vda", config, DISKS).disk.device_name == "/dev/vdb"  # the selector wins
    with pytest.raises(InstallError, match=r"^no disk found matching provided parameters$"):
        select_install_disk(None, DiskSelector(size="< 1GB"), DISKS)
    with pytest.raises(InstallError, match=r"^diskSelector matches 2 disks: /dev/vda, /dev/vdb$"):
        select_install_disk(None, DiskSelector(model="QEMU*"), DISKS)


def test_size_conditions_and_globs() -> None:
    assert parse_size_condition(">= 4GB") == (">=", 4 * GB)
    assert parse_size_condition("512GiB") == ("", 512 * 2**30)
    assert parse_size_condition("<1.5 TB") == ("<", 1_500_000_000_000)
    with pytest.raises(InstallError, match="failed to parse disk size 4 parsecs"):
        parse_size_condition(">= 4 parsecs")
    assert (
        glob_match("QEMU*", "QEMU HARDDISK") and glob_match("*DISK", "QEMU HARDDISK") and glob_match("*", "")
    )
    assert glob_match("Q*U*K", "QEMU HARDDISK") and not glob_match("QEMU", "QEMU HARDDISK")
    assert not glob_match("a*a", "a") and glob_match("a*a", "aa")


def test_wipe_guard() -> None:
    vdb = DISKS[1]
    used = plan(vdb.size, talos_layout()[:2], disk_guid=uuid.uuid4())
    with pytest.raises(InstallError, match="refusing to install to /dev/vdb: it holds partitions EFI, BIOS"):
        check_wipe(vdb, used, wipe=False, booted_from="/dev/vda")
    check_wipe(vdb, used, wipe=True, booted_from=None)
    check_wipe(vdb, used, wipe=False, booted_from="/dev/vdb")
    check_wipe(vdb, None, wipe=False, booted_from=None)
