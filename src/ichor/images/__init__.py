"""Container images built and moved on this machine: a reproducible OCI image from a directory
(:mod:`._build`), an image someone else made unpacked safely (:mod:`._unpack`), its push or pull to a registry with skopeo and the registry's answers (:mod:`._registry`),
an installer image's boot files fetched by a node over the registry API through its mirrors (:mod:`._fetch`)
with ``machine.registries.config``'s credentials and TLS settings (:mod:`._access`),
and image references and ``--registry-mirror`` values (:mod:`._reference`).

Nothing here comes from the internet: tests build their images from a busybox-static rootfs and
push them to a registry of their own (the Air-gapped guide's procedure). This package imports only
:mod:`ichor.machinery`.

::

    MachineryError
    └── ImageError      a bad directory, reference, mirror value, or a registry that did not do its part
"""

from __future__ import annotations

from ichor.images._access import Registries, RegistryAccess, access_from_config, prepare_auth
from ichor.images._build import DEFAULT_MAX_BYTES, BuiltImage, ImageSpec, build_layout, busybox_rootfs
from ichor.images._errors import ImageError
from ichor.images._fetch import InstallerAssets, MirrorEndpoints, fetch_installer, mirrors_from_config
from ichor.images._reference import (
    DOCKER_HUB,
    MirrorSpec,
    Reference,
    SourceKind,
    parse_mirror,
    parse_reference,
    registry_host,
    split_path_tag,
)
from ichor.images._registry import (
    AccessLogEntry,
    access_log,
    catalog,
    manifest_digest,
    pull,
    push,
    registry_answers,
)
from ichor.images._unpack import extract_archive, open_layout, unpack_image

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DOCKER_HUB",
    "AccessLogEntry",
    "BuiltImage",
    "ImageError",
    "ImageSpec",
    "InstallerAssets",
    "MirrorEndpoints",
    "MirrorSpec",
    "Reference",
    "Registries",
    "RegistryAccess",
    "SourceKind",
    "access_from_config",
    "access_log",
    "build_layout",
    "busybox_rootfs",
    "catalog",
    "extract_archive",
    "fetch_installer",
    "manifest_digest",
    "mirrors_from_config",
    "open_layout",
    "parse_mirror",
    "parse_reference",
    "prepare_auth",
    "pull",
    "push",
    "registry_answers",
    "registry_host",
    "split_path_tag",
    "unpack_image",
]
