"""Fetching an installer image on a node: the registry's HTTP API, through the node's registry mirrors.

A node has no skopeo and no containerd to spare for this (Talos pulls its installer with the
system containerd), so :func:`fetch_installer` speaks the registry API itself, in Python:

* endpoints: each of ``machine.registries.mirrors[<registry>].endpoints`` (else the ``*``
  mirror's), else the registry itself over HTTPS (Docker Hub's is ``registry-1.docker.io``); a
  node's :class:`~ichor.images.Registries` stops there as Talos 1.7.6's resolver does, a plain
  mapping of mirrors also tries the registry after its mirrors (containerd's CRI order); an
  endpoint's path gets ``/v2`` appended unless ``overridePath``;
* the manifest (an index is narrowed to linux/amd64), then the config blob: an Ichor installer
  image runs ``python3.11 -m ichor.installer`` and carries its version as the label
  ``org.opencontainers.image.version`` (what ``imager installer`` writes);
* the layers from the top down until one holds ``usr/install/amd64/vmlinuz``: downloaded with its
  sha256 checked against the manifest, and only its ``usr/install/amd64/`` files unpacked (the
  kernel, the initramfs, GRUB's images). The lower layers (the OS's root filesystem) are not
  fetched: the running installer code writes the new version's boot files. The files stay in
  ``work`` with the manifest's digest, so asking again for the same image downloads nothing.

When ``mirrors`` is a :class:`~ichor.images.Registries` (what ``upgrade_inputs`` gives), each
endpoint gets the credentials and TLS settings ``machine.registries.config`` has for its host, as
Talos (:mod:`ichor.images._access`): a ``Basic`` challenge answered with them, a ``Bearer`` one with
a token asked for with them (anonymously without any). Errors are :class:`~ichor.images.ImageError`
saying what every endpoint answered.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import shutil
import ssl
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.images._access import Registries, RegistryAccess, _q, prepare_auth
from ichor.images._errors import ImageError
from ichor.images._reference import DOCKER_HUB, Reference, parse_reference

__all__ = [
    "ASSETS_PREFIX",
    "INSTALLER_ENTRYPOINT",
    "InstallerAssets",
    "MirrorEndpoints",
    "fetch_installer",
    "mirrors_from_config",
]

ASSETS_PREFIX = "usr/install/amd64/"
INSTALLER_ENTRYPOINT = "ichor.installer"
VERSION_LABEL = "org.opencontainers.image.version"
REQUIRED = ("vmlinuz", "initramfs.xz")
MAX_LAYER_BYTES = 2 << 30
_JSON_LIMIT = 4 << 20
_ACCEPT = ", ".join((
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
))  # fmt: skip
_INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


@dataclass(frozen=True)
class MirrorEndpoints:
    """One ``machine.registries.mirrors`` entry: its endpoints and ``overridePath``."""

    endpoints: tuple[str, ...]
    override_path: bool = False


@dataclass(frozen=True)
class InstallerAssets:
    """An installer image's boot files, unpacked under ``directory``."""

    image: str
    version: str
    manifest_digest: str
    endpoint: str
    directory: Path

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initramfs(self) -> Path:
        return self.directory / "initramfs.xz"


Opener = Callable[[urllib.request.Request, float], Any]


def _open(request: urllib.request.Request, timeout: float) -> Any:
    return urllib.request.urlopen(request, timeout=timeout)


def _bases(reference: Reference, mirrors: Mapping[str, MirrorEndpoints], fallback: bool) -> list[str]:
    """The ``/v2`` roots to try, in order: mirrors, then (with ``fallback``) the registry itself."""
    mirror = mirrors.get(reference.registry) or mirrors.get("*")
    bases = []
    override = bool(mirror and mirror.override_path)
    for endpoint in mirror.endpoints if mirror else ():
        endpoint = endpoint.rstrip("/")
        if "://" not in endpoint:
            endpoint = f"https://{endpoint}"
        # Talos appends /v2 unless overridePath or the path already ends with it
        keep = override or urllib.parse.urlsplit(endpoint).path.endswith("/v2")
        bases.append(endpoint if keep else f"{endpoint}/v2")
    upstream = "registry-1.docker.io" if reference.registry == DOCKER_HUB else reference.registry
    if fallback or not bases:
        bases.append(f"https://{upstream}/v2")
    return bases


