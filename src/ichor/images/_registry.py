"""Pushing an image layout to a registry, and asking a registry what it holds and what it served.

The push is one ``skopeo copy oci:<layout>:<tag> docker://<registry>/<repository>:<tag>`` (through
:mod:`ichor.machinery.proc`), with ``--dest-tls-verify=false`` for a plain-http registry such as a
cluster's own. The questions are the registry's HTTP API (``/v2/``, ``/v2/_catalog``, a manifest
HEAD) and, for what it served, its access log in the combined log format
(``10.5.0.2 - - [...] "GET /v2/library/busybox/manifests/1.36 HTTP/1.1" 200 ...``).
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ichor.images._build import MANIFEST_TYPE, BuiltImage
from ichor.images._errors import ImageError
from ichor.images._reference import Reference
from ichor.machinery import proc

__all__ = ["AccessLogEntry", "access_log", "catalog", "manifest_digest", "pull", "push", "registry_answers"]

SKOPEO_HINT = "install it (Debian: `apt-get install -y skopeo`; `bash run.sh` does it as root)"
HTTP_TIMEOUT = 5.0
MANIFEST_ACCEPT = ", ".join([
    MANIFEST_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
])  # fmt: skip


def push(image: BuiltImage, registry: str, reference: Reference, *, insecure: bool = True) -> None:
    """Copy the layout's image to ``registry`` (``host:port``) as ``reference``'s repository and tag
    (its registry part is dropped: a mirror holds the repository alone, as the Air-gapped guide says)."""
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise ImageError("skopeo (used to push images) is not installed", hint=SKOPEO_HINT)
    destination = f"docker://{registry}/{reference.repository}:{reference.tag}"
    proc.run(
        [skopeo, "--insecure-policy", "copy", "--quiet", "--retry-times", "2",
         f"--dest-tls-verify={'false' if insecure else 'true'}",
         f"oci:{image.layout}:{image.tag}", destination],
        timeout=120, hint=f"is the registry at {registry} running? (`curl http://{registry}/v2/`)",
    )  # fmt: skip


def pull(reference: Reference, layout: Path, *, insecure: bool = True) -> None:
    """Copy ``reference`` from its registry into a new image layout at ``layout``, tagged with its tag."""
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise ImageError("skopeo (used to pull images) is not installed", hint=SKOPEO_HINT)
    proc.run(
        [skopeo, "--insecure-policy", "copy", "--quiet", "--retry-times", "2",
         f"--src-tls-verify={'false' if insecure else 'true'}",
         f"docker://{reference}", f"oci:{layout}:{reference.tag}"],
        timeout=120, hint=f"does the registry at {reference.registry} hold {reference.repository}:{reference.tag}? "
                          f"(`curl http://{reference.registry}/v2/{reference.repository}/tags/list`)",
    )  # fmt: skip


def _get(url: str, *, method: str = "GET", accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as reply:
            return reply.status, dict(reply.headers), reply.read(1 << 20)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), b""
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ImageError(
            f"registry at {url} did not answer: {reason}", hint="is it running on that address?"
        ) from None


def registry_answers(registry: str) -> bool:
    """The registry's API root answers 200 (an open registry, no auth)."""
    try:
        return _get(f"http://{registry}/v2/")[0] == 200
    except ImageError:
        return False


def catalog(registry: str) -> list[str]:
    """The repositories the registry holds (``/v2/_catalog``)."""
    status, _, body = _get(f"http://{registry}/v2/_catalog")
    if status != 200:
        raise ImageError(f"registry {registry} answered {status} to /v2/_catalog", hint="is it a registry?")
    repositories = json.loads(body).get("repositories") or []
    return [str(r) for r in repositories]


def manifest_digest(registry: str, reference: Reference) -> str | None:
    """The digest the registry serves for ``reference``'s manifest (a HEAD), None when it has none."""
    status, headers, _ = _get(
        f"http://{registry}/v2/{reference.repository}/manifests/{reference.tag}", method="HEAD",
        accept=MANIFEST_ACCEPT,
    )  # fmt: skip
    if status == 404:
        return None
    if status != 200:
        raise ImageError(
            f"registry {registry} answered {status} for {reference}'s manifest", hint="see its log"
        )
    return {k.lower(): v for k, v in headers.items()}.get("docker-content-digest")


_COMBINED = re.compile(
    r'^(?P<client>\S+) \S+ \S+ \[[^\]]*\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d{3}) '
)


@dataclass(frozen=True)
class AccessLogEntry:
    client: str
    method: str
    path: str
    status: int


def access_log(log: Path) -> list[AccessLogEntry]:
    """Every request the registry's access log recorded (other lines of the log are skipped)."""
    entries = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        match = _COMBINED.match(line)
        if match:
            entries.append(
                AccessLogEntry(match["client"], match["method"], match["path"], int(match["status"]))
            )
    return entries
