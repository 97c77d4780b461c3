"""Files and system facts a node serves: ``ls``, ``read``, ``cp``, ``mounts``, ``processes``, ``memory``.

Paths in requests are Talos paths, resolved through the node's :class:`~ichor.machined.platform.Layout`
(on the container platform ``/`` is the node's root directory), so no request can reach a file
outside the node. File modes are reported in Go's ``os.FileMode`` bit layout, which is what
talosctl decodes (API spec §5.3). Errors are grpclib ``GRPCError`` s with Talos's codes and texts.

This module does no networking and holds no state; machined's MachineService calls it.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import PARTITIONS, Layout

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


def _resolve(layout: Layout, talos_path: str) -> Path:
    try:
        return layout.path(talos_path)
    except ValueError as exc:
        raise GRPCError(Status.INVALID_ARGUMENT, str(exc)) from None


def _normalize_root(root: str) -> str:
    root = "/" + root.lstrip("/") if not root.startswith("/") else root
    return root.rstrip("/") or "/"


def _info(host: Path, talos_name: str, relative: str, types: set[int]) -> machine_pb2.FileInfo | None:
    try:
        st = host.lstat()
    except OSError as exc:
        return machine_pb2.FileInfo(name=talos_name, relative_name=relative, error=_os_text(exc, talos_name))
    kind = _list_type(st.st_mode)
    if types and kind not in types:
        return None
    link = ""
    if stat.S_ISLNK(st.st_mode):
        try:
            link = os.readlink(host)
        except OSError:
            link = ""
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


def _list_type(st_mode: int) -> int:
    if stat.S_ISDIR(st_mode):
        return machine_pb2.ListRequest.DIRECTORY
    if stat.S_ISLNK(st_mode):
        return machine_pb2.ListRequest.SYMLINK
    if stat.S_ISREG(st_mode):
        return machine_pb2.ListRequest.REGULAR
    return machine_pb2.ListRequest.REGULAR  # Talos has no other class; devices list as files


def _os_text(exc: OSError, talos_name: str) -> str:
    reason = (exc.strerror or str(exc)).lower()
    return f"lstat {talos_name}: {reason}"


def list_files(layout: Layout, request: machine_pb2.ListRequest) -> Iterator[machine_pb2.FileInfo]:
    """``talosctl ls``: the root first (relative name ``.``), then its tree down to the depth asked."""
    root_name = _normalize_root(request.root or "/")
    root = _resolve(layout, root_name)
    try:
        root_stat = root.lstat()
    except OSError as exc:
        raise GRPCError(Status.UNKNOWN, _os_text(exc, root_name)) from None
    types = set(request.types)
    if not stat.S_ISDIR(root_stat.st_mode):
        info = _info(root, root_name, os.path.basename(root_name), types)
        if info is not None:
            yield info
        return
    max_depth = (request.recursion_depth or None) if request.recurse else 1
    first = _info(root, root_name, ".", types)
    if first is not None:
        yield first
    yield from _walk(root, root_name, "", 1, max_depth, types)


def _walk(
    directory: Path, talos_dir: str, relative_dir: str, depth: int, max_depth: int | None, types: set[int]
) -> Iterator[machine_pb2.FileInfo]:
    if max_depth is not None and depth > max_depth:
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        yield machine_pb2.FileInfo(
            name=talos_dir, relative_name=relative_dir or ".", error=_os_text(exc, talos_dir)
        )
        return
    for entry in entries:
        talos_name = f"{talos_dir.rstrip('/')}/{entry.name}"
        relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
        info = _info(Path(entry.path), talos_name, relative, types)
        if info is not None:
            yield info
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), talos_name, relative, depth + 1, max_depth, types)


def read_file(layout: Layout, talos_path: str) -> Iterator[bytes]:
    """``talosctl read``: the bytes of one regular file, in chunks."""
    host = _resolve(layout, talos_path)
    try:
        st = host.stat()
    except OSError as exc:
        raise GRPCError(Status.UNKNOWN, f"stat {talos_path}: {(exc.strerror or str(exc)).lower()}") from None
    if not stat.S_ISREG(st.st_mode):
        raise GRPCError(Status.UNKNOWN, "path must be a regular file")
    with host.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def copy_tar_gz(layout: Layout, talos_path: str) -> Iterator[bytes]:
    """``talosctl cp``: a gzip-compressed tar of a path, in chunks (names relative to its parent)."""
    if not talos_path.startswith("/"):
        raise GRPCError(Status.INVALID_ARGUMENT, f"path is not absolute {talos_path}")
    host = _resolve(layout, talos_path)
    if not host.exists() and not host.is_symlink():
        raise GRPCError(Status.UNKNOWN, f"lstat {talos_path}: no such file or directory")
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        tar.add(host, arcname=host.name or ".", recursive=True)
    data = buffer.getvalue()
    for offset in range(0, len(data), CHUNK):
        yield data[offset : offset + CHUNK]


def mounts(layout: Layout) -> list[machine_pb2.MountStat]:
    """``talosctl mounts``: the node's system partitions and the filesystem each lives on."""
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
