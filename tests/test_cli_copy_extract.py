"""`talosctl cp` unpacking: what a node sends is unpacked whole or not at all, never through a link."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from ichor.cli._extract import extract_copy
from ichor.machined.platform import Layout
from ichor.machined.server import _files
from ichor.machinery.errors import MachineryError


def _archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return gzip.compress(raw.getvalue())


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info


def test_a_directory_holding_an_absolute_symlink_is_copied_with_the_link(tmp_path: Path) -> None:
    # Issue 13, defect 8: this died with AbsoluteLinkError and a traceback, leaving partial output.
    root = tmp_path / "node"
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/machined.log").write_text("booted\n")
    (root / "var/log/x").symlink_to("/etc/shadow")
    data = b"".join(_files.copy_tar_gz(Layout(root=root, address="127.5.0.2"), "/var/log"))
    warnings: list[str] = []
    extract_copy(data, tmp_path / "out", warn=warnings.append)
    assert (tmp_path / "out/log/machined.log").read_text() == "booted\n"
    assert os.readlink(tmp_path / "out/log/x") == "/etc/shadow"
    assert warnings == []


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (
            (_member("a/ok"), _member("a/link", tarfile.SYMTYPE, "/etc"), _member("a/link/passwd")),
            "through a symlink",
        ),
        ((_member("a/ok"), _member("../escape")), "unsafe archive"),
        ((_member("a/ok"), _member("../l", tarfile.SYMTYPE, "/etc")), "unsafe archive"),
        ((_member("a/ok"), _member("a/hard", tarfile.LNKTYPE, "/etc/passwd")), "unsafe archive"),
    ],
    ids=["write-through-link", "dotdot", "link-named-outside", "hardlink-out"],
)
def test_a_hostile_archive_is_refused_before_anything_is_written(
    tmp_path: Path, members: tuple[tarfile.TarInfo, ...], message: str
) -> None:
    data = _archive(*((m, b"data") for m in members))
    with pytest.raises(MachineryError, match=message) as info:
        extract_copy(data, tmp_path / "out", warn=print)
    assert info.value.hint and "talosctl cp <path> -" in info.value.hint
    assert not (tmp_path / "out").exists()


def test_a_damaged_archive_is_a_clear_error(tmp_path: Path) -> None:
    for data in (b"not gzip at all", gzip.compress(b"not a tar" * 100), _archive((_member("f"), b"x"))[:-20]):
        with pytest.raises(MachineryError, match="damaged archive"):
            extract_copy(data, tmp_path / "out", warn=print)


def test_fifos_and_devices_are_skipped_with_a_warning(tmp_path: Path) -> None:
    data = _archive((_member("d/f"), b"x"), (_member("d/pipe", tarfile.FIFOTYPE), b""))
    warnings: list[str] = []
    extract_copy(data, tmp_path / "out", warn=warnings.append)
    assert (tmp_path / "out/d/f").read_text() == "x"
    assert not (tmp_path / "out/d/pipe").exists()
    assert warnings == ["skipping d/pipe: device files and FIFOs are not copied"]
