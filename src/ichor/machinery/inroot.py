"""Opening a path inside a directory as if that directory were ``/``: how a node's files are served.

A node's files live under its root directory (``<root>/var/log/...``), and processes on the node
make symlinks there that are meant for the node's view: ``/var/log/x -> /etc/shadow`` names the
node's ``/etc/shadow``, not the host's. Every path an API request names is therefore resolved as a
chroot would resolve it: an absolute symlink starts again at the root, ``..`` stops at the root,
and more than :data:`MAX_SYMLINKS` links on the way is ``ELOOP``. Nothing this module opens can be
outside the root, whatever links exist or appear while it walks.

The kernel does this with ``openat2(2)`` and ``RESOLVE_IN_ROOT`` (Linux 5.6+), used when it answers;
elsewhere (older kernels, a seccomp filter returning ``ENOSYS``/``EPERM``) the same walk runs here,
one component at a time through directory descriptors opened with ``O_NOFOLLOW``.

Errors are :class:`OSError` with the errno the kernel would give (``ENOENT``, ``ENOTDIR``,
``ELOOP``); a path holding a NUL byte is :class:`ValueError`. Callers turn them into their own
errors. This module knows nothing about nodes, gRPC or Talos paths beyond ``/``-separated names.
"""

from __future__ import annotations

__all__ = ["MAX_SYMLINKS", "has_openat2", "open_in_root", "open_parent_in_root"]

import ctypes
import errno
import os
import stat
import struct
from typing import Any

MAX_SYMLINKS = 40
"""Links followed while resolving one path before ``ELOOP`` (Linux's own limit)."""

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_kernel: bool | None = None  # does openat2 work here? None: not asked yet


def _libc_syscall() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    return syscall


_syscall = _libc_syscall()


def _openat2(root_fd: int, path: str, flags: int) -> int | None:
    """``openat2(root_fd, path, {flags, RESOLVE_IN_ROOT})``; None when the kernel cannot do it."""
    global _kernel
    number = _SYS_OPENAT2.get(os.uname().machine)
    if _kernel is False or _syscall is None or number is None:
        return None
    how = ctypes.create_string_buffer(
        struct.pack("QQQ", flags | os.O_CLOEXEC, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    )
    fd = _syscall(
        ctypes.c_long(number), ctypes.c_int(root_fd), ctypes.c_char_p(os.fsencode(path) or b"."),
        how, ctypes.c_size_t(len(how.raw)),
    )  # fmt: skip
    if fd >= 0:
        _kernel = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM):
        _kernel = False  # no openat2 here (or filtered): walk instead, from now on
        return None
    if err == errno.EAGAIN:  # a rename raced the lookup; the walk gives a consistent answer
        return None
    raise OSError(err, os.strerror(err), path)


def has_openat2() -> bool:
    """Whether this kernel resolves paths in a root itself (asks it once, with a harmless lookup)."""
    if _kernel is None:
        root = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            fd = _openat2(root, ".", os.O_PATH)
        finally:
            os.close(root)
        if fd is not None:
            os.close(fd)
    return bool(_kernel)


def _components(path: str) -> list[str]:
    if "\0" in path:
        raise ValueError(f"path {path!r} contains a NUL byte")
    return [part for part in path.split("/") if part not in ("", ".")]


def _walk(root_fd: int, path: str, flags: int) -> int:
    """What openat2 with RESOLVE_IN_ROOT does, one component at a time (see the module docstring)."""
    todo = _components(path)
    stack: list[int] = []  # directory fds below the root, for "..": popping never passes the root
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            here = stack[-1] if stack else root_fd
            if name == "..":
                if stack:
                    os.close(stack.pop())
                continue
            last = not todo
            if last and flags & os.O_NOFOLLOW:
                return os.open(name, flags | os.O_CLOEXEC, dir_fd=here)
            st = os.stat(name, dir_fd=here, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    while stack:
                        os.close(stack.pop())
                todo[:0] = _components(target)
                continue
            if last:
                # O_NOFOLLOW: a symlink swapped in since the stat is refused (ELOOP), not followed.
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=here)
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            stack.append(
                os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=here)
            )
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=stack[-1] if stack else root_fd)
    finally:
        for fd in stack:
            os.close(fd)


def open_in_root(root_fd: int, path: str, flags: int, *, kernel: bool = True) -> int:
    """An fd for ``path`` resolved inside the directory ``root_fd`` (see the module docstring).

    ``flags`` are ``os.open`` flags; with ``O_NOFOLLOW`` a final symlink is opened itself (use
    ``O_PATH`` with it). ``kernel=False`` skips openat2 (the tests run both resolvers).
    """
    components = _components(path)
    if kernel:
        fd = _openat2(root_fd, "/".join(components), flags)
        if fd is not None:
            return fd
    return _walk(root_fd, path, flags)


def open_parent_in_root(root_fd: int, path: str, *, kernel: bool = True) -> tuple[int, str]:
    """``(fd of the directory holding path's last component, that component)``, for lstat-like
    calls (``os.stat(name, dir_fd=fd, follow_symlinks=False)``); the component is ``"."`` for the root."""
    components = _components(path)
    if not components or components[-1] == "..":
        return open_in_root(root_fd, path, os.O_PATH | os.O_DIRECTORY, kernel=kernel), "."
    parent = open_in_root(root_fd, "/".join(components[:-1]), os.O_PATH | os.O_DIRECTORY, kernel=kernel)
    return parent, components[-1]
