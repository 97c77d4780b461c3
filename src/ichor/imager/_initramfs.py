"""The initramfs's members, in their one order, from the files it is made of.

Two writers share this: the imager (from its cache) and the node's installer, which writes the
installed system's initramfs from the files stage 1 kept of the very initramfs the node booted
(:func:`kept_files`), so an installed disk carries the same bytes the imager made, with no
registry and no network. What stage 1 keeps, and where (ARCHITECTURE.md, "Installing to disk"):

``usr/install/amd64/`` in the initramfs holds what only the installer needs (the kernel as
``vmlinuz`` and GRUB's ``grub/BOOTX64.EFI``, ``grub/core.img``, ``grub/boot.img``); stage 1 moves
it, and the files it boots from (``initramfs/``: ``init``, ``modules.load``, ``bin/busybox``,
``lib/modules/...``, ``rootfs.sqsh``, ``layers/*.sqsh``), into a tmpfs it mounts at
``/usr/install`` in the new root. The layers are loop-mounted from there, so keeping them costs
no memory beyond what the running root already uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ichor.imager._cpio import Entry

__all__ = ["ASSETS", "GRUB_IMAGES", "KEPT", "InitramfsFiles", "entries", "kept_files"]

ASSETS = "usr/install/amd64"
"""The install assets' directory, in the initramfs and (stage 1 keeps it) on the node."""
KEPT = "initramfs"
"""Under :data:`ASSETS` on the node: the initramfs's own files, as stage 1 kept them."""
GRUB_IMAGES = ("BOOTX64.EFI", "boot.img", "core.img")
"""GRUB's images under ``<ASSETS>/grub/`` (``installer.build_grub_images``)."""


@dataclass(frozen=True)
class InitramfsFiles:
    """Where each member's bytes come from."""

    busybox: Path
    init: bytes
    modules: Sequence[tuple[str, Path]]
    """(path under ``lib/modules/``, file) in ``insmod`` order; ``modules.load`` lists them."""
    rootfs: Path
    layers: Sequence[tuple[str, Path]]
    """(name under ``layers/``, squashfs file), bottom to top."""
    kernel: Path | None = None
    grub: Mapping[str, Path] | None = None
    """GRUB's images by name (:data:`GRUB_IMAGES`); with ``kernel``, the install assets."""


def entries(files: InitramfsFiles) -> Iterator[Entry]:
    yield from (Entry(d) for d in ("bin", "dev", "layers", "lib", "lib/modules", "proc", "root", "sys"))
    yield Entry("dev/console", mode=0o600, char_device=(5, 1))
    yield Entry("bin/busybox", path=str(files.busybox))
    yield Entry("init", data=files.init)
    yield Entry("modules.load", mode=0o644, data="".join(m + "\n" for m, _ in files.modules).encode())
    made: set[str] = {"lib/modules"}
    for module, source in files.modules:
        parts = Path(module).parts[:-1]
        for i in range(1, len(parts) + 1):
            directory = "lib/modules/" + "/".join(parts[:i])
            if directory not in made:
                made.add(directory)
                yield Entry(directory)
        yield Entry(f"lib/modules/{module}", mode=0o644, path=str(source))
    yield Entry("rootfs.sqsh", mode=0o644, path=str(files.rootfs))
    for name, layer in files.layers:
        yield Entry(f"layers/{name}", mode=0o644, path=str(layer))
    if files.kernel is None or files.grub is None:
        return
    yield from (Entry(d) for d in ("usr", "usr/install", ASSETS, f"{ASSETS}/grub"))
    yield Entry(f"{ASSETS}/vmlinuz", mode=0o644, path=str(files.kernel))
    for name in sorted(files.grub):
        yield Entry(f"{ASSETS}/grub/{name}", mode=0o644, path=str(files.grub[name]))


def kept_files(assets: Path) -> InitramfsFiles:
    """The initramfs's files as stage 1 kept them under ``assets`` (``/usr/install/amd64``).

    Raises FileNotFoundError naming the first missing file (an image without install assets)."""
    kept = assets / KEPT
    for required in (assets / "vmlinuz", kept / "init", kept / "modules.load", kept / "rootfs.sqsh"):
        if not required.is_file():
            raise FileNotFoundError(2, "missing", str(required))
    modules = [m for m in (kept / "modules.load").read_text().splitlines() if m]
    layers = sorted(p.name for p in (kept / "layers").glob("*.sqsh")) if (kept / "layers").is_dir() else []
    grub = {name: assets / "grub" / name for name in GRUB_IMAGES if (assets / "grub" / name).is_file()}
    return InitramfsFiles(
        busybox=kept / "bin" / "busybox",
        init=(kept / "init").read_bytes(),
        modules=[(m, kept / "lib" / "modules" / m) for m in modules],
        rootfs=kept / "rootfs.sqsh",
        layers=[(name, kept / "layers" / name) for name in layers],
        kernel=assets / "vmlinuz",
        grub=grub,
    )
