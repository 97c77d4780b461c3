from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import Layout
from ichor.machined.server import _files


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    root = tmp_path / "node"
    (root / "var/log").mkdir(parents=True)
    (root / "var/log/machined.log").write_text("booted\n")
    (root / "var/lib/deep/er").mkdir(parents=True)
    (root / "var/lib/deep/er/file").write_bytes(b"x" * 10)
    (root / "var/link").symlink_to("log/machined.log")
    (root / "system/state").mkdir(parents=True)
    return Layout(root=root, address="127.5.0.2")


def _ls(layout: Layout, **kwargs: object) -> list[machine_pb2.FileInfo]:
    return list(_files.list_files(layout, machine_pb2.ListRequest(**kwargs)))


def test_ls_lists_root_first_then_direct_children(layout: Layout) -> None:
    infos = _ls(layout, root="var")
    assert [i.relative_name for i in infos] == [".", "lib", "link", "log"]
    assert infos[0].name == "/var" and infos[0].is_dir
    assert infos[0].mode & _files.GO_MODE_DIR
    link = next(i for i in infos if i.relative_name == "link")
    assert link.link == "log/machined.log" and link.mode & _files.GO_MODE_SYMLINK


def test_ls_recursion_depth(layout: Layout) -> None:
    unlimited = [i.relative_name for i in _ls(layout, root="/var/lib", recurse=True)]
    assert unlimited == [".", "deep", "deep/er", "deep/er/file"]
    limited = [i.relative_name for i in _ls(layout, root="/var/lib/", recurse=True, recursion_depth=2)]
    assert limited == [".", "deep", "deep/er"]


def test_ls_of_a_file_uses_its_base_name(layout: Layout) -> None:
    (info,) = _ls(layout, root="/var/log/machined.log")
    assert info.relative_name == "machined.log" and info.size == 7


def test_ls_type_filter(layout: Layout) -> None:
    dirs = _ls(layout, root="/var", recurse=True, types=[machine_pb2.ListRequest.DIRECTORY])
    assert all(i.is_dir for i in dirs) and len(dirs) == 5


@pytest.mark.parametrize(
    ("path", "code"), [("/nope", Status.UNKNOWN), ("/../../etc", Status.INVALID_ARGUMENT)]
)
def test_ls_errors(layout: Layout, path: str, code: Status) -> None:
    with pytest.raises(GRPCError) as info:
        _ls(layout, root=path)
    assert info.value.status is code


def test_read_regular_file_and_refuse_others(layout: Layout) -> None:
    assert b"".join(_files.read_file(layout, "/var/log/machined.log")) == b"booted\n"
    with pytest.raises(GRPCError, match="path must be a regular file"):
        list(_files.read_file(layout, "/var/log"))
    with pytest.raises(GRPCError, match="no such file"):
        list(_files.read_file(layout, "/var/missing"))


def test_copy_is_a_gzip_tar_of_the_path(layout: Layout) -> None:
    data = b"".join(_files.copy_tar_gz(layout, "/var/lib"))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        names = sorted(tar.getnames())
        assert names == ["lib", "lib/deep", "lib/deep/er", "lib/deep/er/file"]
        member = tar.extractfile("lib/deep/er/file")
        assert member is not None and member.read() == b"x" * 10
    with pytest.raises(GRPCError, match="path is not absolute var"):
        list(_files.copy_tar_gz(layout, "var"))


def test_go_file_mode_bits() -> None:
    assert _files.go_file_mode(stat.S_IFDIR | 0o755) == _files.GO_MODE_DIR | 0o755
    assert _files.go_file_mode(stat.S_IFREG | 0o4755) == _files.GO_MODE_SETUID | 0o755
    assert _files.go_file_mode(stat.S_IFSOCK | 0o600) == _files.GO_MODE_SOCKET | 0o600


def test_memory_and_processes_and_mounts(layout: Layout) -> None:
    mem = _files.memory()
    assert mem.memtotal > 0 and mem.memavailable > 0
    pids = _files.process_tree(os.getpid())
    assert os.getpid() in pids
    infos = _files.processes(pids)
    me = next(p for p in infos if p.pid == os.getpid())
    assert me.resident_memory > 0
    assert me.ppid == os.getppid()
    assert "pytest" in me.args or "python" in me.command.lower()
    stats = _files.mounts(layout)
    assert {s.mounted_on for s in stats} == {"/system/state", "/var"}
    assert all(s.size >= s.available > 0 for s in stats)


# --- no path leaves the node root (issue 13, defect 6) ------------------------------------------------


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from ichor.machinery import inroot

    if request.param == "openat2" and not inroot.has_openat2():
        pytest.skip("this kernel has no openat2 (the walk is what runs here)")
    if request.param == "walk":
        monkeypatch.setattr(inroot, "_kernel", False)
    return str(request.param)


