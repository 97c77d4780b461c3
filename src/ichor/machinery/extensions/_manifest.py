"""System extensions as Talos lays them out: a directory with ``manifest.yaml`` and ``rootfs/``.

``manifest.yaml``::

    version: v1alpha1
    metadata:
      name: hello
      version: 1.0.0
      author: Someone
      description: What it adds
      compatibility:
        talos:
          version: ">= v1.7.0"

Talos's checks and texts are kept: nothing but ``manifest.yaml`` and ``rootfs`` in the directory
(``unexpected file``), ``extension manifest is missing``, ``extension rootfs is missing``,
``unsupported manifest version``, the Talos version constraint, and the contents rules (no
world-writeable files, no special files, regular files only under Talos's allowed paths). Ichor adds
one: no symlink in ``rootfs`` may point out of it through ``..``, and ``manifest.yaml``/``rootfs``
must not be symlinks themselves.

This module reads a directory and answers; layering the rootfs into a node is the provisioner's.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from ichor.machinery import TALOS_VERSION, yamlio
from ichor.machinery.errors import ExtensionError, YAMLError
from ichor.machinery.limits import InputLimits

__all__ = [
    "ALLOWED_PATHS",
    "ExtensionMetadata",
    "SystemExtension",
    "load_extension",
    "version_satisfies",
]

ALLOWED_PATHS = (
    "/etc/cri/conf.d", "/lib/firmware", "/lib/modules", "/lib64/ld-linux-x86-64.so.2", "/sbin/ldconfig",
    "/usr/lib/udev/rules.d", "/usr/local", "/usr/share/glvnd", "/usr/share/egl", "/etc/vulkan",
)  # fmt: skip
"""Where an extension may put files (Talos 1.7)."""
_MANIFEST_LIMITS = InputLimits(max_bytes=64 * 1024, max_nodes=2_000, max_aliases=50, max_depth=8)
_MAX_ENTRIES = 200_000
_COMPARATOR = re.compile(r"^(>=|<=|!=|==|=|>|<)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?$")
_LAYOUT_HINT = "a system extension is a directory holding manifest.yaml and rootfs/ (Talos's layout)"


@dataclasses.dataclass(frozen=True)
class ExtensionMetadata:
    """``metadata`` of the manifest, with Talos's YAML keys (``talosctl get extensions -o yaml``)."""

    name: str
    version: str
    author: str = ""
    description: str = ""
    compatibility: str = ""
    """``compatibility.talos.version``: a constraint such as ``>= v1.7.0``."""

    def to_yaml(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "author": self.author,
            "description": self.description,
            "compatibility": {"talos": {"version": self.compatibility}},
        }


@dataclasses.dataclass(frozen=True)
class SystemExtension:
    directory: Path
    metadata: ExtensionMetadata

    @property
    def rootfs(self) -> Path:
        return self.directory / "rootfs"


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    m = _COMPARATOR.match(text.strip())
    if m is None or m.group(1):
        return None
    return int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0)


def version_satisfies(constraint: str, version: str = TALOS_VERSION) -> bool:
    """Does ``version`` meet a blang/semver range (``>= v1.7.0 < v1.8.0``, ``||`` between alternatives)?

    Raises ValueError for a constraint that is not one.
    """
    current = _version_tuple(version)
    if current is None:
        raise ValueError(f"{version!r} is not a version")
    for alternative in constraint.split("||"):
        ok = True
        terms = re.findall(r"(?:>=|<=|!=|==|=|>|<)?\s*v?\d[^\s|]*", alternative)
        if not terms or "".join(terms).replace(" ", "") != alternative.replace(" ", ""):
            raise ValueError(f"cannot parse {alternative.strip()!r}")
        for term in terms:
            m = _COMPARATOR.match(term.strip())
            if m is None:
                raise ValueError(f"cannot parse {term.strip()!r}")
            op = m.group(1) or "="
            want = (int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0))
            ok = ok and {
                ">=": current >= want, "<=": current <= want, ">": current > want, "<": current < want,
                "=": current == want, "==": current == want, "!=": current != want,
            }[op]  # fmt: skip
        if ok:
            return True
    return False


