"""System extensions baked into the image: ``--system-extension-image`` (repeatable).

Each value is one of:

- a directory holding ``manifest.yaml`` and ``rootfs/`` (the extension itself);
- an OCI image layout: a directory with ``oci-layout``, or ``oci:<dir>[:<tag>]``;
- an OCI archive (a tar of a layout): ``oci-archive:<file>[:<tag>]``;
- an image in a registry on this machine or a private network: ``<registry>/<repository>[:<tag>]``
  or ``docker://...`` with the registry a loopback address, ``localhost`` or a private address
  (such as a cluster's ``--with-registry`` at 10.5.0.1:5000), pulled with skopeo over plain http;
  any other registry is refused, since a host name or public address could reach the internet.

Images are unpacked (:func:`ichor.images.unpack_image`, which refuses unsafe entries) into a
scratch directory. Every extension is then checked with Talos's rules for images
(:func:`ichor.machinery.extensions.load_extension`: the manifest, ``compatibility.talos.version``,
no world-writeable or special files, regular files only under Talos's full ``AllowedPaths``), plus
the two Talos applies to images that a container node does not need: a symlink counts as a file
(it must lie under an allowed path too), and kernel modules must be for the image's kernel. A
refusal reads ``--system-extension-image <value>: error validating extension "<name>": <rule>``.

As Talos's imager does, each extension becomes its own squashfs layer, stacked over the base
layers in the order given; when any of them ships ``/lib/modules``, the kernel's modules and
theirs are indexed together (``depmod`` over the merged tree, :func:`merge_module_index`) and
only the ``modules.*`` index files form one more layer, named ``modules.dep`` as Talos names it.
``/etc/extensions.yaml`` (:func:`extensions_yaml`, Talos's ``layers: [{image, metadata}]``)
records them; machined publishes it as ``ExtensionStatuses``.

This module reads and checks inputs and fills layer trees; squashing and stacking are the
builder's (:mod:`._build`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ichor.imager import InputError
from ichor.images import (
    ImageError,
    Reference,
    SourceKind,
    extract_archive,
    open_layout,
    parse_reference,
    pull,
    registry_host,
    split_path_tag,
    unpack_image,
)
from ichor.machinery import proc, yamlio
from ichor.machinery.errors import ExtensionError, MachineryError, ProcessError
from ichor.machinery.extensions import (
    ALLOWED_PATHS,
    SERVICE_SPECS_DIR,
    ExtensionMetadata,
    SystemExtension,
    load_extension,
)
from ichor.machinery.yamlio import dump_document, from_plain

__all__ = [
    "EXTENSIONS_YAML",
    "ImageExtension",
    "Source",
    "SourceKind",
    "extensions_yaml",
    "full_digest",
    "load_image_extensions",
    "merge_module_index",
    "modules_dep_metadata",
    "parse_source",
    "ships_services",
]

FLAG = "--system-extension-image"
EXTENSIONS_YAML = "etc/extensions.yaml"
"""Where the image records its extensions (machined reads ``/etc/extensions.yaml``)."""
_SOURCES_HINT = (
    f"pass {FLAG} a directory (manifest.yaml + rootfs/), an OCI image layout (oci:<dir>[:<tag>]) "
    "an OCI archive (oci-archive:<file>[:<tag>]) or an image in a local registry (127.0.0.1:5000/<repository>:<tag>)"
)
_LAYOUT_HINT = "a system extension holds manifest.yaml and rootfs/ (Talos's layout)"


@dataclass(frozen=True)
class Source:
    given: str
    kind: SourceKind
    path: Path
    tag: str | None = None
    reference: Reference | None = None


@dataclass(frozen=True)
class ImageExtension:
    """One checked extension: where its files are, what the user called it, its layer's name."""

    given: str
    extension: SystemExtension
    layer: str
    """The layer's file name under ``layers/`` (also ``image`` in ``/etc/extensions.yaml``)."""

    @property
    def metadata(self) -> ExtensionMetadata:
        return self.extension.metadata

    @property
    def rootfs(self) -> Path:
        return self.extension.rootfs


