"""The Talos version this Ichor reports (``talosctl version``'s Tag, the node's boot line, the
discovery affiliate's operating system).

An OS image is built as a version of its own (``python -m ichor.imager ... --version v1.7.7-ichor.2``):
the imager writes it beside the package as :data:`IMAGE_VERSION_FILE`, so a node upgraded to that
installer reports it, as a Talos node reports the version of the installer it booted. Container and
process nodes run the package from the source tree, which has no such file: they report
:data:`~ichor.machinery.TALOS_VERSION`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ichor.machinery import TALOS_VERSION

__all__ = ["IMAGE_VERSION_FILE", "image_version", "is_version", "running_version"]

IMAGE_VERSION_FILE = "IMAGE_VERSION"
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")


def is_version(text: str) -> bool:
    """A version an image may carry: letters, digits and ``.+_-``, at most 64 characters."""
    return bool(_VERSION.match(text))


def image_version(package_dir: Path) -> str | None:
    """The version in ``package_dir``/:data:`IMAGE_VERSION_FILE`, or None without a readable,
    well-formed one (a tag: letters, digits, ``.+_-``, at most 64 characters)."""
    try:
        text = (package_dir / IMAGE_VERSION_FILE).read_text(encoding="ascii", errors="strict").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_version(text) else None


@functools.cache
def running_version() -> str:
    """The version this process reports: its OS image's, else :data:`TALOS_VERSION`."""
    return image_version(Path(__file__).resolve().parent.parent) or TALOS_VERSION  # the ichor package
