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
