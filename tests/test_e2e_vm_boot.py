"""V1, boot smoke: the imager's kernel + initramfs boot under QEMU (TCG) into maintenance mode.

Builds ``kernel`` and ``initramfs`` with ``python -m ichor.imager`` (cached layers: a warm build
takes seconds, a cold one minutes), boots them with no config on a tap device bridged in a network
namespace the test creates (so nothing reaches the host's network and no route is needed outside
it), with a static ``ip=`` kernel argument and a 1 GiB virtio disk, and checks what a user sees:
stage 1 switching root, machined as PID 1 printing the exact ``apply-config --insecure`` command,
``talosctl disks --insecure`` listing ``/dev/vda`` and ``get links --insecure`` listing ``eth0``.

Time budget, measured on 2 cores (QEMU TCG, 1 vCPU, load ~1): switch_root 10 s, PID 1's first line
13 s, maintenance-mode console line 41 s after QEMU starts (``benchmarks/boot.py``: API answering
``disks`` at 48 s, the busybox floor at 8.8 s); the whole test took 51 s with a cached image. It
allows 240 s for maintenance mode (the imports are CPU-bound and a loaded host slows TCG 3-5x). Everything is removed afterwards, on failure too: QEMU by PID, then the
namespace (its bridge and tap go with it).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vm_helpers import talosctl_in, vm_netns

from ichor.imager.vm import SerialLog, VMSpec, qemu_command
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

NODE_IP = "10.77.0.2"
GATEWAY = "10.77.0.1"


def _skip_reasons() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespace, bridge, tap)"
    for tool in ("qemu-system-x86_64", "mksquashfs", "ip", "apt-get", "dpkg-deb", "depmod"):
        if shutil.which(tool) is None:
            return f"needs {tool} (scripts/os-packages.txt)"
    return None


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = _skip_reasons()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("image")
    for profile in ("kernel", "initramfs"):
        built = proc.run([sys.executable, "-m", "ichor.imager", profile, "--output", str(out)], timeout=1200)
        assert built.stdout.strip().endswith(
            str(out / ("vmlinuz-amd64" if profile == "kernel" else "initramfs-amd64.xz"))
        )
    return out / "vmlinuz-amd64", out / "initramfs-amd64.xz"


@pytest.fixture
def netns() -> Iterator[str]:
    with vm_netns("ichor-vm", GATEWAY) as name:
        yield name


_talosctl = talosctl_in


def test_the_image_boots_into_maintenance_mode_on_metal(
    image: tuple[Path, Path], netns: str, tmp_path: Path
) -> None:
    kernel, initrd = image
    disk = tmp_path / "disk0.raw"
    with disk.open("wb") as f:
        f.truncate(1 << 30)
    serial = tmp_path / "serial.log"
    spec = VMSpec(
        kernel=kernel, initrd=initrd, serial=serial, disk=disk, tap="tap0",
        cmdline=f"console=ttyS0 talos.platform=metal printk.devkmsg=on panic=-1 talos.bogus=1 "
        f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off",
    )  # fmt: skip
    started = time.monotonic()
    vm = proc.start(
        ["ip", "netns", "exec", netns, "nice", "-n", "10", *qemu_command(spec)], output=tmp_path / "qemu.log"
    )
    log = SerialLog(serial, started)
    try:
        alive = lambda: vm.poll() is None  # noqa: E731
        stage1 = log.wait_for("ichor-stage1: switching root", 120, alive=alive)
        pid1 = log.wait_for("ichor-metal: PID 1 up", 60, alive=alive)
        maintenance = log.wait_for(
            rf"talosctl apply-config --insecure --nodes {NODE_IP} --file", 240, alive=alive
        )
        print(f"switch_root {stage1:.1f} s, PID 1 {pid1:.1f} s, maintenance {maintenance:.1f} s")
        console = log.text()
        assert "unknown kernel argument talos.bogus=1 ignored" in console
        assert "coldplug:" in console and "virtio_net" in console
        disks = _talosctl(netns, tmp_path, "disks", "--insecure", "-n", NODE_IP)
        assert disks.exit_code == 0, disks.stdout + disks.stderr
        assert "/dev/vda" in disks.stdout and "ichor-disk0" in disks.stdout and "1.1 GB" in disks.stdout
        links = _talosctl(netns, tmp_path, "get", "links", "--insecure", "-n", NODE_IP)
        assert links.exit_code == 0, links.stdout + links.stderr
        assert "eth0" in links.stdout and "lo" in links.stdout
    finally:
        vm.stop(timeout=5)
        print(log.text()[-4000:])
        print("qemu:", (tmp_path / "qemu.log").read_text(errors="replace")[-2000:])
