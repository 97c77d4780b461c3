"""The profiles: what each output is made of, and writing it into the output directory atomically.

``kernel`` is the Debian kernel's ``vmlinuz`` as ``vmlinuz-amd64``; ``initramfs`` is a newc cpio
(stage 1, its modules, busybox, the three layers and the installer's kernel and GRUB images,
:mod:`._initramfs`) as ``initramfs-amd64.xz`` (Talos's name; left uncompressed, which the kernel
accepts under any name); ``iso`` (:mod:`._iso`), ``metal`` (:mod:`._metal`) and ``installer``
(:mod:`._installer_image`) are made from those two. Intermediate files live in a hidden scratch
directory inside the output directory, removed whatever happens, so the finished artefact is renamed
into place and a failure leaves the directory as it was. :func:`build` returns each artefact with
its sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import ichor
from ichor.imager import InputError, OutputError, _cmdline, _initramfs, _inputs, _layers, _modules
from ichor.imager._cpio import Entry, write_newc
from ichor.imager._installer_image import make_installer_image
from ichor.imager._iso import GRUB_LIB, make_iso
from ichor.imager._metal import compress_xz, make_metal
from ichor.imager._stage1 import INIT_SCRIPT
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.constants import TALOS_VERSION
from ichor.machinery.meta import MetaValue

__all__ = [
    "DEFAULT_EPOCH",
    "Artefact",
    "BuildOptions",
    "OutFormat",
    "Profile",
    "build",
    "default_cache",
    "output_name",
    "write_output",
    "write_output_path",
]

DEFAULT_EPOCH = 1_704_067_200
"""File times in the iso and metal outputs (2024-01-01 UTC) unless ``SOURCE_DATE_EPOCH`` says otherwise."""

# Bump when the way a layer is assembled changes, so cached layers are rebuilt.
BUILDER_VERSION = "1"

# Removed from the base layer: what a node never runs and a read-only root never needs.
_BASE_DROP = (
    "usr/share/doc", "usr/share/man", "usr/share/lintian", "usr/share/locale", "usr/share/info",
    "usr/share/bug", "usr/share/gdb", "usr/lib/python3.11/test", "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/tkinter", "usr/lib/python3.11/turtledemo", "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/ensurepip", "usr/lib/python3.11/pydoc_data", "usr/lib/python3.11/unittest/test",
    "boot", "etc/kernel", "usr/lib/linux", "lib/modules",
)  # fmt: skip

# Mount points and writable places machined needs to exist in the read-only root.
_ROOT_DIRS = ("dev", "proc", "sys", "run", "tmp", "system", "var", "etc", "root", "mnt", "opt", "usr/local")

_INIT = """#!/usr/bin/python3.11 -I
# Ichor's /sbin/init: machined as PID 1 on the metal platform (ichor.machined.metal).
import sys
from ichor.machined.metal import main
sys.exit(main())
"""


class Profile(StrEnum):
    """Talos's imager profiles this imager builds."""

    KERNEL = "kernel"
    INITRAMFS = "initramfs"
    CMDLINE = "cmdline"
    ISO = "iso"
    METAL = "metal"
    INSTALLER = "installer"


class OutFormat(StrEnum):
    """A disk image's ``outFormat`` (Talos's profile field): ``xz`` is the metal profile's default."""

    RAW = "raw"
    XZ = "xz"


OUTPUT_NAMES = {
    Profile.KERNEL: "vmlinuz-amd64",
    Profile.INITRAMFS: "initramfs-amd64.xz",
    Profile.CMDLINE: "cmdline-amd64",
    Profile.ISO: "metal-amd64.iso",
    Profile.METAL: "metal-amd64.raw",
    Profile.INSTALLER: "installer-amd64.tar",
}


def output_name(profile: Profile, out_format: OutFormat = OutFormat.XZ) -> str:
    """Talos's file name for ``profile`` (``metal-amd64.raw.xz`` when the metal image is compressed)."""
    name = OUTPUT_NAMES[profile]
    return name + ".xz" if profile is Profile.METAL and out_format is OutFormat.XZ else name


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "ichor" / "image"


