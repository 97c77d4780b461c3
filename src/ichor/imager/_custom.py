"""The seeds' customisation procedures as imager flags: ``--rootfs-overlay``, ``--rm``, ``--kernel-path``
with ``--modules-dir``.

Talos's old installer image did these with ONBUILD steps (unsquash the rootfs, ``rm -rf`` the
``RM`` paths, copy the ``customization`` stage, re-squash; a kernel went to
``/usr/install/<arch>/vmlinuz``). Here they are inputs of the build:

- ``--rm PATH`` (repeatable): ``rm -rf`` of a path of the root filesystem in the layers the imager
  builds (base, pydeps, ichor), so the space is really saved; removed kernel modules are
  re-indexed with depmod. Paths the image cannot boot without are refused, naming the path
  (:func:`check_removals`).
- ``--rootfs-overlay DIR``: DIR's files in a layer on top of every other one (:func:`check_overlay`).
  Places machined mounts over at boot (``/var``, ``/run``, ...) are refused: the files would never
  be seen.
- ``--kernel-path VMLINUZ --modules-dir DIR``: a kernel built elsewhere replaces Debian's in every
  output. Its release (from the bzImage header) must be the modules' (their ``vermagic``); a
  mismatch is refused naming both (:func:`custom_kernel_release`).

Pure checks and tree operations; the builder (:mod:`._build`) decides where they apply.
"""

from __future__ import annotations

import lzma
import os
import shutil
import stat
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from ichor.imager import InputError

__all__ = [
    "HIDDEN_AT_BOOT",
    "check_overlay",
    "check_removals",
    "custom_kernel_release",
    "kernel_release",
    "modules_release",
    "remove_paths",
]

# What the image cannot boot without: machined and its Python, the loader and libc, the install
# assets' mount point, the module index, and the modules that mount the layers, STATE and EPHEMERAL.
_NEEDED = (
    "sbin/init", "usr/bin/python3", "usr/bin/python3.11", "usr/lib/python3.11/encodings",
    "usr/lib/python3.11/os.py", "usr/lib/python3/dist-packages/ichor", "lib64/ld-linux-x86-64.so.2",
    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6", "bin/kmod",
    "usr/install", "etc/os-release",
)  # fmt: skip
_NEEDED_MODULES = (
    "modules.dep", "modules.alias", "kernel/fs/xfs/xfs.ko", "kernel/fs/squashfs/squashfs.ko",
    "kernel/fs/overlayfs/overlay.ko", "kernel/drivers/block/loop.ko", "kernel/fs/fat/vfat.ko",
)  # fmt: skip

HIDDEN_AT_BOOT = ("dev", "proc", "sys", "run", "tmp", "var", "system")
"""Directories machined mounts a filesystem over on metal: an overlay's files there are never seen."""


def _relative(path: str, flag: str) -> str:
    """``path`` as a normalised path under the root (``/usr/x`` and ``usr/x`` alike); refuses ``..``."""
    parts = PurePosixPath("/" + path).parts[1:]
    if not path.strip() or ".." in parts:
        raise InputError(f"{flag} {path!r}: not a path in the root filesystem",
                         hint=f"pass {flag} an absolute path such as /usr/share/doc")  # fmt: skip
    return "/".join(p for p in parts if p != ".")


def check_removals(paths: Sequence[str], kernel_release: str) -> tuple[str, ...]:
    """The ``--rm`` paths, normalised (relative to the root, sorted, once each). Removing the root,
    or anything the image needs to boot or anything holding one, is refused naming the needed path."""
    needed = [*_NEEDED, *(f"lib/modules/{kernel_release}/{m}" for m in _NEEDED_MODULES)]
    out: set[str] = set()
    for given in paths:
        path = _relative(given, "--rm")
        if not path:
            raise InputError("--rm /: the image cannot boot without a root filesystem",
                             hint="name the paths to remove, e.g. --rm /usr/share/doc")  # fmt: skip
        for need in needed:
            if need == path or need.startswith(path + "/"):
                what = "it" if need == path else f"/{need}"
                raise InputError(
                    f"--rm {given}: the image needs {what} to boot",
                    hint="remove something narrower; stage 1, machined and the disks' filesystems need this",
                )
        out.add(path)
    return tuple(sorted(out))


def remove_paths(tree: Path, paths: Iterable[str]) -> list[str]:
    """``rm -rf`` each path (relative to the root) in ``tree``; returns those that were there.

    A path through a symlink is not followed: only the tree's own entries are removed."""
    removed = []
    for path in paths:
        target = tree / path
        parent = target.parent.resolve()
        if not (parent == tree.resolve() or parent.is_relative_to(tree.resolve())):
            continue  # a symlinked parent points elsewhere: not this tree's entry
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        else:
            continue
        removed.append(path)
    return removed


