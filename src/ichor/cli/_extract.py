"""Unpacking what ``talosctl cp`` receives: a gzip tar made by a node, trusted no further than that.

Symlinks are written as the node archived them, absolute targets included (they name the node's
files, and Talos's talosctl keeps them too), but nothing is ever written through one: every member
is checked before the first byte is written, so a refused archive leaves no partial output.
Device files and FIFOs are skipped with a warning (a user's machine is not the node). Anything
refused is a :class:`~ichor.machinery.errors.MachineryError` naming the member.
"""

from __future__ import annotations

__all__ = ["extract_copy"]

import copy
import gzip
import io
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ichor.machinery.errors import MachineryError

_HINT = "the node sent an archive talosctl will not unpack; use `talosctl cp <path> -` to get the raw .tar.gz"


_Filter = Callable[[tarfile.TarInfo, str], tarfile.TarInfo | None]


def _member_filter(warn: Callable[[str], object]) -> _Filter:
    def check(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        if member.isdev() or member.isfifo():
            warn(f"skipping {member.name}: device files and FIFOs are not copied")
            return None
        if member.issym():
            # The name is checked as a file's would be; the target is kept as the node wrote it.
            as_file = copy.copy(member)
            as_file.type, as_file.linkname = tarfile.REGTYPE, ""
            tarfile.data_filter(as_file, dest)
            return member
        return tarfile.data_filter(member, dest)

    return check


def _checked_members(archive: tarfile.TarFile, target: Path, check: _Filter) -> list[tarfile.TarInfo]:
    members = archive.getmembers()
    links: set[PurePosixPath] = set()
    for member in members:
        check(member, str(target))
        path = PurePosixPath(member.name)
        if any(parent in links for parent in path.parents):
            raise MachineryError(
                f"the node sent an archive that writes {member.name} through a symlink", hint=_HINT
            )
        if member.issym():
            links.add(path)
    return members


def extract_copy(data: bytes, target: Path, *, warn: Callable[[str], object]) -> None:
    """Unpacks the ``.tar.gz`` a node sent for ``cp`` into ``target`` (see the module docstring)."""
    check = _member_filter(warn)
    try:
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as archive:
            members = _checked_members(archive, target, check)
            target.mkdir(parents=True, exist_ok=True)
            try:  # checked again as each is written (the same filter, its warnings said once)
                archive.extractall(target, members=members, filter=_member_filter(lambda _: None))
            except (tarfile.TarError, OSError) as exc:
                raise MachineryError(f"cannot unpack into {target}: {exc}", hint=_HINT) from None
    except tarfile.FilterError as exc:
        raise MachineryError(f"the node sent an unsafe archive: {exc}", hint=_HINT) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise MachineryError(f"the node sent a damaged archive: {exc}", hint=_HINT) from None
