"""Files and system facts a node serves: ``ls``, ``read``, ``cp``, ``mounts``, ``processes``, ``memory``.

Paths in requests are Talos paths, resolved inside the node's root directory as a chroot would
resolve them (:mod:`ichor.machinery.inroot`: an absolute symlink starts again at the node root,
nothing climbs above it, a link loop is ``too many levels of symbolic links``), so no request --
and no symlink a process on the node made -- can reach a file outside the node. File modes are reported in Go's ``os.FileMode`` bit layout, which is what
talosctl decodes (API spec §5.3). Errors are grpclib ``GRPCError`` s with Talos's codes and texts.

This module does no networking and holds no state; machined's MachineService calls it.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import PARTITIONS, Layout
from ichor.machinery import inroot

CHUNK = 1 << 20  # stream data in 1 MiB pieces, well under the 32 MiB message limit

# Go os.FileMode type bits (API spec §5.3).
GO_MODE_DIR = 1 << 31
GO_MODE_APPEND = 1 << 30
GO_MODE_SYMLINK = 1 << 27
GO_MODE_DEVICE = 1 << 26
GO_MODE_NAMED_PIPE = 1 << 25
GO_MODE_SOCKET = 1 << 24
GO_MODE_SETUID = 1 << 23
GO_MODE_SETGID = 1 << 22
GO_MODE_CHAR_DEVICE = 1 << 21
GO_MODE_STICKY = 1 << 20
GO_MODE_IRREGULAR = 1 << 19


def go_file_mode(st_mode: int) -> int:
    """POSIX ``st_mode`` -> Go ``os.FileMode`` bits."""
    mode = st_mode & 0o777
    if stat.S_ISDIR(st_mode):
        mode |= GO_MODE_DIR
    elif stat.S_ISLNK(st_mode):
        mode |= GO_MODE_SYMLINK
    elif stat.S_ISFIFO(st_mode):
        mode |= GO_MODE_NAMED_PIPE
    elif stat.S_ISSOCK(st_mode):
        mode |= GO_MODE_SOCKET
    elif stat.S_ISCHR(st_mode):
        mode |= GO_MODE_DEVICE | GO_MODE_CHAR_DEVICE
    elif stat.S_ISBLK(st_mode):
        mode |= GO_MODE_DEVICE
    elif not stat.S_ISREG(st_mode):
        mode |= GO_MODE_IRREGULAR
    if st_mode & stat.S_ISUID:
        mode |= GO_MODE_SETUID
    if st_mode & stat.S_ISGID:
        mode |= GO_MODE_SETGID
    if st_mode & stat.S_ISVTX:
        mode |= GO_MODE_STICKY
    return mode


def _check(talos_path: str) -> None:
    """Refuses what no Talos path can be (``..`` climbing out, a NUL byte) as InvalidArgument."""
    try:
        layout_path = PurePosixPath("/") / talos_path
        if ".." in layout_path.parts:
            raise ValueError(f"path {talos_path!r} escapes the node root")
        if "\0" in talos_path:
            raise ValueError(f"path {talos_path!r} contains a NUL byte")
    except ValueError as exc:
        raise GRPCError(Status.INVALID_ARGUMENT, str(exc)) from None


@contextlib.contextmanager
def _root(layout: Layout) -> Iterator[int]:
    fd = os.open(layout.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def _normalize_root(root: str) -> str:
    root = "/" + root.lstrip("/") if not root.startswith("/") else root
    return root.rstrip("/") or "/"


def _info(st: os.stat_result, link: str, talos_name: str, relative: str) -> machine_pb2.FileInfo:
    return machine_pb2.FileInfo(
        name=talos_name,
        size=st.st_size,
        mode=go_file_mode(st.st_mode),
        modified=int(st.st_mtime),
        is_dir=stat.S_ISDIR(st.st_mode),
        link=link,
        relative_name=relative,
        uid=st.st_uid,
        gid=st.st_gid,
    )


def _entry(
    directory: int, name: str, talos_name: str, relative: str, types: set[int]
) -> machine_pb2.FileInfo | None:
    """The FileInfo of ``name`` in ``directory`` itself (a symlink is listed, never followed)."""
    try:
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except OSError as exc:
        return machine_pb2.FileInfo(name=talos_name, relative_name=relative, error=_os_text(exc, talos_name))
    if types and _list_type(st.st_mode) not in types:
        return None
    link = ""
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            link = os.readlink(name, dir_fd=directory)
    return _info(st, link, talos_name, relative)


def _list_type(st_mode: int) -> int:
    if stat.S_ISDIR(st_mode):
        return machine_pb2.ListRequest.DIRECTORY
    if stat.S_ISLNK(st_mode):
        return machine_pb2.ListRequest.SYMLINK
    if stat.S_ISREG(st_mode):
        return machine_pb2.ListRequest.REGULAR
    return machine_pb2.ListRequest.REGULAR  # Talos has no other class; devices list as files


def _os_text(exc: OSError, talos_name: str) -> str:
    return f"lstat {talos_name}: {_reason(exc)}"


@contextlib.contextmanager
def _parent(layout: Layout, talos_path: str, verb: str) -> Iterator[tuple[int, str]]:
    """The directory holding ``talos_path`` (resolved inside the node root) and its last name."""
    _check(talos_path)
    with _root(layout) as root:
        try:
            parent, name = inroot.open_parent_in_root(root, talos_path)
        except OSError as exc:
            raise GRPCError(Status.UNKNOWN, f"{verb} {talos_path}: {_reason(exc)}") from None
    try:
        yield parent, name
    finally:
        os.close(parent)


def list_files(layout: Layout, request: machine_pb2.ListRequest) -> Iterator[machine_pb2.FileInfo]:
    """``talosctl ls``: the root first (relative name ``.``), then its tree down to the depth asked.

    Every path is resolved inside the node root; symlinks are listed, not followed.
    """
    root_name = _normalize_root(request.root or "/")
    types = set(request.types)
    with _parent(layout, root_name, "lstat") as (parent, name):
        try:
            root_stat = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            raise GRPCError(Status.UNKNOWN, _os_text(exc, root_name)) from None
        if not stat.S_ISDIR(root_stat.st_mode):
            info = _entry(parent, name, root_name, os.path.basename(root_name), types)
            if info is not None:
                yield info
            return
        # Talos: recurse with a depth of 0 or below (talosctl ls -r sends -1) has no limit
        max_depth = (
            (request.recursion_depth if request.recursion_depth > 0 else None) if request.recurse else 1
        )
        first = _entry(parent, name, root_name, ".", types)
        if first is not None:
            yield first
        yield from _walk(parent, name, root_name, "", 1, max_depth, types)


def _open_dir(parent: int, name: str) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)


def _walk(
    parent: int,
    name: str,
    talos_dir: str,
    relative_dir: str,
    depth: int,
    max_depth: int | None,
    types: set[int],
) -> Iterator[machine_pb2.FileInfo]:
    if max_depth is not None and depth > max_depth:
        return
    try:
        directory = _open_dir(parent, name)
    except OSError as exc:
        yield machine_pb2.FileInfo(
            name=talos_dir, relative_name=relative_dir or ".", error=_os_text(exc, talos_dir)
        )
        return
    try:
        with os.scandir(directory) as scan:
            entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in scan)
        for entry, is_dir in entries:
            talos_name = f"{talos_dir.rstrip('/')}/{entry}"
            relative = f"{relative_dir}/{entry}" if relative_dir else entry
            info = _entry(directory, entry, talos_name, relative, types)
            if info is not None:
                yield info
            if is_dir:
                yield from _walk(directory, entry, talos_name, relative, depth + 1, max_depth, types)
    finally:
        os.close(directory)


BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def is_boot_id(talos_path: str) -> bool:
    """Whether a ``read`` path names the kernel's boot id (``//proc/./sys/...`` included)."""
    return posixpath.normpath("/" + talos_path.lstrip("/")) == BOOT_ID_PATH


