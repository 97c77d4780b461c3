"""An image built with system extensions and a rootfs overlay boots under QEMU, and both are in it.

Three extensions: one carries a real kernel module the base layer lacks (Debian's ``pcspkr.ko``,
repacked from the pinned kernel as an extension would carry an out-of-tree one), one a firmware
file, one a file under ``/usr/local`` (nine layers: more loop devices than the kernel makes up
front); the overlay adds ``/etc/modprobe.d/ichor-test.conf`` blacklisting ``sr_mod``. Built
with ``python -m ichor.imager kernel|initramfs --system-extension-image DIR --rootfs-overlay DIR``
and booted directly (``-kernel``/``-initrd``, no config) on a tap bridged in a network namespace of
the test's own. What a user sees is checked:

- coldplug loads ``pcspkr`` for the machine's PC speaker: the module was found through the merged
  index (the ``modules.dep`` layer: depmod over the kernel's and the extension's modules) and
  loaded from the extension's layer;
- the kernel finds QEMU's CD-ROM, but coldplug leaves ``sr_mod`` out: the overlay's file is in
  ``/etc`` and modprobe honours it;
- ``talosctl get extensions --insecure`` lists the extension (name, version, author) and Talos's
  ``modules.dep`` entry, from the image's ``/etc/extensions.yaml``;
- a fourth extension ships an extension service (busybox ``httpd`` as ``ext-ichor-web``; the image
  then carries containerd and runc, ``layers/25-containerd.sqsh``): with no config applied, in
  maintenance mode, ``get services --insecure`` shows it running with the system containerd and
  its page answers on the node's address, as Talos 1.6+ starts extension services early.

Time budget (2 cores, QEMU TCG, 1 vCPU, one VM at a time): the build with warm base layers 20-60 s
(the ichor layer follows the source; the extension, index and overlay layers take 2-5 s; the
containerd layer once, then cached); the boot to maintenance mode 60-100 s at load 3-5; the
extension service check allows 180 s after maintenance mode (containerd and the service start
while the boot goes on). Measured 2026-11-27 (the build cached, load 3-5): maintenance mode at
54 s, containerd started at 48 s and healthy at 63 s (its first health check, a cold 23 MB ctr,
took over 5 s under TCG), ext-ichor-web's task running at 74 s: the check costs ~20-30 s. Measured at load 2-3: build 57 s (the ichor layer
rebuilt), switch_root at 15 s, maintenance at 70 s, the test 133 s in all. It allows 120 s to switch_root, 300 s to maintenance
mode. QEMU is stopped by its PID and the namespace removed afterwards, on failure too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vm_helpers import build_output, talosctl_in, vm_netns, vm_skip_reason

from ichor.imager import _build, _cmdline
from ichor.imager.vm import SerialLog, VMSpec, qemu_command
from ichor.images import busybox_rootfs
from ichor.machinery import proc

pytestmark = [pytest.mark.e2e, pytest.mark.vm, pytest.mark.root, pytest.mark.slow]

NODE_IP = "10.78.0.2"
GATEWAY = "10.78.0.1"
IP_ARG = f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off"
MODULE = "kernel/drivers/input/misc/pcspkr.ko"
WEB_SPEC = """\
name: ichor-web
container:
  entrypoint: ./bin/busybox
  args: [httpd, -f, -p, "8099", -h, /var/www]
