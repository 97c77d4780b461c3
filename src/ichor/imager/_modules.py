"""Kernel modules: which of the Debian kernel's modules the image carries, with their dependencies.

The base layer carries a curated set (:data:`ROOTFS_MODULES`: virtio, disks, filesystems, the
network kinds Talos configures, netfilter, watchdogs) closed over ``modules.dep`` and
``modules.softdep`` (kmod's modprobe honours softdeps; busybox's does not, which is why the image
ships kmod), re-indexed with ``depmod -b`` so coldplug finds them by modalias. The initramfs
carries only what stage 1 needs to mount the layers (:data:`STAGE1_MODULES`), in load order.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from ichor.imager import InputError
from ichor.machinery import proc

__all__ = [
    "ROOTFS_MODULES",
    "STAGE1_MODULES",
    "closure",
    "copy_modules",
    "load_order",
    "read_builtin",
    "read_modules_dep",
    "read_softdeps",
    "select",
]

# Paths under /lib/modules/<kver>/kernel/ (fnmatch patterns).
ROOTFS_MODULES: tuple[str, ...] = (
    "drivers/virtio/*",
    "drivers/net/virtio_net.ko",
    "drivers/net/net_failover.ko",
    "drivers/block/virtio_blk.ko",
    "drivers/scsi/virtio_scsi.ko",
    "drivers/char/hw_random/virtio-rng.ko",
    "drivers/nvme/host/*",
    "drivers/ata/ahci.ko",
    "drivers/ata/libahci.ko",
    "drivers/scsi/sd_mod.ko",
    "drivers/cdrom/cdrom.ko",
    "drivers/scsi/sr_mod.ko",
    "drivers/net/ethernet/intel/e1000/*",
    "drivers/net/ethernet/intel/e1000e/*",
    "drivers/block/loop.ko",
    "fs/squashfs/*",
    "fs/overlayfs/*",
    "fs/xfs/*",
    "fs/ext4/*",
    "fs/fat/*",
    "fs/nls/nls_cp437.ko",
    "fs/nls/nls_ascii.ko",
    "fs/isofs/*",
    "fs/efivarfs/*",
    "drivers/net/bonding/*",
    "net/8021q/*",
    "drivers/net/vxlan/*",
    "drivers/net/wireguard/*",
    "drivers/net/macvlan.ko",
    "drivers/net/veth.ko",
    "drivers/net/dummy.ko",
    "drivers/net/tun.ko",
    "net/bridge/*",
    "net/netfilter/*",
    "net/ipv4/netfilter/*",
    "net/ipv6/netfilter/*",
    "net/sched/*",
    "drivers/watchdog/i6300esb.ko",
    "drivers/watchdog/softdog.ko",
    "crypto/crc32c_generic.ko",
    "arch/x86/crypto/crc32c-intel.ko",
)

STAGE1_MODULES: tuple[str, ...] = ("loop", "squashfs", "overlay")


def read_modules_dep(moddir: Path) -> dict[str, list[str]]:
    """``modules.dep``: module path (relative to ``moddir``) -> the paths it needs."""
    deps: dict[str, list[str]] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        name, _, needs = line.partition(":")
        deps[name.strip()] = needs.split()
    return deps


def _name(path: str) -> str:
    return os.path.basename(path).removesuffix(".ko").replace("-", "_")


def read_softdeps(moddir: Path) -> dict[str, list[str]]:
    """``modules.softdep``: module name -> the module names it wants loaded around it."""
    soft: dict[str, list[str]] = {}
    path = moddir / "modules.softdep"
    if not path.exists():
        return soft
    for line in path.read_text().splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "softdep":
            continue
        soft.setdefault(words[1].replace("-", "_"), []).extend(
            w.replace("-", "_") for w in words[2:] if not w.endswith(":")
        )
    return soft


def read_builtin(moddir: Path) -> set[str]:
    """Names of the modules built into the kernel (``modules.builtin``): nothing to load for them."""
    path = moddir / "modules.builtin"
    if not path.exists():
        return set()
    return {_name(line) for line in path.read_text().splitlines() if line.strip()}


def select(deps: dict[str, list[str]], patterns: Iterable[str], *, strict: bool = True) -> set[str]:
    """Module paths matching ``patterns`` (relative to ``kernel/``); a pattern matching nothing is an
    error when ``strict`` (Debian's kernel), skipped otherwise (a kernel built elsewhere may have
    the driver built in, or not at all)."""
    chosen: set[str] = set()
    for pattern in patterns:
        matched = {p for p in deps if fnmatch.fnmatchcase(p, "kernel/" + pattern)}
        if not matched and strict:
            raise InputError(f"the kernel has no module matching {pattern!r}")
        chosen |= matched
    return chosen


def closure(deps: dict[str, list[str]], soft: dict[str, list[str]], roots: Iterable[str]) -> set[str]:
    """``roots`` plus every module they need, hard (``modules.dep``) or soft (``modules.softdep``)."""
    by_name = {_name(p): p for p in deps}
    done: set[str] = set()
    todo = list(roots)
    while todo:
        path = todo.pop()
        if path in done:
            continue
        done.add(path)
        todo.extend(deps[path])
        todo.extend(by_name[n] for n in soft.get(_name(path), ()) if n in by_name)
    return done


def load_order(deps: dict[str, list[str]], names: Iterable[str], builtin: Iterable[str] = ()) -> list[str]:
    """The module paths to ``insmod`` for ``names``, dependencies first (insmod resolves nothing);
    names in ``builtin`` (built into the kernel) need nothing."""
    by_name = {_name(p): p for p in deps}
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for need in deps[path]:
            visit(need)
        order.append(path)

    built_in = set(builtin)
    for name in names:
        if name not in by_name and name in built_in:
            continue
        if name not in by_name:
            raise InputError(f"the kernel has no module {name!r} (stage 1 needs it)")
        visit(by_name[name])
    return order


_INDEX_FILES = re.compile(r"^modules\.(builtin(\.modinfo|\.alias\.bin|\.bin)?|order)$")


def copy_modules(source: Path, target: Path, kver: str, paths: Iterable[str]) -> None:
    """Copy ``paths`` (and the kernel's builtin lists) to ``target``, then index them with depmod."""
    src = source / "lib/modules" / kver
    dst = target / "lib/modules" / kver
    for path in sorted(paths):
        (dst / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / path, dst / path)
        os.chmod(dst / path, 0o644)
    for entry in sorted(src.iterdir()):
        if _INDEX_FILES.match(entry.name) and entry.name != "modules.order":
            shutil.copyfile(entry, dst / entry.name)
    # modules.order keeps depmod's output stable and in kernel order.
    kept = set(paths)
    order = [line for line in (src / "modules.order").read_text().splitlines() if line in kept]
    (dst / "modules.order").write_text("".join(line + "\n" for line in order))
    proc.run(["depmod", "-b", str(target), kver], timeout=120)
