"""Pulling an image as Talos does: retried with backoff while the registry cannot be reached, each
retry reported with its reason, and a failure that names the mirrors asked and what each answered.

Talos retries a pull for up to 20 minutes (``PullTimeout``) from a 5 s unit (``PullRetryInterval``),
doubling, and gives up at once on "not found". Here a pull gives up at once when every host asked
gave a final answer: 404 for the image (nobody pushed it), or a name that does not resolve ("no such
host": a registry with no mirror on a machine that reaches no other). A registry that is down
(connection refused, a timeout) is worth waiting for. The wait between attempts is capped
(:data:`PULL_RETRY_LIMIT`) so a registry that comes back is noticed within a minute.

``ctr`` logs each host it tries (``trying next host ... host=<host>``) before its final error;
:func:`hosts_tried` reads those lines back so the error says "mirror http://10.5.0.1:5000: connection
refused" rather than containerd's last line alone.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ichor.machined.cri._errors import ContainerdUnavailableError, CRIError

__all__ = [
    "PULL_RETRY_INTERVAL",
    "PULL_RETRY_LIMIT",
    "PULL_TIMEOUT",
    "HostAttempt",
    "ImagePullError",
    "PullAttemptError",
    "hosts_tried",
    "mirrors_for",
    "pull_with_retry",
    "registry_of",
]

PULL_TIMEOUT = 20 * 60.0
"""Talos's ``PullTimeout``: how long a pull keeps retrying."""
PULL_RETRY_INTERVAL = 5.0
"""Talos's ``PullRetryInterval``: the first wait, doubled per failed attempt ..."""
PULL_RETRY_LIMIT = 60.0
"""... up to this."""

_HOST = re.compile(r'host="?([^"\s]+)"?')
_ERROR = re.compile(r'error="((?:[^"\\]|\\.)*)"')
_REQUEST = re.compile(r'^failed to do request: \w+ "[^"]*": ')


class ImagePullError(CRIError):
    """A pull that failed; ``final`` when retrying cannot help (every host asked gave a final
    answer), ``not_found`` when a mirror answered that it has no such image."""

    def __init__(
        self, message: str, *, hint: str | None = None, final: bool = False, not_found: bool = False
    ) -> None:
        super().__init__(message, hint=hint)
        self.final = final
        self.not_found = not_found


class PullAttemptError(CRIError):
    """One ``ctr images pull`` that exited non-zero; ``stderr`` is its whole output, for :func:`pull_error`."""

    def __init__(self, stderr: str) -> None:
        super().__init__(_last_error(stderr))
        self.stderr = stderr


@dataclass(frozen=True)
class HostAttempt:
    host: str
    reason: str

    @property
    def not_found(self) -> bool:
        return self.reason == "not found (HTTP 404)"

    @property
    def final(self) -> bool:
        """An answer that another attempt would get again."""
        return self.not_found or self.reason.endswith("no such host")


def registry_of(reference: str) -> str:
    """The registry host of an image reference (``busybox`` is ``docker.io``'s)."""
    first, slash, _ = reference.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def mirrors_for(hosts_dir: Path, registry: str) -> list[str]:
    """The endpoints ``hosts.toml`` lists for ``registry`` (its own directory, else ``_default``), in order."""
    for directory in (registry, "_default"):
        try:
            text = (hosts_dir / directory / "hosts.toml").read_text()
        except OSError:
            continue
        return re.findall(r'^\s*\[host\."([^"]+)"\]', text, flags=re.MULTILINE)
    return []


def hosts_tried(stderr: str) -> list[HostAttempt]:
    """Each host ``ctr`` tried and why it moved on, in order."""
    tried = []
    for line in stderr.splitlines():
        if "trying next host" not in line or (host := _HOST.search(line)) is None:
            continue
        if "StatusNotFound" in line:
            reason = "not found (HTTP 404)"
        elif (error := _ERROR.search(line)) is not None:
            reason = _REQUEST.sub("", error.group(1).replace('\\"', '"'))
        else:
            reason = line.split("msg=", 1)[-1]
        tried.append(HostAttempt(host.group(1), reason))
    return tried


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("ctr: ")]
    return lines[-1].removeprefix("ctr: ") if lines else (stderr.strip().splitlines() or ["(no output)"])[-1]


def pull_error(reference: str, stderr: str, mirrors: list[str]) -> ImagePullError:
    """What went wrong, naming each host asked (a mirror or the registry itself)."""
    registry = registry_of(reference)
    tried = hosts_tried(stderr)
    mirror_hosts = {m.split("://", 1)[-1].rstrip("/") for m in mirrors}

    def label(host: str) -> str:
        return f"mirror {host}" if host in mirror_hosts else f"{host} (the registry itself)"

    asked = "; ".join(f"{label(t.host)}: {t.reason}" for t in tried) or _last_error(stderr)
    final = bool(tried) and all(t.final for t in tried)
    not_found = final and any(t.not_found for t in tried)
    key = f'machine.registries.mirrors["{registry}"]'
    if not mirrors:
        hint = f"no mirror is configured for {registry}: add one in {key} (cluster create --registry-mirror)"
    elif not_found:
        hint = f"push {reference} to the mirror ({', '.join(mirrors)}), or check the name and tag"
    else:
        hint = f"check that the mirror in {key} ({', '.join(mirrors)}) is up"
    message = f'failed to pull image "{reference}": {asked}'
    return ImagePullError(message, hint=hint, final=final, not_found=not_found)


async def pull_with_retry(
    attempt: Callable[[], Awaitable[None]],
    reference: str,
    mirrors: list[str],
    *,
    report: Callable[[str], None],
    on_retry: Callable[[str], None] = lambda _error: None,
    timeout: float = PULL_TIMEOUT,
    interval: float = PULL_RETRY_INTERVAL,
    limit: float = PULL_RETRY_LIMIT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run ``attempt`` (one ``ctr images pull``) until it succeeds, fails for good (see the module
    docstring), or ``timeout`` has passed; ``report`` gets "Pulling image ..." and each retry with its reason,
    ``on_retry`` the failed attempt's error alone."""
    report(f"Pulling image {reference}...")
    deadline = clock() + timeout
    failures = 0
    while True:
        try:
            await attempt()
        except ContainerdUnavailableError:
            raise
        except CRIError as err:
            error = pull_error(reference, err.stderr, mirrors) if isinstance(err, PullAttemptError) else err
            failures += 1
            if isinstance(error, ImagePullError) and error.final:
                raise error from None
            wait = min(limit, interval * 2 ** (failures - 1))
            if clock() + wait > deadline:
                raise ImagePullError(
                    f"{error} (gave up after {failures} attempt(s) over {timeout:.0f}s)", hint=error.hint
                ) from None
            report(f"retrying pull of image {reference} in {wait:.0f}s (attempt {failures} failed): {error}")
            on_retry(str(error))
            await sleep(wait)
            continue
        report(f"Pulled image {reference}")
        return
