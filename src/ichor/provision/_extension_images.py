"""``cluster create --extension`` given an image rather than a directory: Talos ships system
extensions as OCI images whose root holds ``manifest.yaml`` and ``rootfs/``.

An ``--extension`` value is one of (:func:`plan_extensions` tells them apart before anything
starts):

- a directory with ``manifest.yaml`` (the extension itself, :mod:`._extensions` as before);
- an OCI image layout: a directory with ``oci-layout``, or ``oci:<dir>[:<tag>]``;
- an OCI archive (a tar of a layout): ``oci-archive:<file>[:<tag>]``;
- an image in a registry: ``<registry>/<repository>[:<tag>]`` or ``docker://...``, pulled with
  skopeo over plain http. Only from this machine: the registry must be a loopback address or one in
  the cluster's ``--cidr`` (where ``--with-registry`` serves); any other is refused up front, since
  a host name or outside address could reach the internet.

Images are unpacked (:func:`ichor.images.unpack_image`, which refuses unsafe entries) into the
cluster's state directory, ``extensions/<n>-<name>``, once the network and registry are up
(:func:`fetch_extensions`); from there the directory path takes over, so the node layers the
unpacked directory and ``cluster destroy`` removes it with the state directory.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
from ichor.machinery.errors import MachineryError
from ichor.provision._extensions import check_extensions

__all__ = ["ExtensionSource", "SourceKind", "fetch_extensions", "plan_extensions"]

_SOURCES_HINT = (
    "pass --extension a directory (manifest.yaml + rootfs/), an OCI image layout (oci:<dir>[:<tag>]), "
    "an OCI archive (oci-archive:<file>) or an image in a local registry (127.0.0.1:5000/<repository>:<tag>)"
)


@dataclass(frozen=True)
class ExtensionSource:
    given: str
    kind: SourceKind
    path: Path | None = None
    tag: str | None = None
    reference: Reference | None = None


def _local_registry(registry: str, cidr: str) -> bool:
    host = registry_host(registry)
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    network = ipaddress.ip_network(cidr, strict=False)
    return address.is_loopback or (address.version == network.version and address in network)


def _parse(given: str, cidr: str) -> ExtensionSource:
    if given.startswith("oci:"):
        path, tag = split_path_tag(given.removeprefix("oci:"), want_dir=True)
        return ExtensionSource(given, SourceKind.LAYOUT, path, tag)
    if given.startswith("oci-archive:"):
        path, tag = split_path_tag(given.removeprefix("oci-archive:"), want_dir=False)
        return ExtensionSource(given, SourceKind.ARCHIVE, path, tag)
    plain = Path(given).expanduser()
    if plain.is_dir():
        kind = SourceKind.LAYOUT if (plain / "oci-layout").is_file() else SourceKind.DIRECTORY
        return ExtensionSource(given, kind, plain.resolve())
    first, slash, _ = given.removeprefix("docker://").partition("/")
    if given.startswith("docker://") or (slash and ("." in first or ":" in first or first == "localhost")):
        if plain.exists():
            return ExtensionSource(given, SourceKind.DIRECTORY, plain.resolve())
        reference = parse_reference(given.removeprefix("docker://"), what="--extension image")
        if not _local_registry(reference.registry, cidr):
            raise MachineryError(
                f"--extension {given}: registry {reference.registry} is not on this machine; Ichor pulls extension "
                f"images only from a loopback address or the cluster's own network ({cidr}, where --with-registry serves)",
                hint="push the image to a local registry (e.g. skopeo copy ... docker://127.0.0.1:5000/<repository>:<tag>) "
                "and name it there, or pass the image as a layout (oci:<dir>) or archive (oci-archive:<file>)",
            )
        return ExtensionSource(given, SourceKind.REGISTRY, reference=reference)
    return ExtensionSource(given, SourceKind.DIRECTORY, plain.resolve())


def _check_local(source: ExtensionSource) -> None:
    """A layout's index, manifest and blobs, an archive's presence: wrong ones refused before anything starts."""
    try:
        if source.kind is SourceKind.LAYOUT:
            assert source.path is not None
            open_layout(source.path, source.tag)
        elif source.kind is SourceKind.ARCHIVE and not (source.path and source.path.is_file()):
            raise ImageError(f"{source.path} is not a file", hint="name an OCI archive: oci-archive:<file>")
    except ImageError as exc:
        raise MachineryError(f"--extension {source.given}: {exc}", hint=exc.hint or _SOURCES_HINT) from None


def plan_extensions(values: Sequence[str], *, cidr: str, container: bool) -> list[ExtensionSource]:
    """Tell every ``--extension`` value's kind, refuse a remote registry, and check the plain
    directories and local layouts (every image is checked again once unpacked, by
    :func:`fetch_extensions`)."""
    if values and not container:
        check_extensions(values, container=False)
    try:
        sources = [_parse(value, cidr) for value in values]
    except ImageError as exc:
        raise MachineryError(str(exc), hint=exc.hint or _SOURCES_HINT) from None
    for source in sources:
        _check_local(source)
    directories = [s for s in sources if s.kind is SourceKind.DIRECTORY]
    check_extensions(
        [str(s.path) for s in directories], container=container, given=[s.given for s in directories]
    )
    return sources


def _name(source: ExtensionSource) -> str:
    base = (
        source.reference.repository.rpartition("/")[2]
        if source.reference
        else (source.path or Path("x")).name
    )
    return re.sub(r"[^A-Za-z0-9._-]", "_", base.removesuffix(".tar"))[:64] or "image"


def _unpack(source: ExtensionSource, target: Path, scratch: Path) -> None:
    if source.kind is SourceKind.LAYOUT:
        assert source.path is not None
        unpack_image(source.path, target, tag=source.tag)
        return
    if source.kind is SourceKind.ARCHIVE:
        assert source.path is not None
        extract_archive(source.path, scratch)
        unpack_image(scratch, target, tag=source.tag)
    else:
        assert source.reference is not None
        scratch.parent.mkdir(parents=True, exist_ok=True)
        pull(source.reference, scratch)
        unpack_image(scratch, target, tag=source.reference.tag)
    shutil.rmtree(scratch)


def fetch_extensions(sources: Sequence[ExtensionSource], state_dir: Path) -> list[str]:
    """Every ``--extension`` as a directory: images unpacked under ``<state_dir>/extensions``, all
    checked together (names given once, files under /usr/local). Returns the directories in order."""
    directories: list[str] = []
    for n, source in enumerate(sources):
        if source.kind is SourceKind.DIRECTORY:
            directories.append(str(source.path))
            continue
        target = state_dir / "extensions" / f"{n:03d}-{_name(source)}"
        try:
            _unpack(source, target, state_dir / "extensions" / f"{n:03d}.layout")
        except MachineryError as exc:
            raise MachineryError(
                f"--extension {source.given}: {exc}", hint=exc.hint or _SOURCES_HINT
            ) from None
        if not (target / "manifest.yaml").is_file():
            raise MachineryError(
                f"--extension {source.given}: the image has no manifest.yaml at its root, so it is not a system extension",
                hint="a Talos extension image holds manifest.yaml and rootfs/ at its root; build it from such a directory",
            )
        directories.append(str(target))
    check_extensions(directories, container=True, given=[s.given for s in sources])
    return directories
