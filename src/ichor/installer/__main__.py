"""``python -m ichor.installer install --disk D [--upgrade] [--force] [--platform P] [--config URL]
[--extra-kernel-arg A]... [--meta K=V]... [--assets DIR] [--version V] [--legacy-bios]``.

Talos's installer flags where they apply. The kernel, initramfs and GRUB images come from
``--assets`` (default ``/usr/install/<arch>``: ``vmlinuz``, ``initramfs.xz``, ``grub/BOOTX64.EFI``,
``grub/core.img``, ``grub/boot.img``); META values also come from ``INSTALLER_META_BASE64``.
Without ``--upgrade`` the disk is wiped and installed; with it the slot that is not good is
written and put on trial (``--force`` replaces a slot still on trial).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ichor.installer._install import InstallSpec, install
from ichor.installer._upgrade import upgrade_disk
from ichor.machinery import TALOS_VERSION
from ichor.machinery.errors import MachineryError
from ichor.machinery.kernelargs import installer_cmdline
from ichor.machinery.meta import VALUES_ENV, MetaValue, decode_values


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ichor.installer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("install", help="install to (or upgrade) a disk or a disk image file")
    cmd.add_argument("--disk", required=True, type=Path, help="the path to the disk to install to")
    cmd.add_argument("--platform", default="metal", help="the value of talos.platform")
    cmd.add_argument("--config", default="", help="the value of talos.config")
    cmd.add_argument("--arch", default="amd64", help="the target architecture")
    cmd.add_argument(
        "--extra-kernel-arg", action="append", default=[], help="extra argument to pass to the kernel"
    )
    cmd.add_argument("--meta", action="append", default=[], help="a key/value pair for META (0x0a=value)")
    cmd.add_argument("--upgrade", action="store_true", help="upgrade the installed system (keep partitions)")
    cmd.add_argument("--force", action="store_true", help="with --upgrade: replace a slot still on trial")
    cmd.add_argument(
        "--zero", action="store_true", help="accepted for Talos compatibility (disks are always zeroed)"
    )
    cmd.add_argument(
        "--assets",
        type=Path,
        help="directory with vmlinuz, initramfs.xz and grub/ (default /usr/install/<arch>)",
    )
    cmd.add_argument("--version", default=TALOS_VERSION, help="the version the boot entry is titled with")
    cmd.add_argument(
        "--legacy-bios",
        action="store_true",
        help="mark the protective MBR bootable (machine.install.legacyBIOSSupport)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        values = [MetaValue.parse(v) for v in args.meta]
        if os.environ.get(VALUES_ENV):
            values += decode_values(os.environ[VALUES_ENV])
        meta = {v.key: v.value.encode() for v in values}
        assets = args.assets or Path("/usr/install") / args.arch
        cmdline = str(
            installer_cmdline(
                platform=args.platform,
                arch=args.arch,
                config_url=args.config or None,
                extra_args=args.extra_kernel_arg,
            )
        )
        kernel, initramfs, grub = assets / "vmlinuz", assets / "initramfs.xz", assets / "grub"
        if args.upgrade:
            upgrade_disk(
                args.disk,
                version=args.version,
                kernel=kernel,
                initramfs=initramfs,
                cmdline=cmdline,
                force=args.force,
                meta=meta,
            )
            return 0
        efi = {"EFI/BOOT/BOOTX64.EFI": grub / "BOOTX64.EFI"} if (grub / "BOOTX64.EFI").is_file() else {}
        bios = (grub / "core.img", grub / "boot.img") if (grub / "core.img").is_file() else (None, None)
        install(
            InstallSpec(
                disk=args.disk,
                kernel=kernel,
                initramfs=initramfs,
                version=args.version,
                cmdline=cmdline,
                legacy_bios=args.legacy_bios,
                meta=meta,
                efi_files=efi,
                bios_core=bios[0],
                bios_boot=bios[1],
            )
        )
    except MachineryError as e:
        print(f"error: {e}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
