"""Boot of the OS image under QEMU TCG, beside the floor measured in the same run.

Run (root; holds the shared lock itself): ``.venv/bin/python benchmarks/boot.py [--runs N] [--rebuild]
[--compare-arg ARG]``

* floor: the same kernel booting a busybox-only initramfs whose ``/init`` prints a marker and
  powers off (what any image pays for firmware, kernel and initramfs unpacking);
* image: the imager's ``initramfs`` with no config on a tap in a private network namespace:
  seconds from QEMU's start to stage 1's ``switch_root``, PID 1's first line, machined's
  maintenance-mode console line, and the first ``talosctl disks --insecure`` answered.

``--rebuild`` also times a warm build of the initramfs and an Ichor-only rebuild (the top layer's
key changed by touching a scratch copy of the source). ``--compare-arg ARG`` boots the image a second
time in each run with ``ARG`` added to the kernel command line (alternating, so both see the same
load) and prints both columns with their ratio, e.g. ``ICHOR_CODECACHE=off`` (a kernel argument
that reaches PID 1's environment) for what the compiled dataclass methods save.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ichor
from ichor.imager._build import BuildOptions, Profile, _Builder, build
from ichor.imager._cpio import Entry, write_newc
from ichor.imager.vm import SerialLog, VMSpec, qemu_command
from ichor.machinery import proc

LOCK = "/tmp/ichor-heavy.lock"
NODE_IP, GATEWAY = "10.77.0.2", "10.77.0.1"
FLOOR_INIT = """#!/bin/busybox sh
/bin/busybox mount -t devtmpfs devtmpfs /dev
echo "ichor-floor: init" > /dev/console
/bin/busybox poweroff -f
"""


def floor_initramfs(out: Path, options: BuildOptions) -> Path:
    builder = _Builder(options)
    _, deb, sha = builder.of_layer("initramfs")[0]
    busybox = builder.extracted(deb, sha) / "bin/busybox"
    path = out / "floor.cpio"
    with path.open("wb") as f:
        write_newc(f, [Entry("bin"), Entry("dev"), Entry("dev/console", mode=0o600, char_device=(5, 1)),
                       Entry("bin/busybox", path=str(busybox)), Entry("init", data=FLOOR_INIT.encode())])  # fmt: skip
    return path


def boot_floor(kernel: Path, initrd: Path, work: Path) -> float:
    serial = work / "floor.log"
    serial.unlink(missing_ok=True)
    spec = VMSpec(kernel=kernel, initrd=initrd, serial=serial, cmdline="console=ttyS0 panic=-1")
    started = time.monotonic()
    vm = proc.start(["nice", "-n", "10", *qemu_command(spec)], output=work / "qemu-floor.log")
    try:
        return SerialLog(serial, started).wait_for("ichor-floor: init", 120, alive=lambda: vm.poll() is None)
    finally:
        vm.stop(timeout=5)


def boot_image(kernel: Path, initrd: Path, work: Path, extra_arg: str = "") -> dict[str, float]:
    netns = f"ichor-bench-{os.getpid()}"
    proc.run(["ip", "netns", "add", netns])
    try:
        for command in (["link", "add", "br0", "type", "bridge"], ["addr", "add", f"{GATEWAY}/24", "dev", "br0"],
                        ["link", "set", "br0", "up"], ["tuntap", "add", "tap0", "mode", "tap"],
                        ["link", "set", "tap0", "master", "br0", "up"]):  # fmt: skip
            proc.run(["ip", "-n", netns, *command])
        serial = work / "image.log"
        serial.unlink(missing_ok=True)
        disk = work / "disk.raw"
        with disk.open("wb") as f:
            f.truncate(1 << 30)
        spec = VMSpec(kernel=kernel, initrd=initrd, serial=serial, disk=disk, tap="tap0",
                      cmdline=f"console=ttyS0 talos.platform=metal printk.devkmsg=on panic=-1 "
                      f"ip={NODE_IP}::{GATEWAY}:255.255.255.0::eth0:off {extra_arg}".rstrip())  # fmt: skip
        started = time.monotonic()
        vm = proc.start(["ip", "netns", "exec", netns, "nice", "-n", "10", *qemu_command(spec)],
                        output=work / "qemu-image.log")  # fmt: skip
        log = SerialLog(serial, started)
        alive = lambda: vm.poll() is None  # noqa: E731
        try:
            times = {
                "switch_root (stage 1 done)": log.wait_for("ichor-stage1: switching root", 120, alive=alive),
                "PID 1 first line": log.wait_for("ichor-metal: PID 1 up", 120, alive=alive),
                "maintenance console line": log.wait_for(
                    "talosctl apply-config --insecure", 300, alive=alive
                ),
            }
            env = {"HOME": str(work), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # fmt: skip
            while True:
                answered = proc.run(["ip", "netns", "exec", netns, sys.executable, "-m", "ichor", "disks",
                                     "--insecure", "-n", NODE_IP], env=env, check=False, timeout=120)  # fmt: skip
                if answered.exit_code == 0:
                    times["maintenance API answers disks"] = time.monotonic() - started
                    break
                if time.monotonic() - started > 400 or not alive():
                    raise TimeoutError(answered.stderr)
                time.sleep(1)
            return times
        finally:
            vm.stop(timeout=5)
    finally:
        proc.run(["ip", "netns", "delete", netns], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rebuild", action="store_true", help="also time a warm and an Ichor-only rebuild")
    parser.add_argument(
        "--compare-arg", default="", help="also boot with this kernel argument added, alternating"
    )
    args = parser.parse_args()
    if os.environ.get("ICHOR_HEAVY_LOCKED") != "1":
        os.environ["ICHOR_HEAVY_LOCKED"] = "1"
        os.execvp("flock", ["flock", LOCK, sys.executable, *sys.argv])
    work = Path(tempfile.mkdtemp(prefix="ichor-boot-bench-"))
    try:
        options = BuildOptions(
            output=work / "out", say=lambda line: print(f"  imager: {line}", file=sys.stderr)
        )
        t0 = time.monotonic()
        kernel = build(Profile.KERNEL, options).path
        initrd = build(Profile.INITRAMFS, options)
        print(f"build kernel+initramfs (as cached): {time.monotonic() - t0:.1f} s; "
              f"initramfs {initrd.size / 1e6:.1f} MB, kernel {kernel.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        if args.rebuild:
            source = work / "src" / "ichor"
            shutil.copytree(Path(ichor.__file__).parent, source, ignore=shutil.ignore_patterns("__pycache__"))
            (source / "_bench_marker.py").write_text(f"STAMP = {time.time()!r}\n")
            t0 = time.monotonic()
            build(Profile.INITRAMFS, BuildOptions(output=work / "out2", source=source, say=options.say))
            print(f"Ichor-only rebuild (top layer + initramfs): {time.monotonic() - t0:.1f} s")
        floor_cpio = floor_initramfs(work, options)
        floors, images, compared = [], [], []
        for _ in range(args.runs):
            floors.append(boot_floor(kernel, floor_cpio, work))
            images.append(boot_image(kernel, initrd.path, work))
            if args.compare_arg:
                compared.append(boot_image(kernel, initrd.path, work, args.compare_arg))
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
        print(f"{'floor: busybox initramfs /init':40} {statistics.median(floors):6.1f} s")
        for key in images[0]:
            value = statistics.median(run[key] for run in images)
            line = f"{'image: ' + key:40} {value:6.1f} s   ({value / statistics.median(floors):.1f}x floor)"
            if compared:
                other = statistics.median(run[key] for run in compared)
                line += f"   with {args.compare_arg}: {other:6.1f} s ({value / other:.2f}x of it)"
            print(line)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