def read_file(layout: Layout, talos_path: str) -> Iterator[bytes]:
    """``talosctl read``: the bytes of one regular file, in chunks; symlinks are followed, but only
    inside the node root (an absolute target starts at the node root, as in a chroot)."""
    _check(talos_path)
    with _root(layout) as root:
        try:
            # O_NONBLOCK: a FIFO planted where a file was expected must not hang the call.
            fd = inroot.open_in_root(root, talos_path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise GRPCError(Status.UNKNOWN, f"stat {talos_path}: {_reason(exc)}") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise GRPCError(Status.UNKNOWN, "path must be a regular file")
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


class _Sink:
    """Where the gzip stream of ``cp`` lands between two chunks sent to the client."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.parts, self.size = b"".join(self.parts), [], 0
        return data


_TAR_TYPES = {stat.S_IFIFO: tarfile.FIFOTYPE, stat.S_IFCHR: tarfile.CHRTYPE, stat.S_IFBLK: tarfile.BLKTYPE}


def _archive(tar: tarfile.TarFile, sink: _Sink, parent: int, name: str, arcname: str) -> Iterator[bytes]:
    """Adds ``name`` (in the directory ``parent``) and what it holds; symlinks are stored as links."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return  # removed while the tree was walked
    info = tarfile.TarInfo(arcname)
    info.mode, info.uid, info.gid, info.mtime = st.st_mode & 0o7777, st.st_uid, st.st_gid, int(st.st_mtime)
    kind = stat.S_IFMT(st.st_mode)
    if kind == stat.S_IFLNK:
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=parent)
        tar.addfile(info)
    elif kind == stat.S_IFDIR:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        directory = _open_dir(parent, name)
        try:
            for child in sorted(os.listdir(directory)):
                yield from _archive(tar, sink, directory, child, f"{arcname}/{child}")
        finally:
            os.close(directory)
    elif kind == stat.S_IFREG:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with os.fdopen(os.open(name, flags, dir_fd=parent), "rb") as handle:
            info.size = os.fstat(handle.fileno()).st_size
            tar.addfile(info, handle)
    elif kind in _TAR_TYPES:
        info.type = _TAR_TYPES[kind]
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
        tar.addfile(info)
    # sockets have no tar form (tar(1) skips them too)
    if sink.size >= CHUNK:
        yield sink.take()