@dataclass(frozen=True)
class BuildOptions:
    output: Path
    cache: Path = field(default_factory=default_cache)
    extra_kernel_args: tuple[str, ...] = ()
    meta: tuple[MetaValue, ...] = ()
    """``--meta``: written into META by ``metal``, passed as ``talos.environment=INSTALLER_META_BASE64``
    by the outputs that have no META (Talos's imager rule)."""
    out_format: OutFormat = OutFormat.XZ
    epoch: int = DEFAULT_EPOCH
    grub_lib: Path = GRUB_LIB
    source: Path = Path(ichor.__file__).parent
    """The ``ichor`` package directory that becomes the top layer."""
    debs_lock: Path = _inputs.PINS / "debs.lock"
    wheels_lock: Path = _inputs.PINS / "wheels.lock"
    say: Callable[[str], None] = lambda line: None
    version: str = TALOS_VERSION
    """The version boot entries are titled with and the ``installer`` image is labelled with (what a
    node's boot slot records after an upgrade to it)."""


@dataclass(frozen=True)
class Artefact:
    path: Path
    sha256: str
    size: int


def check_output_dir(output: Path) -> None:
    """Refuse an output directory that cannot be created or written, before any work is done."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output, prefix=".imager-probe-"):
            pass
    except OSError as err:
        raise OutputError(
            f"cannot write to the output directory {output}: {err.strerror}",
            hint="pass --output DIR naming a directory you can write",
        ) from None


def write_output_path(output: Path, name: str, make: Callable[[Path], None]) -> Artefact:
    """Have ``make`` write a temporary path in ``output``, then rename it to ``name`` (removed on failure)."""
    fd, partial = tempfile.mkstemp(dir=output, prefix=f".{name}.partial-")
    os.close(fd)
    try:
        make(Path(partial))
        with open(partial, "rb+") as done:
            os.fsync(done.fileno())
        os.chmod(partial, 0o644)
        target = output / name
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return Artefact(target, _inputs.sha256_file(target), target.stat().st_size)


def write_output(output: Path, name: str, write: Callable[[io.BufferedWriter], None]) -> Artefact:
    """Write ``name`` in ``output`` through a temporary file renamed into place (removed on failure)."""

    def make(path: Path) -> None:
        with path.open("wb") as out:
            write(out)

    return write_output_path(output, name, make)


@contextlib.contextmanager
def _scratch(output: Path) -> Iterator[Path]:
    """A hidden directory in ``output`` for intermediate files (same filesystem: artefacts are renamed
    out of it), removed on success and failure alike."""
    work = Path(tempfile.mkdtemp(dir=output, prefix=".imager-work-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Builder:
    def __init__(self, options: BuildOptions) -> None:
        self.options = options
        self.cache = options.cache
        self.start = time.monotonic()
        self._debs: dict[str, tuple[_inputs.Deb, Path, str]] | None = None

    def say(self, line: str) -> None:
        self.options.say(f"[{time.monotonic() - self.start:6.1f}s] {line}")

    def debs(self) -> dict[str, tuple[_inputs.Deb, Path, str]]:
        if self._debs is None:
            pins = _inputs.read_deb_pins(self.options.debs_lock)
            self.say(f"checking {len(pins)} Debian packages against the apt index")
            files = _inputs.fetch_debs(self._apt_records(pins), self.cache)
            self._debs = {d.package: (d, *files[d]) for d in pins}
        return self._debs

    def _apt_records(self, pins: list[_inputs.Deb]) -> dict[_inputs.Deb, dict[str, str]]:
        """The index's records of the pins, remembered per lock file content (asking apt costs
        seconds; a pinned version's hash never changes, and every cached deb is re-hashed anyway)."""
        key = hashlib.sha256("".join(f"{d.spec} {d.layer}\n" for d in pins).encode()).hexdigest()[:16]
        remembered = self.cache / "apt" / f"records-{key}.json"
        try:
            stored = json.loads(remembered.read_text())
            return {d: stored[d.spec] for d in pins}
        except (OSError, ValueError, KeyError):
            pass
        records = _inputs.apt_records(pins)
        remembered.parent.mkdir(parents=True, exist_ok=True)
        partial = remembered.with_suffix(".partial")
        partial.write_text(json.dumps({d.spec: r for d, r in records.items()}, sort_keys=True))
        os.replace(partial, remembered)
        return records

    def of_layer(self, layer: str) -> list[tuple[_inputs.Deb, Path, str]]:
        return [entry for entry in self.debs().values() if entry[0].layer == layer]

    def extracted(self, deb: Path, sha: str) -> Path:
        """The deb's files, unpacked once into the cache (keyed by its sha256)."""
        target = self.cache / "extract" / sha[:16]
        if not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = tempfile.mkdtemp(dir=target.parent, prefix=".x-")
            try:
                proc.run(["dpkg-deb", "-x", str(deb), scratch], timeout=600)
                os.replace(scratch, target)
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
        return target

    def vmlinuz(self) -> Path:
        kernel_root, kver = self.kernel()
        self.say(f"kernel {kver}")
        return kernel_root / "boot" / f"vmlinuz-{kver}"

    def kernel(self) -> tuple[Path, str]:
        """The unpacked kernel package (fully depmod-indexed) and its version."""
        entries = self.of_layer("kernel")
        if len(entries) != 1:
            raise InputError(f"{self.options.debs_lock}: expected exactly one package in layer 'kernel'")
        _, deb, sha = entries[0]
        root = self.extracted(deb, sha)
        versions = sorted(p.name for p in (root / "lib/modules").iterdir())
        if len(versions) != 1:
            raise InputError(f"kernel package {deb.name} holds {len(versions)} module trees, expected one")
        kver = versions[0]
        if not (root / "lib/modules" / kver / "modules.dep").exists():
            self.say(f"indexing the modules of kernel {kver}")
            proc.run(["depmod", "-b", str(root), kver], timeout=300, hint="install kmod")
        return root, kver

    # layers -------------------------------------------------------------------------------

    def base_layer(self) -> Path:
        kernel_root, kver = self.kernel()
        base = self.of_layer("base")
        key = {"v": BUILDER_VERSION, "debs": sorted(sha for _, _, sha in base), "kernel": kver,
               "modules": _modules.ROOTFS_MODULES, "drop": _BASE_DROP}  # fmt: skip

        def fill(tree: Path) -> None:
            for deb, path, sha in base:
                self.say(f"  base: {deb.spec}")
                shutil.copytree(self.extracted(path, sha), tree, symlinks=True, dirs_exist_ok=True)
            for drop in _BASE_DROP:
                shutil.rmtree(tree / drop, ignore_errors=True)
            for directory in _ROOT_DIRS:
                (tree / directory).mkdir(parents=True, exist_ok=True)
            if not (tree / "usr/bin/python3").exists():
                (tree / "usr/bin/python3").symlink_to("python3.11")
            moddir = kernel_root / "lib/modules" / kver
            deps = _modules.read_modules_dep(moddir)
            wanted = _modules.closure(
                deps, _modules.read_softdeps(moddir), _modules.select(deps, _modules.ROOTFS_MODULES)
            )
            self.say(f"  base: {len(wanted)} kernel modules")
            _modules.copy_modules(kernel_root, tree, kver, wanted)
            self.say("  base: compiling the standard library")
            _layers.compile_pyc(tree, "usr/lib/python3.11")
            _layers.normalise_modes(tree / "usr/lib/python3.11")

        return _layers.cached_layer(self.cache, "base", key, fill, self.say)

    def pydeps_layer(self) -> Path:
        wheels = _inputs.read_wheel_pins(self.options.wheels_lock)
        key = {"v": BUILDER_VERSION, "wheels": sorted(w.sha256 for w in wheels)}
        files = _inputs.fetch_wheels(wheels, self.cache, self.options.wheels_lock)

        def fill(tree: Path) -> None:
            site = tree / _layers.SITE
            site.mkdir(parents=True)
            for wheel in files:
                _layers.unpack_wheel(wheel, site)
            self.say(f"  pydeps: {len(files)} wheels unpacked, compiling")
            _layers.compile_pyc(tree, _layers.SITE)

        return _layers.cached_layer(self.cache, "pydeps", key, fill, self.say)

    def ichor_layer(self) -> Path:
        source = self.options.source

        def skip(path: Path) -> bool:
            return "__pycache__" in path.parts or path.suffix == ".pyc"

        key = {"v": BUILDER_VERSION, "source": _layers.tree_digest(source, skip=skip), "talos": TALOS_VERSION}

        def fill(tree: Path) -> None:
            target = tree / _layers.SITE / "ichor"
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            (tree / "sbin").mkdir()
            # Stage 1 mounts what the installer needs here (imager/_initramfs.py).
            (tree / "usr/install").mkdir(parents=True)
            (tree / "sbin/init").write_text(_INIT)
            (tree / "sbin/init").chmod(0o755)
            (tree / "etc").mkdir()
            (tree / "etc/os-release").write_text(
                f'NAME="Talos"\nID=talos\nVERSION_ID={TALOS_VERSION}\n'
                f'PRETTY_NAME="Talos ({TALOS_VERSION})"\nHOME_URL="https://www.talos.dev/"\n'
                'BUG_REPORT_URL="https://github.com/siderolabs/talos/issues"\n'
            )
            _layers.normalise_modes(target)
            _layers.compile_pyc(tree, _layers.SITE)

        return _layers.cached_layer(self.cache, "ichor", key, fill, self.say)

    # outputs ------------------------------------------------------------------------------

    def grub_images(self) -> dict[str, Path]:
        """GRUB's BOOTX64.EFI, core.img and boot.img from the pinned GRUB packages (cached by their hashes)."""
        from ichor.installer import build_grub_images

        entries = {deb.package: (path, sha) for deb, path, sha in self.of_layer("grub")}
        wanted = {"grub-efi-amd64-bin": "x86_64-efi", "grub-pc-bin": "i386-pc"}
        missing = sorted(set(wanted) - set(entries))
        if missing:
            raise InputError(f"{self.options.debs_lock}: layer 'grub' lacks {', '.join(missing)}")
        key = hashlib.sha256(
            f"{BUILDER_VERSION} {sorted(sha for _, sha in entries.values())}".encode()
        ).hexdigest()[:16]
        target = self.cache / "grub" / key
        if not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".g-"))
            try:
                lib = scratch / "lib"
                lib.mkdir()
                for package, platform in wanted.items():
                    path, sha = entries[package]
                    (lib / platform).symlink_to(self.extracted(path, sha) / "usr/lib/grub" / platform)
                self.say("building GRUB's EFI and BIOS images (grub-mkimage)")
                build_grub_images(scratch / "out", grub_lib=lib)
                os.replace(scratch / "out", target)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return {name: target / name for name in _initramfs.GRUB_IMAGES}

    def initramfs_entries(self) -> Iterator[Entry]:
        kernel_root, kver = self.kernel()
        busybox_entries = self.of_layer("initramfs")
        if not busybox_entries:
            raise InputError(f"{self.options.debs_lock}: no package in layer 'initramfs' (busybox-static)")
        _, bb_deb, bb_sha = busybox_entries[0]
        busybox = self.extracted(bb_deb, bb_sha) / "bin/busybox"
        if not busybox.is_file():
            raise InputError(f"{bb_deb.name} has no /bin/busybox")
        moddir = kernel_root / "lib/modules" / kver
        order = _modules.load_order(_modules.read_modules_dep(moddir), _modules.STAGE1_MODULES)
        layers = [self.base_layer(), self.pydeps_layer(), self.ichor_layer()]
        files = _initramfs.InitramfsFiles(
            busybox=busybox,
            init=INIT_SCRIPT.encode(),
            modules=[(module, moddir / module) for module in order],
            rootfs=layers[0],
            layers=[("10-pydeps.sqsh", layers[1]), ("20-ichor.sqsh", layers[2])],
            kernel=kernel_root / "boot" / f"vmlinuz-{kver}",
            grub=self.grub_images(),
        )
        yield from _initramfs.entries(files)