def parse_source(given: str) -> Source:
    """Tell a ``--system-extension-image`` value's kind; a missing path or a registry is refused."""
    if given.startswith("oci:"):
        path, tag = split_path_tag(given.removeprefix("oci:"), want_dir=True)
        return Source(given, SourceKind.LAYOUT, path, tag)
    if given.startswith("oci-archive:"):
        path, tag = split_path_tag(given.removeprefix("oci-archive:"), want_dir=False)
        if not path.is_file():
            raise InputError(f"{FLAG} {given}: {path} is not a file", hint=_SOURCES_HINT)
        return Source(given, SourceKind.ARCHIVE, path, tag)
    plain = Path(given).expanduser()
    if plain.is_dir():
        kind = SourceKind.LAYOUT if (plain / "oci-layout").is_file() else SourceKind.DIRECTORY
        return Source(given, kind, plain.resolve())
    if plain.exists():
        raise InputError(f"{FLAG} {given}: not a directory", hint=_SOURCES_HINT)
    first, slash, _ = given.removeprefix("docker://").partition("/")
    looks_remote = (
        slash and first not in (".", "..") and ("." in first or ":" in first or first == "localhost")
    )
    if given.startswith("docker://") or looks_remote:
        try:
            reference = parse_reference(given.removeprefix("docker://"), what=FLAG)
        except ImageError as exc:
            raise InputError(f"{FLAG} {given}: {exc}", hint=exc.hint or _SOURCES_HINT) from None
        if not _local_registry(reference.registry):
            raise InputError(
                f"{FLAG} {given}: registry {reference.registry} is not on this machine or a private network; "
                "the imager pulls only from a loopback, localhost or private address",
                hint="push the image to a local registry (skopeo copy ... docker://127.0.0.1:5000/<repository>:<tag>) "
                "or pass it as a layout (oci:<dir>:<tag>) or archive (oci-archive:<file>)",
            )
        return Source(given, SourceKind.REGISTRY, plain, reference.tag, reference)
    raise InputError(f"{FLAG} {given}: no such directory", hint=_SOURCES_HINT)


def _local_registry(registry: str) -> bool:
    host = registry_host(registry)
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or (address.is_private and not address.is_link_local)


def _unpack(source: Source, target: Path, scratch: Path) -> Path:
    """The extension's directory: ``source.path`` itself, or the image unpacked into ``target``."""
    try:
        if source.kind is SourceKind.DIRECTORY:
            return source.path
        if source.kind is SourceKind.LAYOUT:
            unpack_image(source.path, target, tag=source.tag)
        elif source.kind is SourceKind.REGISTRY:
            assert source.reference is not None
            pull(source.reference, scratch)
            unpack_image(scratch, target, tag=source.reference.tag)
            shutil.rmtree(scratch)
        else:
            extract_archive(source.path, scratch)
            open_layout(scratch, source.tag)
            unpack_image(scratch, target, tag=source.tag)
            shutil.rmtree(scratch)
    except (ImageError, ProcessError) as exc:
        raise InputError(f"{FLAG} {source.given}: {exc}", hint=exc.hint or _SOURCES_HINT) from None
    if not (target / "manifest.yaml").is_file():
        raise InputError(
            f"{FLAG} {source.given}: the image has no manifest.yaml at its root, so it is not a system extension",
            hint="a Talos extension image holds manifest.yaml and rootfs/ at its root",
        )
    return target


def _name_in(directory: Path) -> str:
    """The manifest's ``metadata.name`` if it can be read at all (for naming a refusal), else ``""``."""
    try:
        docs = yamlio.load_documents((directory / "manifest.yaml").read_bytes(), source="manifest.yaml")
        raw = yamlio.to_plain(docs[0]) if docs else None
    except (OSError, MachineryError):
        return ""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _allowed(item: str) -> bool:
    return any(item == p or item.startswith(p.rstrip("/") + "/") for p in ALLOWED_PATHS)


def _check_image_rules(rootfs: Path, kernel_release: str) -> None:
    """Talos's rules for images beyond :func:`load_extension`'s: symlinks under allowed paths, and
    modules only for the image's kernel."""
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for entry in [*dirnames, *filenames]:
            full = Path(dirpath, entry)
            item = "/" + full.relative_to(rootfs).as_posix()
            if full.is_symlink() and not _allowed(item):
                raise ExtensionError(f'path "{item}" is not allowed in extensions',
                                     hint="files may live under " + ", ".join(ALLOWED_PATHS))  # fmt: skip
    modules = rootfs / "lib/modules"
    if modules.is_dir():
        for release in sorted(p.name for p in modules.iterdir()):
            if release != kernel_release:
                raise ExtensionError(
                    f"it ships kernel modules for {release} (/lib/modules/{release}), the image's kernel is {kernel_release}",
                    hint=f"build the modules against the image's kernel ({kernel_release}) and put them in /lib/modules/{kernel_release}",
                )