def copy_tar_gz(layout: Layout, talos_path: str) -> Iterator[bytes]:
    """``talosctl cp``: a gzip-compressed tar of a path, in chunks (names relative to its parent).

    The path is resolved inside the node root; symlinks inside the tree are archived as links (an
    absolute one keeps its target text, which names a file of the node), never followed.
    """
    if not talos_path.startswith("/"):
        raise GRPCError(Status.INVALID_ARGUMENT, f"path is not absolute {talos_path}")
    with _parent(layout, talos_path, "lstat") as (parent, name):
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            raise GRPCError(Status.UNKNOWN, f"lstat {talos_path}: {_reason(exc)}") from None
        sink = _Sink()
        with (
            gzip.GzipFile(fileobj=sink, mode="wb", mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w|") as tar,
        ):
            yield from _archive(tar, sink, parent, name, name)
    if sink.size:
        yield sink.take()


def mounts(layout: Layout) -> list[machine_pb2.MountStat]:
    """``talosctl mounts``: the node's system partitions and the filesystem each lives on; on a
    machine of its own, every mount of its mount table with a size (``/dev/vda5 ... /system/state``)."""
    if layout.mount_table is not None:
        return _mount_table(layout.mount_table)
    stats = []
    for label, directory in PARTITIONS.items():
        mounted_on = f"/{directory}"
        host = layout.partition(label)
        try:
            fs = os.statvfs(host)
        except OSError:
            continue
        stats.append(
            machine_pb2.MountStat(
                filesystem=f"{label.lower()} ({host})",
                size=fs.f_blocks * fs.f_frsize,
                available=fs.f_bavail * fs.f_frsize,
                mounted_on=mounted_on,
            )
        )
    return stats


def _mount_table(table: Path) -> list[machine_pb2.MountStat]:
    stats = []
    for line in table.read_text().splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        source, target = fields[0], fields[1].replace("\\040", " ")
        try:
            fs = os.statvfs(target)
        except OSError:
            continue
        if fs.f_blocks == 0:  # proc, sysfs, cgroup...: nothing to report, as Talos skips them
            continue
        stats.append(
            machine_pb2.MountStat(
                filesystem=source,
                size=fs.f_blocks * fs.f_frsize,
                available=fs.f_bavail * fs.f_frsize,
                mounted_on=target,
            )
        )
    return stats


def memory(proc: Path = Path("/proc")) -> machine_pb2.MemInfo:
    """``talosctl memory``: ``/proc/meminfo`` in kB, field for field as Talos reports it."""
    values: dict[str, int] = {}
    for line in (proc / "meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        number = rest.split()
        if number:
            key = name.replace("(", "").replace(")", "").replace("_", "").lower()
            values[key] = int(number[0])
    fields = machine_pb2.MemInfo.DESCRIPTOR.fields_by_name
    return machine_pb2.MemInfo(**{k: v for k, v in values.items() if k in fields})


def processes(pids: list[int], proc: Path = Path("/proc")) -> list[machine_pb2.ProcessInfo]:
    """``talosctl processes`` for the given PIDs (the node's own process tree on a process node)."""
    page = os.sysconf("SC_PAGE_SIZE")
    ticks = os.sysconf("SC_CLK_TCK")
    result = []
    for pid in sorted(pids):
        base = proc / str(pid)
        try:
            raw_stat = (base / "stat").read_text()
            cmdline = (base / "cmdline").read_bytes().split(b"\0")
            executable = os.readlink(base / "exe") if (base / "exe").exists() else ""
        except OSError:
            continue  # exited while we looked
        command = raw_stat[raw_stat.index("(") + 1 : raw_stat.rindex(")")]
        fields = raw_stat[raw_stat.rindex(")") + 2 :].split()
        args = " ".join(part.decode(errors="replace") for part in cmdline if part)
        result.append(
            machine_pb2.ProcessInfo(
                pid=pid,
                ppid=int(fields[1]),
                state=fields[0],
                threads=int(fields[17]),
                cpu_time=(int(fields[11]) + int(fields[12])) / ticks,
                virtual_memory=int(fields[20]),
                resident_memory=int(fields[21]) * page,
                command=command,
                executable=executable,
                args=args,
            )
        )
    return result


def process_tree(root_pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``root_pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(found)