def _write_bytes(out: io.BufferedWriter, data: bytes) -> None:
    out.write(data)


def build(profile: Profile, options: BuildOptions) -> Artefact:
    """Build ``profile`` into ``options.output``; returns the artefact with its sha256."""
    # Talos: META values go into META where the output has one, else onto the command line.
    cmdline = _cmdline.assemble(
        options.extra_kernel_args, options.meta if profile is not Profile.METAL else ()
    )
    check_output_dir(options.output)
    builder = _Builder(options)
    name = output_name(profile, options.out_format)
    if profile is Profile.CMDLINE:
        return write_output(options.output, name, lambda out: _write_bytes(out, (cmdline + "\n").encode()))
    if profile is Profile.KERNEL:
        vmlinuz = builder.vmlinuz()

        def copy_kernel(out: io.BufferedWriter) -> None:
            with vmlinuz.open("rb") as src:
                shutil.copyfileobj(src, out)

        artefact = write_output(options.output, name, copy_kernel)
    elif profile is Profile.INITRAMFS:
        entries = list(builder.initramfs_entries())
        builder.say("writing the initramfs")
        artefact = write_output(options.output, name, lambda out: write_newc(out, entries))
    else:
        with _scratch(options.output) as work:
            artefact = _build_from_boot_files(profile, name, cmdline, builder, work)
    builder.say(f"{artefact.path.name}: {artefact.size / 1e6:.1f} MB")
    return artefact


