"""Paths resolved inside a root as a chroot resolves them, by openat2 and by the fallback walk."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import inroot


@pytest.fixture(params=["openat2", "walk"])
def kernel(request: pytest.FixtureRequest) -> bool:
    if request.param == "openat2" and not inroot.has_openat2():
        pytest.skip("this kernel has no openat2 (the walk is what runs here)")
    return bool(request.param == "openat2")


@pytest.fixture
def root(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A node root with its own /etc, next to a 'host' file the links aim at."""
    (tmp_path / "host-secret").write_text("host\n")
    node = tmp_path / "node"
    (node / "etc").mkdir(parents=True)
    (node / "etc/shadow").write_text("node shadow\n")
    (node / "var/log").mkdir(parents=True)
    (node / "var/log/machined.log").write_text("booted\n")
    fd = os.open(node, os.O_PATH | os.O_DIRECTORY)
    try:
        yield node, fd
    finally:
        os.close(fd)


def _read(root_fd: int, path: str, kernel: bool) -> str:
    fd = inroot.open_in_root(root_fd, path, os.O_RDONLY, kernel=kernel)
    with os.fdopen(fd) as handle:
        return handle.read()


def test_plain_and_relative_links_inside_the_root(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/log/current").symlink_to("machined.log")
    (node / "var/latest").symlink_to("log/current")
    assert _read(fd, "/var/log/machined.log", kernel) == "booted\n"
    assert _read(fd, "var/latest", kernel) == "booted\n"


def test_an_absolute_link_starts_at_the_root_not_at_the_host(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/log/x").symlink_to("/etc/shadow")
    assert _read(fd, "/var/log/x", kernel) == "node shadow\n"
    (node / "var/log/host").symlink_to(node.parent / "host-secret")  # the host's absolute path
    with pytest.raises(FileNotFoundError):
        _read(fd, "/var/log/host", kernel)


def test_a_relative_link_cannot_climb_above_the_root(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/log/up").symlink_to("../../../../../../host-secret")
    with pytest.raises(FileNotFoundError):
        _read(fd, "/var/log/up", kernel)
    (node / "var/log/etc").symlink_to("../../../../../../etc/shadow")  # clamps at the root: the node's
    assert _read(fd, "/var/log/etc", kernel) == "node shadow\n"


def test_directories_on_the_way_are_resolved_in_the_root_too(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/conf").symlink_to("/etc")
    assert _read(fd, "/var/conf/shadow", kernel) == "node shadow\n"
    (node / "var/hostdir").symlink_to(node.parent)
    with pytest.raises(FileNotFoundError):
        _read(fd, "/var/hostdir/host-secret", kernel)


def test_link_loops_are_eloop(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/a").symlink_to("b")
    (node / "var/b").symlink_to("/var/a")
    (node / "var/self").symlink_to("self")
    for path in ("/var/a", "/var/self", "/var/a/below"):
        with pytest.raises(OSError) as info:
            _read(fd, path, kernel)
        assert info.value.errno == errno.ELOOP, path


def test_a_file_on_the_way_is_enotdir_and_nul_is_refused(root: tuple[Path, int], kernel: bool) -> None:
    _, fd = root
    with pytest.raises(NotADirectoryError):
        _read(fd, "/var/log/machined.log/x", kernel)
    with pytest.raises(ValueError, match="NUL byte"):
        _read(fd, "/var/log/\0machined.log", kernel)


def test_o_nofollow_opens_the_link_itself(root: tuple[Path, int], kernel: bool) -> None:
    node, fd = root
    (node / "var/log/x").symlink_to("/etc/shadow")
    link = inroot.open_in_root(fd, "/var/log/x", os.O_PATH | os.O_NOFOLLOW, kernel=kernel)
    try:
        assert os.readlink("", dir_fd=link) == "/etc/shadow"
    finally:
        os.close(link)
    parent, name = inroot.open_parent_in_root(fd, "/var/log/x", kernel=kernel)
    try:
        assert name == "x" and os.path.islink(f"/proc/self/fd/{parent}/x")
    finally:
        os.close(parent)
