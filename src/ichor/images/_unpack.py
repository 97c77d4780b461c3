"""Reading an image someone else made: an OCI image layout (or an ``oci-archive`` tar of one) opened
by tag, its blobs checked against their digests, its layers unpacked into a plain directory.

Everything here is input from outside, so nothing is trusted and :mod:`tarfile`'s own extraction
is never used. An entry is written only when its path is relative, has no ``..`` and reaches its
place through real directories (never through a symbolic link an earlier entry made); a symbolic
link may not point out of the image's root, a hard link must name a file already unpacked, and
devices, FIFOs and sockets are refused. Whiteouts (``.wh.<name>``, ``.wh..wh..opq``) remove what
lower layers put there, as the OCI image spec says. The file content of one image is bounded by
``max_bytes`` and its entries by ``MAX_ENTRIES``. Nothing is written outside the target directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import posixpath
import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ichor.images._build import DEFAULT_MAX_BYTES, REF_NAME
from ichor.images._errors import ImageError

__all__ = ["MAX_ENTRIES", "extract_archive", "open_layout", "unpack_image"]

MAX_ENTRIES = 100_000
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
LAYERS = {
    "application/vnd.oci.image.layer.v1.tar": "r:",
    "application/vnd.oci.image.layer.v1.tar+gzip": "r:gz",
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "r:gz",
}
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
_JSON_LIMIT = 4 << 20


def _json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file() or path.stat().st_size > _JSON_LIMIT:
        raise ImageError(
            f"{what} is missing or over 4 MiB", hint="name an OCI image layout (skopeo's oci:<dir>)"
        )
    try:
        document = json.loads(path.read_bytes())
    except ValueError as exc:
        raise ImageError(
            f"{what} is not JSON ({exc})", hint="the image layout is damaged; build or copy it again"
        ) from None
    if not isinstance(document, dict):
        raise ImageError(
            f"{what} is not a JSON object", hint="the image layout is damaged; build or copy it again"
        )
    return document


def _blob_path(layout: Path, descriptor: Any, max_size: int) -> Path:
    """The blob a descriptor names, its size and sha256 checked."""
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    algorithm, _, hexdigest = str(digest).partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64 or not all(c in "0123456789abcdef" for c in hexdigest):
        raise ImageError(
            f"descriptor digest {digest!r} is not sha256:<64 hex digits>", hint="the image layout is damaged"
        )
    path = layout / "blobs" / "sha256" / hexdigest
    if path.is_symlink() or not path.is_file():
        raise ImageError(f"blob {digest} is missing from {layout}", hint="copy the whole image layout again")
    size = path.stat().st_size
    if size != descriptor.get("size") or size > max_size:
        raise ImageError(f"blob {digest} is {size} bytes, not the {descriptor.get('size')} its descriptor says (or over the limit)",
                         hint="the image layout is damaged or too big")  # fmt: skip
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    if sha.hexdigest() != hexdigest:
        raise ImageError(
            f"blob {digest} does not match its digest", hint="the image layout is damaged; copy it again"
        )
    return path


def open_layout(layout: Path, tag: str | None = None) -> list[tuple[str, Path]]:
    """The layers (media type, blob) of the image tagged ``tag`` in the layout (with no tag: its only
    image), for this machine's architecture when the tag names a multi-platform index."""
    if not (layout / "oci-layout").is_file():
        raise ImageError(f"{layout} is not an OCI image layout (it has no oci-layout file)",
                         hint="name a directory skopeo wrote (`skopeo copy ... oci:<dir>:<tag>`) or that ichor.images built")  # fmt: skip
    version = _json(layout / "oci-layout", f"{layout}/oci-layout").get("imageLayoutVersion")
    if version != "1.0.0":
        raise ImageError(
            f"{layout}: image layout version {version!r} is not 1.0.0",
            hint="copy the image with skopeo again",
        )
    manifests = _json(layout / "index.json", f"{layout}/index.json").get("manifests") or []
    tags = [str(m.get("annotations", {}).get(REF_NAME)) for m in manifests if isinstance(m, dict)]
    chosen = [
        m
        for m in manifests
        if isinstance(m, dict) and (tag is None or m.get("annotations", {}).get(REF_NAME) == tag)
    ]
    if len(chosen) != 1:
        found = "no image" if not chosen else "more than one image"
        raise ImageError(f"{layout} holds {found} tagged {tag!r} (tags: {', '.join(tags) or 'none'})",
                         hint="name one image of the layout: oci:<dir>:<tag>")  # fmt: skip
    descriptor = chosen[0]
    if descriptor.get("mediaType") in INDEXES:
        index = _json(_blob_path(layout, descriptor, _JSON_LIMIT), f"index {descriptor.get('digest')}")
        fits = [m for m in index.get("manifests") or [] if isinstance(m, dict)
                and m.get("platform", {}).get("os") == "linux" and m.get("platform", {}).get("architecture") == _ARCH]  # fmt: skip
        if not fits:
            raise ImageError(
                f"{layout}: the image has no linux/{_ARCH} manifest",
                hint=f"build the image for linux/{_ARCH}",
            )
        descriptor = fits[0]
    if descriptor.get("mediaType") not in (OCI_MANIFEST, DOCKER_MANIFEST):
        raise ImageError(f"{layout}: media type {descriptor.get('mediaType')!r} is not an image manifest",
                         hint=f"an image's descriptor in index.json is {OCI_MANIFEST}")  # fmt: skip
    manifest = _json(_blob_path(layout, descriptor, _JSON_LIMIT), f"manifest {descriptor.get('digest')}")
    layers: list[tuple[str, Path]] = []
    for layer in manifest.get("layers") or []:
        media_type = layer.get("mediaType") if isinstance(layer, dict) else None
        if media_type not in LAYERS:
            raise ImageError(f"{layout}: layer media type {media_type!r} cannot be unpacked",
                             hint=f"build the image with tar or tar+gzip layers ({', '.join(LAYERS)})")  # fmt: skip
        layers.append((str(media_type), _blob_path(layout, layer, DEFAULT_MAX_BYTES)))
    return layers