def _text(body: dict[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if isinstance(value, dict | list | bool):
        raise ExtensionError(
            f"{where}.{key}: expected a string, got {type(value).__name__}", hint=_LAYOUT_HINT
        )
    return str(value)


def _read_manifest(path: Path) -> ExtensionMetadata:
    if path.is_symlink() or not path.is_file():
        raise ExtensionError(f"{path}: manifest.yaml must be a regular file", hint=_LAYOUT_HINT)
    try:
        docs = yamlio.load_documents(path.read_bytes(), source=str(path), limits=_MANIFEST_LIMITS)
    except YAMLError as exc:
        raise ExtensionError(str(exc), hint=exc.hint or "fix the YAML of manifest.yaml") from None
    raw = yamlio.to_plain(docs[0]) if docs else None
    if not isinstance(raw, dict):
        raise ExtensionError(f"{path}: expected a mapping with version and metadata", hint=_LAYOUT_HINT)
    version = _text(raw, "version", "manifest")
    if version != "v1alpha1":
        raise ExtensionError(f"{path}: unsupported manifest version: {version!r}".replace("'", '"'),
                             hint="set `version: v1alpha1`")  # fmt: skip
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise ExtensionError(f"{path}: metadata is missing", hint="add `metadata:` with name and version")
    compat = meta.get("compatibility") or {}
    talos = compat.get("talos") if isinstance(compat, dict) else None
    constraint = _text(talos, "version", "metadata.compatibility.talos") if isinstance(talos, dict) else ""
    metadata = ExtensionMetadata(
        name=_text(meta, "name", "metadata"),
        version=_text(meta, "version", "metadata"),
        author=_text(meta, "author", "metadata"),
        description=_text(meta, "description", "metadata"),
        compatibility=constraint,
    )
    if not metadata.name or not metadata.version:
        raise ExtensionError(f"{path}: metadata.name and metadata.version are required",
                             hint="name the extension and give its version")  # fmt: skip
    return metadata


def _check_contents(rootfs: Path) -> None:
    count = 0
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for entry in [*dirnames, *filenames]:
            count += 1
            if count > _MAX_ENTRIES:
                raise ExtensionError(
                    f"{rootfs}: more than {_MAX_ENTRIES:,} files", hint="split the extension"
                )
            full = Path(dirpath, entry)
            item = "/" + full.relative_to(rootfs).as_posix()
            info = full.lstat()
            if info.st_mode & 0o002 and not stat.S_ISLNK(info.st_mode):
                raise ExtensionError(f"world-writeable files are not allowed: {item!r}".replace("'", '"'),
                                     hint=f"chmod o-w {full}")  # fmt: skip
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(full)
                if not target.startswith("/"):
                    resolved = os.path.normpath(PurePosixPath(item).parent.relative_to("/") / target)
                    if resolved == ".." or resolved.startswith("../"):
                        raise ExtensionError(f"symlink {item} -> {target} points out of the extension's rootfs",
                                             hint="make the link point inside rootfs/")  # fmt: skip
                continue
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise ExtensionError(f"special files are not allowed: {item!r}".replace("'", '"'),
                                     hint="an extension holds regular files, directories and symlinks only")  # fmt: skip
            if not any(item == p or item.startswith(p.rstrip("/") + "/") for p in ALLOWED_PATHS):
                raise ExtensionError(f"path {item!r} is not allowed in extensions".replace("'", '"'),
                                     hint="files may live under " + ", ".join(ALLOWED_PATHS))  # fmt: skip


def load_extension(directory: Path, *, talos_version: str = TALOS_VERSION) -> SystemExtension:
    """Read and check one extension directory; raises :class:`ExtensionError` naming the problem."""
    if not directory.is_dir():
        what = "does not exist" if not directory.exists() else "is not a directory"
        raise ExtensionError(f"{directory} {what}", hint=_LAYOUT_HINT)
    metadata: ExtensionMetadata | None = None
    has_rootfs = False
    for item in sorted(directory.iterdir()):
        if item.name == "manifest.yaml":
            metadata = _read_manifest(item)
        elif item.name == "rootfs":
            if item.is_symlink() or not item.is_dir():
                raise ExtensionError(
                    f"{item}: rootfs must be a directory, not a link or file", hint=_LAYOUT_HINT
                )
            has_rootfs = True
        else:
            raise ExtensionError(
                f"{directory}: unexpected file {item.name!r}".replace("'", '"'), hint=_LAYOUT_HINT
            )
    if metadata is None:
        raise ExtensionError(f"{directory}: extension manifest is missing", hint=_LAYOUT_HINT)
    if not has_rootfs:
        raise ExtensionError(f"{directory}: extension rootfs is missing", hint=_LAYOUT_HINT)
    if metadata.compatibility:
        try:
            ok = version_satisfies(metadata.compatibility, talos_version)
        except ValueError as exc:
            raise ExtensionError(f"{directory}: error parsing Talos version constraint: {exc}",
                                 hint="write it as blang/semver does, e.g. `>= v1.7.0`") from None  # fmt: skip
        if not ok:
            raise ExtensionError(
                f"{directory}: version constraint {metadata.compatibility} can't be satisfied with Talos version {talos_version}",
                hint="use a build of the extension made for Talos 1.7",
            )
    _check_contents(directory / "rootfs")
    return SystemExtension(directory=directory, metadata=metadata)
