"""Area ``k8s``, extra manifests: ``ExtraManifestsConfig`` -> ``Manifests`` ``<priority>-<name>``.

``k8s.ExtraManifestController`` downloads each URL (http/https, with ``extraManifestHeaders``, the
body bounded by :data:`MAX_MANIFEST_BYTES`) and parses inline manifests, both with the project's
bounded YAML loader. A URL that cannot be fetched or parsed is retried with backoff; the reason is
a wait (``talosctl get waits``) and a line of the controller log, and a manifest fetched before
stays as it was. A fetched URL is not downloaded again until the config changes.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ichor.machined.cosi import Controller, ControllerContext, Input, Output, OutputKind
from ichor.machined.resources import (
    EXTRA_MANIFESTS_CONFIG_ID,
    EXTRA_MANIFESTS_CONFIGS,
    MANIFESTS,
    ExtraManifest,
    ManifestSpec,
)
from ichor.machinery.errors import MachineryError
from ichor.machinery.limits import InputLimits
from ichor.machinery.yamlio import load_documents, to_plain

__all__ = [
    "MAX_MANIFEST_BYTES",
    "ExtraManifestController",
    "ManifestFetchError",
    "fetch_url",
    "parse_manifest",
]

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
"""A manifest over this is refused (the flannel or Cilium manifests are tens to hundreds of KiB)."""
FETCH_TIMEOUT = 30.0

Fetch = Callable[[str, Mapping[str, str]], Awaitable[bytes]]


class ManifestFetchError(Exception):
    """One manifest could not be fetched or parsed; the message says why."""


def _fetch_blocking(url: str, headers: Mapping[str, str], limit: int) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "ichor", **headers})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as reply:
            body: bytes = reply.read(limit + 1)
    except urllib.error.HTTPError as exc:
        raise ManifestFetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ManifestFetchError(f"{url}: {reason}") from None
    if len(body) > limit:
        raise ManifestFetchError(f"{url}: body is over the {limit:,}-byte limit for a manifest")
    return body


async def fetch_url(url: str, headers: Mapping[str, str], *, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """GET ``url`` (http/https only) off the event loop, at most ``limit`` bytes of body."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ManifestFetchError(
            f"{url}: only http:// and https:// URLs can be fetched (fix cluster.extraManifests)"
        )
    return await asyncio.to_thread(_fetch_blocking, url, headers, limit)


def parse_manifest(text: str | bytes, source: str) -> tuple[dict[str, Any], ...]:
    """The Kubernetes objects of a multi-document YAML manifest; each needs apiVersion and kind."""
    try:
        docs = load_documents(text, source=source, limits=InputLimits(max_bytes=MAX_MANIFEST_BYTES))
    except MachineryError as exc:
        raise ManifestFetchError(str(exc)) from None
    objects = []
    for number, doc in enumerate(docs, 1):
        plain = to_plain(doc)
        if not isinstance(plain, dict) or not plain.get("apiVersion") or not plain.get("kind"):
            raise ManifestFetchError(
                f"{source}: document {number} is not a Kubernetes object (no apiVersion/kind)"
            )
        objects.append(plain)
    return tuple(objects)


class ExtraManifestController(Controller):
    name = "k8s.ExtraManifestController"
    inputs = (Input(EXTRA_MANIFESTS_CONFIGS, id=EXTRA_MANIFESTS_CONFIG_ID),)
    outputs = (Output(MANIFESTS, OutputKind.SHARED),)

    def __init__(
        self, fetch: Fetch | None = None, *, first_retry: float = 1.0, max_retry: float = 60.0
    ) -> None:
        self._fetch = fetch or fetch_url
        self._first_retry = first_retry
        self._max_retry = max_retry

    async def _load(
        self, item: ExtraManifest, cache: dict[tuple[str, str], tuple[dict[str, Any], ...]]
    ) -> ManifestSpec:
        if not item.url:
            return ManifestSpec(items=parse_manifest(item.inline_manifest, f"inline manifest {item.name!r}"))
        key = (item.url, repr(sorted(item.extra_headers.items())))
        if key not in cache:
            cache[key] = parse_manifest(await self._fetch(item.url, item.extra_headers), item.url)
        return ManifestSpec(items=cache[key])

    async def run(self, ctx: ControllerContext) -> None:
        cache: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {}
        failures = 0
        retry: float | None = None
        while True:
            await ctx.changed(timeout=retry)
            config = ctx.get_or_none(EXTRA_MANIFESTS_CONFIGS, EXTRA_MANIFESTS_CONFIG_ID)
            items = config.spec.extra_manifests if config is not None else ()
            wanted = {(i.url, repr(sorted(i.extra_headers.items()))) for i in items if i.url}
            cache = {k: v for k, v in cache.items() if k in wanted}
            touched: set[str] = set()
            problems: list[str] = []
            for item in items:
                id = f"{item.priority}-{item.name}"
                try:
                    spec = await self._load(item, cache)
                except ManifestFetchError as exc:
                    problems.append(f"{id}: {exc}")
                    ctx.logger.error("failed to load manifest", manifest=id, error=str(exc))
                    touched.add(id)  # keep what an earlier pass fetched
                    continue
                ctx.modify(MANIFESTS, id, spec)
                touched.add(id)
            ctx.clean_up_outputs(MANIFESTS, touched)
            failures = failures + 1 if problems else 0
            delay = min(self._first_retry * 2 ** max(failures - 1, 0), self._max_retry)
            retry = ctx.waiting_on("extra manifests", problems, retry_after=delay)
