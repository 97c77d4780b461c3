"""Build an OCI image layout from a directory: one gzip tar layer, a config, a manifest, an index.

The image is reproducible: the same directory gives the same digest every time and on every
machine with the same zlib. Every entry has mtime 0, uid/gid 0 and no user or group names, entries
come in sorted order, the gzip header carries no name and mtime 0, and the config has no
``created`` time. That is why this is Python rather than ``umoci``: ``umoci repack`` records each
file's real mtime and owner and stamps ``created`` with the time of the build, so its digests
change with every run, and it needs an unpacked runtime bundle as input where a plain directory is
what tests have (a busybox-static rootfs).

Symbolic links are stored as links and never followed, so a link pointing outside the directory
(``etc/passwd -> /etc/passwd``) cannot pull the host's file into the image: inside a container it
resolves against the image's own root. Devices, sockets and FIFOs are refused, and so is a tree over
``max_bytes`` of file content. This module never writes outside the output directory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ichor.images._errors import ImageError
from ichor.images._reference import _TAG

__all__ = [
    "DEFAULT_MAX_BYTES",
    "BuiltImage",
    "ImageSpec",
    "build_layout",
    "busybox_rootfs",
]

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
"""The most file content one image may hold (uncompressed)."""
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class ImageSpec:
    """What the image runs: the OCI config's ``Entrypoint``, ``Cmd``, ``Env`` and ``WorkingDir``."""

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    working_dir: str = "/"
    labels: Mapping[str, str] = field(default_factory=dict)
    architecture: str = "amd64"


@dataclass(frozen=True)
class BuiltImage:
    layout: Path
    tag: str
    manifest_digest: str
    config_digest: str
    layer_digest: str
    layer_size: int
    content_bytes: int
    """File content in the layer (uncompressed)."""


def _blob(layout: Path, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest.removeprefix("sha256:")
    path.write_bytes(data)
    return digest, len(data)


def _entries(root: Path, max_bytes: int) -> list[tuple[str, Path, os.stat_result]]:
    """Every path under ``root`` (itself excluded), sorted, lstat'ed: links are not followed."""
    found: list[tuple[str, Path, os.stat_result]] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = path.lstat()
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                raise ImageError(
                    f"{path} is not a file, directory or symbolic link (devices, sockets and FIFOs are not packed)",
                    hint="remove it from the image's directory",
                )
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
                if total > max_bytes:
                    raise ImageError(
                        f"{root} holds over {max_bytes} bytes of files, the image size limit",
                        hint="pack a smaller directory, or raise max_bytes",
                    )
            found.append((path.relative_to(root).as_posix(), path, info))
    return sorted(found, key=lambda e: e[0])


def _layer(root: Path, max_bytes: int) -> tuple[bytes, bytes, int]:
    """The uncompressed tar, its gzip, and the bytes of file content."""
    raw = io.BytesIO()
    content = 0
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path, info in _entries(root, max_bytes):
            entry = tarfile.TarInfo(name)
            entry.mtime, entry.uid, entry.gid, entry.uname, entry.gname = 0, 0, 0, "", ""
            entry.mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISDIR(info.st_mode):
                entry.type = tarfile.DIRTYPE
                tar.addfile(entry)
            elif stat.S_ISLNK(info.st_mode):
                entry.type, entry.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(entry)
            else:
                with path.open("rb") as f:
                    data = f.read(max_bytes + 1)
                content += len(data)
                if content > max_bytes:  # the file grew since it was listed
                    raise ImageError(f"{path} grew past the image size limit while packing", hint="retry")
                entry.size = len(data)
                tar.addfile(entry, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return raw.getvalue(), packed.getvalue(), content


def _canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def build_layout(
    source: Path, layout: Path, *, tag: str, spec: ImageSpec, max_bytes: int = DEFAULT_MAX_BYTES
) -> BuiltImage:
    """Pack ``source`` into a fresh OCI image layout at ``layout`` (replaced if it exists), the
    image named ``tag`` in ``index.json`` (skopeo's ``oci:<layout>:<tag>``)."""
    if not _TAG.fullmatch(tag):
        raise ImageError(f"image tag {tag!r} is not a tag", hint="a tag is up to 128 of [A-Za-z0-9_.-]")
    if not source.is_dir() or source.is_symlink():
        raise ImageError(
            f"{source} is not a directory", hint="name the directory the image's root is built from"
        )
    uncompressed, compressed, content = _layer(source, max_bytes)
    if layout.exists():
        shutil.rmtree(layout)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    layer_digest, layer_size = _blob(layout, compressed)
    image_config: dict[str, Any] = {"Env": list(spec.env), "WorkingDir": spec.working_dir}
    if spec.entrypoint:
        image_config["Entrypoint"] = list(spec.entrypoint)
    if spec.cmd:
        image_config["Cmd"] = list(spec.cmd)
    if spec.labels:
        image_config["Labels"] = dict(spec.labels)
    config = {
        "architecture": spec.architecture,
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(uncompressed).hexdigest()]},
        "history": [{"created_by": "ichor.images.build_layout", "comment": "one layer from a directory"}],
    }
    config_digest, config_size = _blob(layout, _canonical(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": layer_size}],
    }
    manifest_digest, manifest_size = _blob(layout, _canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": MANIFEST_TYPE, "digest": manifest_digest, "size": manifest_size,
                       "annotations": {REF_NAME: tag}}],
    }  # fmt: skip
    (layout / "index.json").write_bytes(_canonical(index))
    return BuiltImage(layout, tag, manifest_digest, config_digest, layer_digest, layer_size, content)


def busybox_rootfs(target: Path, applets: Sequence[str] = ("sh", "httpd", "wget", "echo", "sleep", "cat", "ls"),
                   busybox: Path = Path("/bin/busybox")) -> Path:  # fmt: skip
    """A minimal root: ``bin/busybox`` (a copy of the static binary) and a link per applet to it."""
    if not busybox.is_file():
        raise ImageError(
            f"{busybox} (a static busybox) is not installed",
            hint="install it (Debian: `apt-get install -y busybox-static`; `bash run.sh` does it as root)",
        )
    (target / "bin").mkdir(parents=True, exist_ok=True)
    for directory in ("etc", "tmp", "var/www"):
        (target / directory).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(busybox, target / "bin" / "busybox")
    (target / "bin" / "busybox").chmod(0o755)
    for applet in applets:
        link = target / "bin" / applet
        if not link.is_symlink():
            link.symlink_to("busybox")
    return target