restart: always
"""


def _extension(where: Path, name: str, files: dict[str, bytes]) -> Path:
    for path, data in files.items():
        (where / "rootfs" / path).parent.mkdir(parents=True, exist_ok=True)
        (where / "rootfs" / path).write_bytes(data)
    (where / "manifest.yaml").write_text(
        f"version: v1alpha1\nmetadata:\n  name: {name}\n  version: 1.0.0\n  author: Ichor tests\n"
        f"  description: {name} for the VM test\n"
        '  compatibility:\n    talos:\n      version: ">= v1.7.0"\n'
    )
    return where


def _web_extension(where: Path) -> Path:
    """An extension service: busybox httpd serving a page, its root with its mount points."""
    root = busybox_rootfs(where / "rootfs/usr/local/lib/containers/ichor-web")
    for mount_point in ("proc", "dev", "sys", "run"):  # a read-only root ships its mount points
        (root / mount_point).mkdir(parents=True, exist_ok=True)
    (root / "var/www/index.html").write_text("ichor-web in maintenance mode\n")
    return _extension(where, "ichor-web", {"usr/local/etc/containers/ichor-web.yaml": WEB_SPEC.encode()})


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = vm_skip_reason()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("inputs")
    kernel_root, kver = _build._Builder(_build.BuildOptions(output=work / "unused")).kernel()
    module = (kernel_root / "lib/modules" / kver / MODULE).read_bytes()
    extensions = [
        _extension(work / "ext-1", "ichor-pcspkr", {f"lib/modules/{kver}/extras/pcspkr.ko": module}),
        _extension(work / "ext-2", "ichor-firmware", {"lib/firmware/ichor-test.bin": b"\0" * 64}),
        _extension(work / "ext-3", "ichor-hello", {"usr/local/share/ichor-test/hello.txt": b"hello\n"}),
        _web_extension(work / "ext-4"),
    ]
    overlay = work / "overlay"
    (overlay / "etc/modprobe.d").mkdir(parents=True)
    (overlay / "etc/modprobe.d/ichor-test.conf").write_text("blacklist sr_mod\n")
    out = tmp_path_factory.mktemp("image")
    # 3 base layers + containerd + 4 extensions + modules.dep + extensions.yaml + overlay: 11 loop
    # devices, more than the kernel makes up front (stage 1's mount asks /dev/loop-control for the rest).
    flags = [arg for ext in extensions for arg in ("--system-extension-image", str(ext))]
    flags += ["--rootfs-overlay", str(overlay)]
    started = time.monotonic()
    kernel = build_output(out, "kernel", "vmlinuz-amd64", *flags)
    initramfs = build_output(out, "initramfs", "initramfs-amd64.xz", *flags)
    print(f"build {time.monotonic() - started:.1f} s")
    return kernel, initramfs


@pytest.fixture
def netns() -> Iterator[str]:
    with vm_netns("ichor-ext", GATEWAY) as name:
        yield name


def test_an_extension_module_and_an_overlay_file_are_in_the_booted_image(
    image: tuple[Path, Path], netns: str, tmp_path: Path
) -> None:
    """Budget 300 s to maintenance mode (plus the build)."""
    kernel, initramfs = image
    spec = VMSpec(
        kernel=kernel, initrd=initramfs, cmdline=_cmdline.assemble(["console=ttyS0", IP_ARG]),
        serial=tmp_path / "serial.log", tap="tap0",
    )  # fmt: skip
    started = time.monotonic()
    vm = proc.start(
        ["ip", "netns", "exec", netns, "nice", "-n", "10", *qemu_command(spec)], output=tmp_path / "qemu.log"
    )
    log = SerialLog(spec.serial, started)
    try:
        alive = lambda: vm.poll() is None  # noqa: E731
        stage1 = log.wait_for("ichor-stage1: switching root", 120, alive=alive)
        maintenance = log.wait_for(
            rf"talosctl apply-config --insecure --nodes {NODE_IP} --file", 300, alive=alive
        )
        print(f"switch_root {stage1:.1f} s, maintenance {maintenance:.1f} s")
        console = log.text()
        coldplug = re.search(r"coldplug: \d+ devices, loaded \d+ modules: (.*)", console)
        assert coldplug is not None, console[-3000:]
        loaded = coldplug.group(1).split()
        assert "pcspkr" in loaded, loaded
        assert "CD-ROM" in console and "sr_mod" not in loaded, loaded
        listed = talosctl_in(netns, tmp_path, "get", "extensions", "--insecure", "-n", NODE_IP, "-o", "yaml")
        assert listed.exit_code == 0, listed.stdout + listed.stderr
        names = re.findall(r"^\s+name: (\S+)$", listed.stdout, re.M)
        assert names == ["ichor-pcspkr", "ichor-firmware", "ichor-hello", "ichor-web", "modules.dep"], (
            listed.stdout
        )
        assert "author: Ichor tests" in listed.stdout, listed.stdout

        # The extension service runs before any config (budget 180 s after maintenance mode: under
        # TCG the system containerd's first health checks, a cold 23 MB ctr each, can take 10 s or more).
        def services() -> dict[str, str]:
            got = talosctl_in(netns, tmp_path, "get", "services", "--insecure", "-n", NODE_IP, "-o", "yaml")
            assert got.exit_code == 0, got.stdout + got.stderr
            found = {}
            for doc in re.split(r"^---$", got.stdout, flags=re.M):
                sid, running = (
                    re.search(r"^\s+id: (\S+)$", doc, re.M),
                    re.search(r"^\s+running: (\S+)$", doc, re.M),
                )
                if sid is not None:
                    found[sid.group(1)] = running.group(1) if running is not None else "(absent)"
            return found

        wanted = "ichor-web in maintenance mode\n"
        # busybox 1.35's wget crashes with -T (SIGSEGV on this host): the run's own timeout bounds it.
        deadline = time.monotonic() + 180
        answer = ""
        while True:
            try:
                page = proc.run(
                    ["ip", "netns", "exec", netns, "busybox", "wget", "-q", "-O", "-", f"http://{NODE_IP}:8099/"],
                    check=False, timeout=20,
                )  # fmt: skip
                answer = page.stdout + page.stderr + f" (exit {page.exit_code})"
            except proc.ProcessError as err:  # no answer within 20 s
                answer = str(err)
            if answer.startswith(wanted) or time.monotonic() > deadline:
                break
            time.sleep(3)
        said = [
            line
            for line in log.text().splitlines()
            if "ext-ichor-web" in line or "service[containerd]" in line
        ]
        assert answer.startswith(wanted), (answer, services(), said[-30:])
        seen = services()
        assert seen.get("ext-ichor-web") == "true" and seen.get("containerd") == "true", seen
        assert "cri" not in seen and "apid" not in seen, seen  # the config's services wait for a config
        print(f"ext-ichor-web running and answering {time.monotonic() - started:.1f} s after QEMU started")
    finally:
        vm.stop(timeout=5)
        print(log.text()[-3000:])
        print("qemu:", (tmp_path / "qemu.log").read_text(errors="replace")[-2000:])