def check_overlay(directory: Path) -> Path:
    """``--rootfs-overlay DIR``: an existing directory of regular files, directories and symlinks,
    nothing under a place machined mounts over. Returns it resolved."""
    if not directory.exists():
        raise InputError(f"--rootfs-overlay {directory}: no such directory",
                         hint="pass a directory whose tree is copied into the root (DIR/etc/x -> /etc/x)")  # fmt: skip
    if not directory.is_dir():
        raise InputError(f"--rootfs-overlay {directory}: not a directory",
                         hint="pass a directory whose tree is copied into the root (DIR/etc/x -> /etc/x)")  # fmt: skip
    root = directory.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in [*dirnames, *filenames]:
            full = Path(dirpath, entry)
            item = full.relative_to(root).as_posix()
            mode = full.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                raise InputError(f"--rootfs-overlay {directory}: /{item} is a special file",
                                 hint="the overlay holds regular files, directories and symlinks only")  # fmt: skip
            if item.split("/")[0] in HIDDEN_AT_BOOT and (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise InputError(
                    f"--rootfs-overlay {directory}: /{item} would never be seen: machined mounts over /{item.split('/')[0]} at boot",
                    hint="put the file elsewhere (/etc, /usr/local, /opt, ...)",
                )
    return root


# --- a kernel built elsewhere -----------------------------------------------------------------


def kernel_release(vmlinuz: Path) -> str:
    """The release of a bzImage (``6.1.0-56-amd64``), read from its setup header's version string."""
    try:
        with vmlinuz.open("rb") as f:
            header = f.read(0x4000)
            if len(header) < 0x210 or header[0x202:0x206] != b"HdrS":
                raise InputError(f"--kernel-path {vmlinuz}: not a Linux kernel image (no bzImage header)",
                                 hint="pass the kernel's bzImage (arch/x86/boot/bzImage, /boot/vmlinuz-<release>)")  # fmt: skip
            (offset,) = struct.unpack_from("<H", header, 0x20E)
            f.seek(offset + 0x200)
            text = f.read(256).split(b"\0")[0].decode("ascii", "replace")
    except OSError as exc:
        raise InputError(
            f"--kernel-path {vmlinuz}: {exc.strerror}", hint="pass the kernel's bzImage"
        ) from None
    release = text.split(" ")[0] if text else ""
    if not release:
        raise InputError(f"--kernel-path {vmlinuz}: the kernel image names no release",
                         hint="pass the kernel's bzImage")  # fmt: skip
    return release


def _vermagic(module: Path) -> str | None:
    data = module.read_bytes()
    if module.name.endswith(".xz"):
        try:
            data = lzma.decompress(data)
        except lzma.LZMAError:
            return None
    at = data.find(b"vermagic=")
    if at < 0:
        return None
    end = data.find(b"\0", at)
    words = data[at + len("vermagic=") : end].decode("ascii", "replace").split()
    return words[0] if words else None


def modules_release(directory: Path) -> tuple[str, Path]:
    """(release, the module tree) of ``--modules-dir``: ``/lib/modules/<release>`` itself, a directory
    holding one ``<release>/``, or a root holding ``lib/modules/<release>``. The release is the
    modules' ``vermagic`` (the directory's name when no module says)."""
    if not directory.is_dir():
        raise InputError(f"--modules-dir {directory}: no such directory",
                         hint="pass the kernel's module tree (/lib/modules/<release> after modules_install)")  # fmt: skip
    tree = directory
    for candidate in (directory / "lib/modules", directory):
        subdirs = [p for p in candidate.iterdir() if p.is_dir()] if candidate.is_dir() else []
        if (
            not (candidate / "modules.order").exists()
            and len(subdirs) == 1
            and ((subdirs[0] / "modules.order").exists() or (subdirs[0] / "kernel").is_dir())
        ):
            tree = subdirs[0]
            break
    if not ((tree / "modules.order").exists() or (tree / "kernel").is_dir()):
        raise InputError(f"--modules-dir {directory}: no kernel module tree (no modules.order or kernel/)",
                         hint="pass the kernel's module tree (/lib/modules/<release> after modules_install)")  # fmt: skip
    for module in sorted(tree.rglob("*.ko*")):
        release = _vermagic(module)
        if release:
            return release, tree
    return tree.name, tree


def custom_kernel_release(vmlinuz: Path, modules_dir: Path) -> tuple[str, Path]:
    """The release both agree on, and the module tree; a mismatch is refused naming both."""
    release = kernel_release(vmlinuz)
    modules, tree = modules_release(modules_dir)
    if modules != release:
        raise InputError(
            f"--kernel-path {vmlinuz} is Linux {release} but the modules in --modules-dir {modules_dir} are for {modules}",
            hint="pass the modules built with that kernel (`make modules_install INSTALL_MOD_PATH=DIR`)",
        )
    return release, tree