@pytest.fixture
def host_secret(layout: Layout) -> Path:
    """A file outside the node root, as the host's /etc/shadow is."""
    secret = layout.root.parent / "shadow"
    secret.write_text("host secret\n")
    return secret


def test_read_of_a_link_to_a_host_file_never_returns_the_host_file(
    layout: Layout, host_secret: Path, resolver: str
) -> None:
    # The probe's reproduction: ln -s /etc/shadow <root>/var/log/x; talosctl read /var/log/x
    (layout.root / "var/log/x").symlink_to("/etc/shadow")
    with pytest.raises(GRPCError, match="stat /var/log/x: no such file or directory") as info:
        list(_files.read_file(layout, "/var/log/x"))
    assert info.value.status is Status.UNKNOWN
    (layout.root / "etc").mkdir()
    (layout.root / "etc/shadow").write_text("node shadow\n")
    assert b"".join(_files.read_file(layout, "/var/log/x")) == b"node shadow\n"
    # The host path spelled absolutely, and relatively with more .. than the root is deep.
    (layout.root / "var/log/abs").symlink_to(host_secret)
    (layout.root / "var/log/rel").symlink_to("../" * 12 + "shadow")
    for path in ("/var/log/abs", "/var/log/rel"):
        with pytest.raises(GRPCError, match="no such file or directory"):
            list(_files.read_file(layout, path))


def test_read_follows_links_inside_the_root(layout: Layout, resolver: str) -> None:
    (layout.root / "var/log/current").symlink_to("/var/log/machined.log")
    assert b"".join(_files.read_file(layout, "/var/log/current")) == b"booted\n"
    assert b"".join(_files.read_file(layout, "/var/link")) == b"booted\n"


def test_a_link_loop_is_a_clear_error_not_a_hang(layout: Layout, resolver: str) -> None:
    (layout.root / "var/a").symlink_to("/var/b")
    (layout.root / "var/b").symlink_to("a")
    with pytest.raises(GRPCError, match="stat /var/a: too many levels of symbolic links"):
        list(_files.read_file(layout, "/var/a"))
    with pytest.raises(GRPCError, match="lstat /var/a/x: too many levels of symbolic links"):
        _ls(layout, root="/var/a/x")
    with pytest.raises(GRPCError, match="too many levels of symbolic links"):
        list(_files.copy_tar_gz(layout, "/var/a/x"))
    # Listed, the loop is just two links.
    links = {i.relative_name: i.link for i in _ls(layout, root="/var")}
    assert links["a"] == "/var/b" and links["b"] == "a"


def test_a_fifo_is_refused_by_read_without_blocking(layout: Layout, resolver: str) -> None:
    os.mkfifo(layout.root / "var/log/pipe")
    with pytest.raises(GRPCError, match="path must be a regular file"):
        list(_files.read_file(layout, "/var/log/pipe"))


def test_ls_through_a_linked_directory_lists_the_nodes_directory(
    layout: Layout, host_secret: Path, resolver: str
) -> None:
    (layout.root / "var/hostdir").symlink_to(host_secret.parent)  # the host dir holding the root
    (layout.root / "var/etc").symlink_to("/system")
    assert [i.relative_name for i in _ls(layout, root="/var/etc")] == ["etc"]  # the link itself
    assert [i.relative_name for i in _ls(layout, root="/var/etc/state")] == ["."]  # the node's /system/state
    with pytest.raises(GRPCError, match="lstat /var/hostdir/shadow: no such file or directory"):
        _ls(layout, root="/var/hostdir/shadow")


def test_copy_archives_links_as_links_and_never_reads_through_them(
    layout: Layout, host_secret: Path, resolver: str
) -> None:
    (layout.root / "var/log/x").symlink_to("/etc/shadow")
    (layout.root / "var/log/host").symlink_to(host_secret)
    data = b"".join(_files.copy_tar_gz(layout, "/var/log"))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["log", "log/host", "log/machined.log", "log/x"]
        assert members["log/x"].issym() and members["log/x"].linkname == "/etc/shadow"
        assert members["log/host"].issym() and members["log/host"].size == 0
    assert b"host secret" not in gzip.decompress(data)
    # A path through a link is resolved in the root: the node's /system, not the host's.
    (layout.root / "var/sys").symlink_to("/system")
    data = b"".join(_files.copy_tar_gz(layout, "/var/sys/state"))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert tar.getnames() == ["state"]


@pytest.mark.parametrize("call", ["read", "ls", "cp"])
def test_nul_bytes_in_paths_are_invalid_argument(layout: Layout, call: str) -> None:
    path = "/var/log/\0machined.log"
    with pytest.raises(GRPCError, match="contains a NUL byte") as info:
        if call == "read":
            list(_files.read_file(layout, path))
        elif call == "ls":
            _ls(layout, root=path)
        else:
            list(_files.copy_tar_gz(layout, path))
    assert info.value.status is Status.INVALID_ARGUMENT
