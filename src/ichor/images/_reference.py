"""Image references and ``--registry-mirror`` values, checked before anything uses them.

A reference is Docker's: ``[registry/]repository[:tag]``; a name with no registry is Docker Hub's
(``busybox:1.36`` is ``docker.io/library/busybox:1.36``). As the Air-gapped guide says, a registry
mirror holds an image under its repository alone, without the registry's name: the mirror for
``docker.io`` serves ``docker.io/library/busybox:1.36`` as ``library/busybox:1.36``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from ichor.images._errors import ImageError

__all__ = [
    "DOCKER_HUB",
    "MirrorSpec",
    "Reference",
    "SourceKind",
    "parse_mirror",
    "parse_reference",
    "registry_host",
    "split_path_tag",
]

DOCKER_HUB = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_HOST = re.compile(
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?\.?)+(?::[0-9]{1,5})?|\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?"
)
_EXAMPLE = "docker.io/library/busybox:1.36"


@dataclass(frozen=True)
class Reference:
    registry: str
    repository: str
    tag: str

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}:{self.tag}"


def _is_registry(component: str) -> bool:
    # Docker's rule: the first component names a registry when it has a dot or a port, or is localhost.
    return "." in component or ":" in component or component == "localhost"


def parse_reference(text: str, *, what: str = "image reference") -> Reference:
    """``[registry/]repository[:tag]`` (no digest); the tag defaults to ``latest``."""
    registry, rest = DOCKER_HUB, text
    first, slash, remainder = text.partition("/")
    if slash and _is_registry(first):
        registry, rest = first, remainder
        if not _HOST.fullmatch(registry):
            raise ImageError(
                f"{what} {text!r}: {registry!r} is not a registry host", hint=f"use e.g. {_EXAMPLE}"
            )
    if "@" in rest:
        raise ImageError(f"{what} {text!r} names a digest", hint=f"name a tag instead, e.g. {_EXAMPLE}")
    repository, colon, tag = rest.rpartition(":") if ":" in rest else (rest, "", "latest")
    if colon and not tag:
        raise ImageError(f"{what} {text!r} has an empty tag", hint=f"use e.g. {_EXAMPLE}")
    if not _REPOSITORY.fullmatch(repository) or len(repository) > 255:
        raise ImageError(
            f"{what} {text!r}: {repository!r} is not a repository name",
            hint="lowercase letters, digits and separators (. _ -) in /-separated parts, e.g. library/busybox",
        )
    if not _TAG.fullmatch(tag):
        raise ImageError(
            f"{what} {text!r}: {tag!r} is not a tag", hint="a tag is up to 128 of [A-Za-z0-9_.-], e.g. 1.36"
        )
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return Reference(registry, repository, tag)


@dataclass(frozen=True)
class MirrorSpec:
    """One ``--registry-mirror <registry host>=<mirror URL>``."""

    registry: str
    endpoint: str


def parse_mirror(text: str, *, flag: str = "--registry-mirror") -> MirrorSpec:
    """``<registry host>=<mirror URL>``: the host (``*`` for every registry) and an http(s) URL."""
    example = f"{flag} docker.io=http://10.5.0.1:5000"
    registry, equals, endpoint = text.partition("=")
    if not equals or not registry or not endpoint:
        raise ImageError(f"{flag} {text!r} is not <registry>=<endpoint>", hint=f"pass e.g. {example}")
    if registry != "*" and not _HOST.fullmatch(registry):
        raise ImageError(f"{flag} {text!r}: {registry!r} is not a registry host", hint=f"pass e.g. {example}")
    try:
        url = urlsplit(endpoint)
        port = url.port
    except ValueError as exc:
        raise ImageError(
            f"{flag} {text!r}: {endpoint!r} is not a URL ({exc})", hint=f"pass e.g. {example}"
        ) from None
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise ImageError(
            f"{flag} {text!r}: {endpoint!r} is not an http:// or https:// URL",
            hint=f"pass e.g. {example} (scheme, host and optional port)",
        )
    del port
    return MirrorSpec(registry, endpoint)


def split_path_tag(text: str, *, want_dir: bool) -> tuple[Path, str | None]:
    """``<path>[:<tag>]`` of ``oci:``/``oci-archive:`` values: the whole text when it names an
    existing directory (``want_dir``) or file, else split at the last ':'."""
    whole = Path(text).expanduser()
    exists = whole.is_dir() if want_dir else whole.is_file()
    if exists or ":" not in text:
        return whole.resolve(), None
    path, _, tag = text.rpartition(":")
    return Path(path).expanduser().resolve(), tag or None


class SourceKind(StrEnum):
    """What an image argument names (an extension for ``cluster create`` or the imager)."""

    DIRECTORY = "directory"
    LAYOUT = "layout"
    ARCHIVE = "archive"
    REGISTRY = "registry"


def registry_host(registry: str) -> str:
    """``registry``'s host without its port: ``[::1]:5000`` -> ``::1``, ``127.0.0.1:5000`` -> ``127.0.0.1``."""
    return registry[1:].partition("]")[0] if registry.startswith("[") else registry.partition(":")[0]
