"""The imager's ``metal`` output boots under QEMU (TCG) and UEFI (OVMF) from its own disk.

Builds ``metal-amd64.raw`` with ``python -m ichor.imager metal --out-format raw`` (cached layers: a
warm build takes seconds), with ``--extra-kernel-arg console=ttyS0`` (the serial console only, so
the test reads everything) and a static ``ip=``, then boots it as the VM's virtio disk with no config
on a tap device bridged in a network namespace the test makes (nothing reaches the host's network).
What a user sees is checked: OVMF running GRUB from the EFI partition, BOOT's grub.cfg starting slot
A (``BOOT_IMAGE=/A/vmlinuz``, ``ichor.slot=A``), machined as PID 1 printing the exact
``apply-config --insecure`` command, and the maintenance API answering ``disks --insecure`` with
``/dev/vda``. The ISO's boots (UEFI and BIOS) are test_e2e_metal_install.py's first boots, and a
disk booted by SeaBIOS its second.

Time budget, measured on 2 cores at load 3-5 (QEMU TCG, 1 vCPU, one VM at a time): the metal disk
under OVMF 66-101 s (maintenance at 65-99 s after QEMU starts). It allows 120 s to the kernel and
300 s to maintenance mode (a loaded host slows TCG 3-5x). QEMU is stopped by its PID and the
namespace removed afterwards, on failure too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vm_helpers import build_output, talosctl_in, vm_netns, vm_skip_reason

from ichor.imager.vm import SerialLog, VMSpec, qemu_command, uefi_vars_copy
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

NODE_IP = "10.77.0.2"
GATEWAY = "10.77.0.1"
IP_ARG = f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off"


@pytest.fixture(scope="module")
def metal_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = vm_skip_reason()
    if reason:
        pytest.skip(reason)
    return build_output(
        tmp_path_factory.mktemp("image"), "metal", "metal-amd64.raw", "--out-format", "raw",
        "--extra-kernel-arg", "console=ttyS0", "--extra-kernel-arg", IP_ARG,
    )  # fmt: skip


@pytest.fixture
def netns() -> Iterator[str]:
    with vm_netns("ichor-iso", GATEWAY) as name:
        yield name


def _boot_to_maintenance(spec: VMSpec, netns: str, tmp_path: Path) -> str:
    """Boot ``spec``, wait for maintenance mode, check ``disks --insecure``; the serial console's text."""
    started = time.monotonic()
    vm = proc.start(
        ["ip", "netns", "exec", netns, "nice", "-n", "10", *qemu_command(spec)], output=tmp_path / "qemu.log"
    )
    log = SerialLog(spec.serial, started)
    try:
        alive = lambda: vm.poll() is None  # noqa: E731
        kernel = log.wait_for(r"Command line: .*talos\.platform=metal", 120, alive=alive)
        stage1 = log.wait_for("ichor-stage1: switching root", 120, alive=alive)
        maintenance = log.wait_for(
            rf"talosctl apply-config --insecure --nodes {NODE_IP} --file", 300, alive=alive
        )
        print(f"kernel {kernel:.1f} s, switch_root {stage1:.1f} s, maintenance {maintenance:.1f} s")
        disks = talosctl_in(netns, tmp_path, "disks", "--insecure", "-n", NODE_IP)
        assert disks.exit_code == 0, disks.stdout + disks.stderr
        assert "/dev/vda" in disks.stdout, disks.stdout
        return log.text()
    finally:
        vm.stop(timeout=5)
        print(log.text()[-3000:])
        print("qemu:", (tmp_path / "qemu.log").read_text(errors="replace")[-2000:])


def test_the_metal_image_boots_from_disk(metal_raw: Path, netns: str, tmp_path: Path) -> None:
    """OVMF runs EFI/BOOT/BOOTX64.EFI from the EFI partition, which reads BOOT's grub.cfg and boots
    slot A. (Legacy BIOS's boot.img + core.img from the BIOS partition is booted by
    test_e2e_metal_install.py's second boot, from the disk the node installed.) Budget 300 s."""
    disk = tmp_path / "metal.raw"
    proc.run(["cp", "--sparse=always", str(metal_raw), str(disk)])  # the VM may write to its disk
    spec = VMSpec(
        kernel=None, initrd=None, cmdline="", serial=tmp_path / "serial.log", disk=disk, tap="tap0",
        uefi_vars=uefi_vars_copy(tmp_path / "vars.fd"),
    )  # fmt: skip
    console = _boot_to_maintenance(spec, netns, tmp_path)
    command_line = console.split("Command line:")[1].splitlines()[0]
    assert "BOOT_IMAGE=/A/vmlinuz" in command_line and "ichor.slot=A" in command_line