class _Extractor:
    """Writes tar entries under ``root``; one instance per image, so the size bound spans its layers."""

    def __init__(self, root: Path, max_bytes: int, *, whiteouts: bool) -> None:
        self.root, self.max_bytes, self.whiteouts = root, max_bytes, whiteouts
        self.content = self.entries = 0
        self.layer_paths: set[str] = set()

    def _name(self, name: str, what: str = "entry") -> str:
        clean = posixpath.normpath(name.removeprefix("./")) if name not in ("", ".", "./") else "."
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or clean.startswith("..") or "\0" in name:
            raise ImageError(f"{what} {name!r} is absolute or climbs out with '..'",
                             hint="the image is unsafe: an entry must stay under the image's root")  # fmt: skip
        return clean

    def _place(self, name: str) -> Path:
        """The path for ``name`` under the root, each parent a real directory (made when missing)."""
        path = self.root
        for part in name.split("/")[:-1]:
            path = path / part
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                raise ImageError(f"entry {name!r} reaches its place through {part!r}, which is not a directory",
                                 hint="the image is unsafe: no entry may be written through a symbolic link")  # fmt: skip
            if not path.exists():
                path.mkdir(mode=0o755)
        return path / name.split("/")[-1]

    @staticmethod
    def _remove(path: Path) -> None:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)

    def _whiteout(self, name: str) -> bool:
        directory, base = posixpath.split(name)
        if not base.startswith(".wh."):
            return False
        if not self.whiteouts:
            raise ImageError(
                f"entry {name!r} is a whiteout, which has no place here",
                hint="the archive is not an image layout",
            )
        target = self._place(name).parent
        if base == ".wh..wh..opq":
            for child in list(target.iterdir()):
                if posixpath.join(directory, child.name) not in self.layer_paths:
                    self._remove(child)
        elif base.removeprefix(".wh.") in ("", ".", ".."):
            raise ImageError(f"whiteout {name!r} names no entry", hint="the image is damaged")
        else:
            self._remove(target / base.removeprefix(".wh."))
        return True

    def _link_escapes(self, name: str, target: str) -> bool:
        if target.startswith("/"):
            return False  # absolute: resolved against the image's own root where it is used
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        return resolved == ".." or resolved.startswith("../")

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise ImageError(
                f"the image has over {MAX_ENTRIES} entries", hint="the image is too big to unpack"
            )
        name = self._name(member.name)
        if name == "." or self._whiteout(name):
            return
        if not (member.isdir() or member.isreg() or member.issym() or member.islnk()):
            raise ImageError(f"entry {name!r} is a device, FIFO or socket, which is not unpacked",
                             hint="the image is unsafe: an image for --extension holds files, directories and links only")  # fmt: skip
        path = self._place(name)
        self.layer_paths.add(name)
        mode = stat.S_IMODE(member.mode) & 0o777
        if member.isdir():
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                self._remove(path)
            path.mkdir(mode=0o755, exist_ok=True)
            path.chmod(mode | 0o700)
            return
        self._remove(path)
        if member.issym():
            if self._link_escapes(name, member.linkname):
                raise ImageError(f"symbolic link {name!r} -> {member.linkname!r} points out of the image's root",
                                 hint="the image is unsafe: a relative link must stay under the image's root")  # fmt: skip
            path.symlink_to(member.linkname)
        elif member.islnk():
            source = self._place(self._name(member.linkname, "hard link target"))
            if source.is_symlink() or not source.is_file():
                raise ImageError(f"hard link {name!r} names {member.linkname!r}, which is not a file unpacked before it",
                                 hint="the image is unsafe or damaged")  # fmt: skip
            os.link(source, path, follow_symlinks=False)
        else:
            self.content += member.size
            if self.content > self.max_bytes:
                raise ImageError(f"the image holds over {self.max_bytes} bytes of files, the unpack limit",
                                 hint="use a smaller image")  # fmt: skip
            data = tar.extractfile(member)
            assert data is not None
            self._write(path, data, mode)

    @staticmethod
    def _write(path: Path, data: IO[bytes], mode: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(data, out, 1 << 20)
        os.chmod(path, mode)


def _members(tar: tarfile.TarFile, source: Path) -> Iterator[tarfile.TarInfo]:
    try:
        yield from tar
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ImageError(
            f"{source} is not a readable tar ({exc})", hint="the image is damaged; copy it again"
        ) from None


def _extract(tar_path: Path, mode: str, extractor: _Extractor) -> None:
    try:
        tar = tarfile.open(tar_path, mode)  # type: ignore[call-overload]  # noqa: SIM115 (closed by the with below)
    except (tarfile.TarError, OSError) as exc:
        raise ImageError(
            f"{tar_path} is not a readable tar ({exc})", hint="the image is damaged; copy it again"
        ) from None
    with tar:
        extractor.layer_paths = set()
        for member in _members(tar, tar_path):
            extractor.add(tar, member)


def _fresh(target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise ImageError(f"{target} already exists", hint="unpack into a new directory")
    target.mkdir(parents=True, mode=0o755)


def unpack_image(
    layout: Path, target: Path, *, tag: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Path:
    """Unpack the image tagged ``tag`` of ``layout`` into the new directory ``target``, layer by layer."""
    layers = open_layout(layout, tag)
    _fresh(target)
    extractor = _Extractor(target, max_bytes, whiteouts=True)
    for media_type, blob in layers:
        _extract(blob, LAYERS[media_type], extractor)
    return target


def extract_archive(archive: Path, target: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Unpack an ``oci-archive`` (a tar of an image layout) into the new directory ``target``."""
    if not archive.is_file():
        raise ImageError(f"{archive} is not a file", hint="name an OCI archive: oci-archive:<file>")
    _fresh(target)
    _extract(archive, "r:*", _Extractor(target, max_bytes, whiteouts=False))
    return target
