"""The ``installer`` profile: an OCI image archive (``installer-amd64.tar``) for install and upgrade.

Talos's installer image holds its installer binary and ``/usr/install/<arch>/`` (kernel, initramfs,
bootloader assets); machined runs it as a container to install or upgrade a disk. Ichor's image is
the OS's own root filesystem plus those assets, so the new version lays out the disk with its own
code: one layer per squashfs layer of the OS (base, pydeps, ichor: unpacked with ``unsquashfs``, in
the order the node overlays them), then a layer with ``/usr/install/amd64/{vmlinuz, initramfs.xz,
grub/BOOTX64.EFI, grub/core.img, grub/boot.img}`` (what ``python -m ichor.installer install`` reads by
default). The entry point is ``python3.11 -m ichor.installer``. Layers are gzip'd tars (level 1:
their content is mostly squashfs-sized Python and binaries; a registry push with skopeo would
compress an uncompressed layer itself and change the manifest's digest), every entry
root-owned with mtime 0, the config without a ``created`` time, so the same inputs give the same
digests. The archive is an ``oci-archive`` (a tar of an image layout, tagged with the Talos version):
:func:`open_installer_archive` unpacks it into a layout that :func:`ichor.images.push` copies to a
registry.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ichor.imager import InputError
from ichor.imager._inputs import sha256_file
from ichor.images import BuiltImage, extract_archive
from ichor.installer._grub_images import GrubImages
from ichor.machinery import proc

__all__ = ["INSTALL_DIR", "make_installer_image", "open_installer_archive"]

INSTALL_DIR = "usr/install/amd64"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
ENTRYPOINT = ("/usr/bin/python3.11", "-I", "-m", "ichor.installer")


def _canonical(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _tar_tree(root: Path, target: Path) -> None:
    """An uncompressed tar of everything under ``root``: sorted, root-owned, mtime 0, links kept."""
    with tarfile.open(target, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
            info = path.lstat()
            entry = tarfile.TarInfo(path.relative_to(root).as_posix())
            entry.mtime, entry.uid, entry.gid, entry.uname, entry.gname = 0, 0, 0, "", ""
            entry.mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISDIR(info.st_mode):
                entry.type = tarfile.DIRTYPE
                tar.addfile(entry)
            elif stat.S_ISLNK(info.st_mode):
                entry.type, entry.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(entry)
            elif stat.S_ISREG(info.st_mode):
                entry.size = info.st_size
                with path.open("rb") as f:
                    tar.addfile(entry, f)
            else:
                raise InputError(f"{path}: only files, directories and links go into the installer image")


def _gzip(source: Path) -> Path:
    """``source.gz``, no name and mtime 0 in the header (the same bytes every time), ``source`` removed."""
    target = source.with_name(source.name + ".gz")
    with (
        source.open("rb") as src,
        target.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as out,
    ):
        while chunk := src.read(1 << 20):
            out.write(chunk)
    source.unlink()
    return target


def _assets_tree(root: Path, kernel: Path, initramfs: Path, grub: GrubImages) -> Path:
    install = root / INSTALL_DIR
    (install / "grub").mkdir(parents=True)
    for source, name in ((kernel, "vmlinuz"), (initramfs, "initramfs.xz"), (grub.efi, "grub/BOOTX64.EFI"),
                         (grub.core, "grub/core.img"), (grub.boot, "grub/boot.img")):  # fmt: skip
        if not source.is_file():
            raise InputError(f"{source} does not exist or is not a file")
        _copy(source, install / name)
        (install / name).chmod(0o644)
    return root


def _copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)  # the same bytes without a copy when both are on one filesystem
        return
    except OSError:
        pass
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)


def make_installer_image(
    target: Path,
    *,
    kernel: Path,
    initramfs: Path,
    grub: GrubImages,
    layers: Sequence[Path],
    work: Path,
    version: str,
) -> None:
    """Write the installer's OCI archive to ``target``; ``layers`` are the OS's squashfs files, bottom first."""
    blobs = work / "layout" / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    trees: list[Path] = []
    for n, layer in enumerate(layers):
        tree = work / f"tree-{n}"
        proc.run(["unsquashfs", "-no-progress", "-quiet", "-d", str(tree), str(layer)], timeout=600,
                 hint="install squashfs-tools")  # fmt: skip
        trees.append(tree)
    trees.append(_assets_tree(work / "tree-assets", kernel, initramfs, grub))
    descriptors, diff_ids = [], []
    for n, tree in enumerate(trees):
        layer_tar = work / f"layer-{n}.tar"
        _tar_tree(tree, layer_tar)
        diff_ids.append(f"sha256:{sha256_file(layer_tar)}")
        packed = _gzip(layer_tar)
        digest = sha256_file(packed)
        size = packed.stat().st_size
        os.replace(packed, blobs / digest)
        descriptors.append({"mediaType": LAYER_TYPE, "digest": f"sha256:{digest}", "size": size})

    def blob(document: dict[str, Any]) -> dict[str, Any]:
        data = _canonical(document)
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    config = blob({
        "architecture": "amd64", "os": "linux",
        "config": {
            "Entrypoint": list(ENTRYPOINT), "WorkingDir": "/",
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Labels": {"org.opencontainers.image.title": "installer", "org.opencontainers.image.version": version},
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "ichor.imager installer", "comment": name}
                    for name in ("base", "pydeps", "ichor", "/usr/install/amd64")[: len(trees)]],
    })  # fmt: skip
    manifest = blob({"schemaVersion": 2, "mediaType": MANIFEST_TYPE,
                     "config": {"mediaType": CONFIG_TYPE, **config}, "layers": descriptors})  # fmt: skip
    layout = work / "layout"
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (layout / "index.json").write_bytes(_canonical({
        "schemaVersion": 2, "mediaType": INDEX_TYPE,
        "manifests": [{"mediaType": MANIFEST_TYPE, **manifest, "annotations": {REF_NAME: version}}],
    }))  # fmt: skip
    _tar_tree(layout, target)


def open_installer_archive(archive: Path, layout: Path) -> BuiltImage:
    """Unpack ``archive`` into the new directory ``layout``: an image :func:`ichor.images.push` can copy."""
    extract_archive(archive, layout, max_bytes=4 << 30)
    index = json.loads((layout / "index.json").read_text())
    (descriptor,) = index["manifests"]
    manifest = json.loads(
        (layout / "blobs" / "sha256" / descriptor["digest"].removeprefix("sha256:")).read_bytes()
    )
    content = sum(int(layer["size"]) for layer in manifest["layers"])
    return BuiltImage(
        layout=layout,
        tag=descriptor["annotations"][REF_NAME],
        manifest_digest=descriptor["digest"],
        config_digest=manifest["config"]["digest"],
        layer_digest=manifest["layers"][-1]["digest"],
        layer_size=int(manifest["layers"][-1]["size"]),
        content_bytes=content,
    )