def _layer_name(index: int, name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "extension"
    return f"30-ext-{index:03d}-{safe}.sqsh"


def load_image_extensions(values: Sequence[str], work: Path, *, kernel_release: str) -> list[ImageExtension]:
    """Unpack (into ``work``) and check every ``--system-extension-image``, in the order given."""
    loaded: list[ImageExtension] = []
    names: dict[str, str] = {}
    sources = [parse_source(value) for value in values]
    if sources:
        work.mkdir(parents=True, exist_ok=True)
    for index, source in enumerate(sources):
        directory = _unpack(source, work / f"{index:03d}", work / f"{index:03d}.layout")
        try:
            extension = load_extension(directory)
            _check_image_rules(extension.rootfs, kernel_release)
        except ExtensionError as exc:
            name = _name_in(directory)
            what = (
                f'error validating extension "{name}"'
                if name
                else f"error validating extension in {directory}"
            )
            raise InputError(f"{FLAG} {source.given}: {what}: {exc}", hint=exc.hint or _LAYOUT_HINT) from None
        name = extension.metadata.name
        if name in names:
            raise InputError(
                f'{FLAG} {source.given}: extension "{name}" is already given by {FLAG} {names[name]}',
                hint="give each extension once",
            )
        names[name] = source.given
        loaded.append(ImageExtension(source.given, extension, _layer_name(index, name)))
    return loaded


def ships_services(rootfs: Path) -> bool:
    """Whether an extension's root carries an extension service spec (``usr/local/etc/containers/*.yaml``,
    which machined runs in the system containerd)."""
    specs = rootfs / SERVICE_SPECS_DIR.lstrip("/")
    return specs.is_dir() and any(p.suffix == ".yaml" for p in specs.iterdir())


def modules_dep_metadata(kernel_release: str) -> ExtensionMetadata:
    """The metadata Talos gives its generated ``modules.dep`` extension."""
    return ExtensionMetadata(
        name="modules.dep", version=kernel_release, author="Talos Machinery",
        description="Combined modules.dep for all extensions",
    )  # fmt: skip


def extensions_yaml(layers: Sequence[tuple[str, ExtensionMetadata]]) -> str:
    """``/etc/extensions.yaml`` as Talos writes it: ``layers: [{image, metadata}]`` in stacking order."""
    return dump_document(
        from_plain({"layers": [{"image": image, "metadata": meta.to_yaml()} for image, meta in layers]})
    )


def merge_module_index(
    base_layer: Path, extensions: Sequence[ImageExtension], kernel_release: str, tree: Path, work: Path
) -> None:
    """Talos's kernel-modules layer: the base layer's ``/lib/modules/<release>`` with every
    extension's modules copied over it (later over earlier), indexed by ``depmod``; only the
    ``modules.*`` files go into ``tree``. Extension modules are appended to ``modules.order`` in
    name order first, so depmod's output does not depend on directory order."""
    merged = work / "merged"
    proc.run(
        ["unsquashfs", "-no-progress", "-quiet", "-d", str(merged), str(base_layer), f"lib/modules/{kernel_release}"],
        timeout=600, hint="install squashfs-tools",
    )  # fmt: skip
    moddir = merged / "lib/modules" / kernel_release
    if not moddir.is_dir():
        raise InputError(f"the base layer has no /lib/modules/{kernel_release}")
    added: list[str] = []
    for ext in extensions:
        source = ext.rootfs / "lib/modules" / kernel_release
        if not source.is_dir():
            continue
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source).as_posix()
            if path.is_dir() and not path.is_symlink():
                (moddir / relative).mkdir(parents=True, exist_ok=True)
                continue
            (moddir / relative).unlink(missing_ok=True)
            shutil.copy(path, moddir / relative, follow_symlinks=False)
            if relative.endswith((".ko", ".ko.xz", ".ko.zst", ".ko.gz")):
                added.append(relative)
    order_file = moddir / "modules.order"
    order = order_file.read_text().splitlines() if order_file.exists() else []
    known = set(order)
    order += sorted(m for m in set(added) if m not in known)
    order_file.write_text("".join(line + "\n" for line in order))
    proc.run(["depmod", "--all", "--basedir", str(merged), kernel_release], timeout=300, hint="install kmod")
    target = tree / "lib/modules" / kernel_release
    target.mkdir(parents=True)
    for entry in sorted(moddir.iterdir()):
        if entry.name.startswith("modules.") and entry.is_file():
            shutil.copyfile(entry, target / entry.name)
            os.chmod(target / entry.name, 0o644)


def full_digest(root: Path) -> str:
    """sha256 over every entry under ``root``: name, type, permission bits, link target, bytes.

    A layer copied from ``root`` depends on exactly these (mksquashfs runs with ``-all-root`` and
    ``-all-time 0``), so this is its cache key."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        name = PurePosixPath(path.relative_to(root).as_posix())
        digest.update(f"{name}\0{stat.S_IFMT(info.st_mode):o}\0{stat.S_IMODE(info.st_mode):o}\0".encode())
        if stat.S_ISLNK(info.st_mode):
            digest.update(os.readlink(path).encode() + b"\0")
        elif stat.S_ISREG(info.st_mode):
            with path.open("rb") as f:
                digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()