def _context_opener(context: ssl.SSLContext) -> Opener:
    def opener(request: urllib.request.Request, timeout: float) -> Any:
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    return opener


def _basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class _Endpoint:
    """One registry endpoint: GETs, answering a ``Basic`` or ``Bearer`` challenge with the
    endpoint's credentials (anonymously for a bearer token when it has none)."""

    def __init__(self, base: str, repository: str, opener: Opener, timeout: float,
                 access: RegistryAccess | None = None) -> None:  # fmt: skip
        self.base, self.repository, self.opener, self.timeout = base, repository, opener, timeout
        self.access = access
        self.host = urllib.parse.urlsplit(base).netloc
        self.authorization: str | None = None

    def get(self, kind: str, ref: str, accept: str | None = None) -> Any:
        url = f"{self.base}/{self.repository}/{kind}/{ref}"
        for attempt in range(2):
            headers = {"Accept": accept} if accept else {}
            if self.authorization:
                headers["Authorization"] = self.authorization
            try:
                return self.opener(urllib.request.Request(url, headers=headers), self.timeout)
            except urllib.error.HTTPError as err:
                challenge = err.headers.get("WWW-Authenticate", "") if err.headers else ""
                if err.code == 401 and attempt == 0 and challenge:
                    self.authorization = self._answer(challenge, url)
                    if self.authorization:
                        continue
                raise ImageError(f"{url}: HTTP {err.code} {err.reason}") from None
            except (urllib.error.URLError, OSError) as err:
                raise ImageError(f"{url}: {getattr(err, 'reason', err)}") from None
        raise ImageError(f"{url}: the registry refused the credentials (or the token it gave)")

    def _answer(self, challenge: str, url: str) -> str | None:
        """The ``Authorization`` for a 401's challenge; None when there is nothing to answer with."""
        scheme, _, rest = challenge.partition(" ")
        user, secret = prepare_auth(self.access, self.host, urllib.parse.urlsplit(url).netloc)
        if scheme.lower() == "basic":
            return _basic(user, secret) if user and secret else None
        if scheme.lower() == "bearer":
            return "Bearer " + self._token(rest, user, secret)
        return None

    def _token(self, challenge: str, user: str, secret: str) -> str:
        params = dict(part.split("=", 1) for part in challenge.split(",") if "=" in part)
        params = {k.strip(): v.strip().strip('"') for k, v in params.items()}
        realm = params.pop("realm", "")
        if not realm:
            raise ImageError(f"{self.base}: a bearer challenge without a realm")
        if secret:
            form = {**params, "client_id": "containerd-client"}
            form.update({"grant_type": "password", "username": user, "password": secret} if user
                        else {"grant_type": "refresh_token", "refresh_token": secret})  # fmt: skip
            try:
                request = urllib.request.Request(realm, data=urllib.parse.urlencode(form).encode(), method="POST",
                                                 headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
                return self._read_token(request, realm)
            except urllib.error.HTTPError as err:
                if not (err.code in (400, 401, 404) or (err.code == 405 and user)):
                    raise ImageError(f"{realm}: no token (HTTP {err.code} {err.reason})") from None
        request = urllib.request.Request(realm + "?" + urllib.parse.urlencode(params))
        if secret:
            request.add_header("Authorization", _basic(user, secret))
        try:
            return self._read_token(request, realm)
        except urllib.error.HTTPError as err:
            raise ImageError(f"{realm}: no token (HTTP {err.code} {err.reason})") from None

    def _read_token(self, request: urllib.request.Request, realm: str) -> str:
        try:
            with self.opener(request, self.timeout) as reply:
                body = json.loads(reply.read(_JSON_LIMIT))
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise ImageError(f"{realm}: no token ({getattr(err, 'reason', err)})") from None
        return str(body.get("token") or body.get("access_token") or "")

    def document(self, kind: str, ref: str, accept: str | None = None) -> tuple[dict[str, Any], str, str]:
        with self.get(kind, ref, accept) as reply:
            data = reply.read(_JSON_LIMIT + 1)
            media_type = reply.headers.get("Content-Type", "") if reply.headers else ""
        if len(data) > _JSON_LIMIT:
            raise ImageError(f"{self.base}/{self.repository}/{kind}/{ref}: over 4 MiB")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if ref.startswith("sha256:") and digest != ref:
            raise ImageError(f"{self.repository}@{ref}: the registry's bytes do not match the digest")
        try:
            document = json.loads(data)
        except ValueError:
            raise ImageError(f"{self.base}/{self.repository}/{kind}/{ref} is not JSON") from None
        if not isinstance(document, dict):
            raise ImageError(f"{self.base}/{self.repository}/{kind}/{ref} is not a JSON object")
        return document, str(document.get("mediaType") or media_type.split(";")[0]), digest

    def blob_to(self, digest: str, target: Path, limit: int) -> None:
        """Download a blob to ``target``, its sha256 checked while it streams."""
        sha = hashlib.sha256()
        size = 0
        with self.get("blobs", digest) as reply, target.open("wb") as out:
            while chunk := reply.read(1 << 20):
                size += len(chunk)
                if size > limit:
                    raise ImageError(f"{self.repository}@{digest} is over {limit} bytes")
                sha.update(chunk)
                out.write(chunk)
        if "sha256:" + sha.hexdigest() != digest:
            raise ImageError(f"{self.repository}@{digest}: the downloaded bytes do not match the digest")


def _manifest(endpoint: _Endpoint, tag: str) -> tuple[dict[str, Any], str]:
    manifest, media_type, digest = endpoint.document("manifests", tag, _ACCEPT)
    if media_type in _INDEXES or "manifests" in manifest:
        fits = [m for m in manifest.get("manifests") or [] if isinstance(m, dict)
                and (m.get("platform") or {}).get("os") == "linux"
                and (m.get("platform") or {}).get("architecture") == "amd64"]  # fmt: skip
        if not fits:
            raise ImageError("the image has no linux/amd64 manifest")
        manifest, _, digest = endpoint.document("manifests", str(fits[0].get("digest")), _ACCEPT)
    return manifest, digest


def _unpack_assets(layer: Path, directory: Path) -> bool:
    """Unpack the ``usr/install/amd64/`` regular files of a gzip'd (or plain) layer tar; any found?"""
    found = False
    try:
        with tarfile.open(layer, "r:*") as tar:
            for member in tar:
                name = posixpath.normpath(member.name.removeprefix("./"))
                if not name.startswith(ASSETS_PREFIX) or not member.isreg():
                    continue
                relative = name[len(ASSETS_PREFIX) :]
                if ".." in relative.split("/") or relative.startswith("/"):
                    raise ImageError(f"installer layer entry {member.name!r} climbs out of {ASSETS_PREFIX}")
                target = directory / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                with target.open("wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                found = True
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ImageError(f"an installer layer is not a readable tar ({err})") from None
    return found


def fetch_installer(
    image: str,
    mirrors: Mapping[str, MirrorEndpoints],
    work: Path,
    *,
    opener: Opener = _open,
    timeout: float = 30.0,
    fallback: bool | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> InstallerAssets:
    """Fetch ``image``'s boot files into ``work/assets`` (``work`` is created); see the module docstring.

    ``fallback=False`` never asks the registry itself when a mirror is configured. The default is
    Talos's resolver for a node's :class:`~ichor.images.Registries` (no fallback: a configured
    mirror's endpoints are all it asks) and containerd's CRI order (mirrors, then the registry)
    for a plain mapping of mirrors."""
    if fallback is None:
        fallback = not isinstance(mirrors, Registries)
    reference = parse_reference(image, what="installer image")
    problems: list[str] = []
    access = mirrors.config if isinstance(mirrors, Registries) else {}
    endpoints = []
    for base in _bases(reference, mirrors, fallback):
        parts = urllib.parse.urlsplit(base)
        settings = access.get(parts.netloc)
        if settings is not None and settings.has_tls and parts.scheme != "https":
            raise ImageError(f"TLS config specified for non-HTTPS registry: {_q(parts.netloc)}",
                             hint=f"remove machine.registries.config[{_q(parts.netloc)}].tls or use https")  # fmt: skip
        context = settings.ssl_context(parts.netloc) if settings is not None else None
        endpoint_opener = _context_opener(context) if context is not None and opener is _open else opener
        endpoints.append(_Endpoint(base, reference.repository, endpoint_opener, timeout, settings))
    for endpoint in endpoints:
        try:
            manifest, digest = _manifest(endpoint, reference.tag)
            return _fetch_from(endpoint, image, manifest, digest, work, say)
        except ImageError as err:
            if err.hint == "not-an-installer":
                raise ImageError(str(err), hint="build it with `python -m ichor.imager installer`") from None
            problems.append(str(err))
    raise ImageError(
        f"failed to pull {image}: {'; '.join(problems)}",
        hint="check machine.registries.mirrors (and .config for credentials) and that the registry holds the image",
    )


def _fetch_from(
    endpoint: _Endpoint,
    image: str,
    manifest: dict[str, Any],
    digest: str,
    work: Path,
    say: Callable[[str], None],
) -> InstallerAssets:
    config_descriptor = manifest.get("config") or {}
    config, _, _ = endpoint.document("blobs", str(config_descriptor.get("digest")))
    settings = config.get("config") or {}
    entrypoint = [str(a) for a in (settings.get("Entrypoint") or [])]
    if INSTALLER_ENTRYPOINT not in entrypoint:
        raise ImageError(
            f"{image} is not an Ichor installer image: its entry point is {entrypoint or 'empty'}, "
            f"not python -m {INSTALLER_ENTRYPOINT}",
            hint="not-an-installer",
        )
    version = str((settings.get("Labels") or {}).get(VERSION_LABEL) or "")
    if not version:
        raise ImageError(f"{image} is not an Ichor installer image: it has no {VERSION_LABEL} label",
                         hint="not-an-installer")  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    directory = work / "assets"
    marker = work / "assets.manifest"
    cached = marker.read_text() if marker.is_file() else ""
    if cached == digest and all((directory / name).is_file() for name in REQUIRED):
        # This very image was fetched and checked before (a refused upgrade, then the same one).
        say(f"{image} ({version}, {digest}) was fetched before: using it")
        return InstallerAssets(image, version, digest, endpoint.base, directory)
    marker.unlink(missing_ok=True)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir()
    layers = [layer for layer in manifest.get("layers") or [] if isinstance(layer, dict)]
    for layer in reversed(layers):
        blob = work / "layer"
        layer_digest = str(layer.get("digest"))
        say(
            f"fetching {image} layer {layer_digest[:19]} ({int(layer.get('size') or 0) / 1e6:.1f} MB) from {endpoint.base}"
        )
        endpoint.blob_to(layer_digest, blob, MAX_LAYER_BYTES)
        found = _unpack_assets(blob, directory)
        blob.unlink()
        if found:
            break
    missing = [name for name in REQUIRED if not (directory / name).is_file()]
    if missing:
        raise ImageError(f"{image} is not an Ichor installer image: it has no {ASSETS_PREFIX}{missing[0]}",
                         hint="not-an-installer")  # fmt: skip
    marker.write_text(digest)
    say(f"fetched {image} ({version}, {digest})")
    return InstallerAssets(image, version, digest, endpoint.base, directory)


def mirrors_from_config(mirrors: Mapping[str, Any] | None) -> dict[str, MirrorEndpoints]:
    """``machine.registries.mirrors`` (the typed models, or plain mappings) as :class:`MirrorEndpoints`."""
    out: dict[str, MirrorEndpoints] = {}
    for host, mirror in (mirrors or {}).items():
        if mirror is None:
            continue
        endpoints = mirror.get("endpoints") if isinstance(mirror, Mapping) else mirror.endpoints
        override = mirror.get("overridePath") if isinstance(mirror, Mapping) else mirror.override_path
        out[host] = MirrorEndpoints(tuple(str(e) for e in endpoints or ()), bool(override))
    return out