def _build_from_boot_files(
    profile: Profile, name: str, cmdline: str, builder: _Builder, work: Path
) -> Artefact:
    """``iso``, ``metal`` and ``installer``: made from the kernel and an initramfs written to ``work``."""
    options = builder.options
    kernel = builder.vmlinuz()
    initramfs = work / "initramfs.xz"
    entries = list(builder.initramfs_entries())
    with initramfs.open("wb") as out:
        write_newc(out, entries)
    if profile is Profile.ISO:
        builder.say("writing the ISO (GRUB for BIOS and UEFI)")
        return write_output_path(
            options.output, name,
            lambda path: make_iso(path, kernel=kernel, initramfs=initramfs, cmdline=cmdline, work=work / "iso",
                                  epoch=options.epoch, version=options.version, grub_lib=options.grub_lib),
        )  # fmt: skip
    grub = build_grub_images(work / "grub", grub_lib=options.grub_lib)
    if profile is Profile.INSTALLER:
        builder.say("writing the installer image (OCI archive)")
        layers = [builder.base_layer(), builder.pydeps_layer(), builder.ichor_layer()]
        return write_output_path(
            options.output, name,
            lambda path: make_installer_image(path, kernel=kernel, initramfs=initramfs, grub=grub, layers=layers,
                                              work=work / "installer", version=options.version),
        )  # fmt: skip
    meta = {value.key: value.value.encode() for value in options.meta}

    def metal(path: Path) -> None:
        builder.say(f"installing onto {path.name} (EFI, BIOS, BOOT slot A, META, STATE, EPHEMERAL)")
        make_metal(path, kernel=kernel, initramfs=initramfs, cmdline=cmdline, grub=grub, version=options.version,
                   epoch=options.epoch, meta=meta, say=lambda line: builder.say(f"  {line}"))  # fmt: skip

    if options.out_format is OutFormat.RAW:
        return write_output_path(options.output, name, metal)
    raw = work / "metal-amd64.raw"
    metal(raw)
    builder.say("compressing with xz")
    packed = compress_xz(raw)
    return write_output_path(options.output, name, lambda path: os.replace(packed, path))
