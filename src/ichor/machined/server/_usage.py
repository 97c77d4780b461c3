"""``DiskUsage`` (``talosctl usage``) and ``LogsContainers`` of ``machine.MachineService``, as a mixin.

DiskUsage walks each requested path inside the node root (the walk of ``talosctl ls``, so no
symlink is followed and nothing outside the root is reached) and answers as Talos's machined does:
every directory's size is its own size plus everything under it; files are sent as they are met,
a directory once its contents are summed, the requested path last. Talos's filters apply:
``recursion_depth`` (entries at that depth or deeper are summed but not sent; ``talosctl usage``
sends ``--depth`` + 1), ``all`` (files too, not just directories) and ``threshold`` (positive:
skip smaller entries; negative: skip larger ones). A depth is the entry's count of ``/`` minus the
path's, so under ``/`` the top-level directories are depth 0, as in Talos. A path that cannot be
read is one message with its ``error`` and the next path follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.machine import machine_pb2
from ichor.machined.platform import Layout
from ichor.machined.server import _files

_UNSIZED = frozenset({"/proc/kcore"})
"""Files whose reported size is not their content (Talos counts ``/proc/kcore`` as 0)."""


@dataclass
class _Folder:
    info: machine_pb2.DiskUsageInfo
    depth: int


def _depth(name: str, root_depth: int) -> int:
    return name.count("/") - root_depth


def _wanted(request: machine_pb2.DiskUsageRequest, info: machine_pb2.DiskUsageInfo, depth: int,
            is_dir: bool) -> bool:  # fmt: skip
    if request.recursion_depth > 0 and depth >= request.recursion_depth:
        return False
    if not is_dir and not request.all:
        return False
    if request.threshold > 0 and info.size < request.threshold:
        return False
    return not (request.threshold < 0 and info.size > -request.threshold)


def _normalize(path: str) -> str:
    path = path if path.startswith("/") else "/" + path
    return path.rstrip("/") or "/"


def disk_usage(layout: Layout, request: machine_pb2.DiskUsageRequest) -> Iterator[machine_pb2.DiskUsageInfo]:
    """The messages of one DiskUsage call, in the order Talos sends them."""
    for raw in request.paths:
        yield from _one_path(layout, request, _normalize(raw))


def _one_path(
    layout: Layout, request: machine_pb2.DiskUsageRequest, path: str
) -> Iterator[machine_pb2.DiskUsageInfo]:
    root_depth = path.count("/")
    listing = _files.list_files(layout, machine_pb2.ListRequest(root=path, recurse=True, recursion_depth=0))
    stack: list[_Folder] = []

    def close_until(parent: str | None) -> Iterator[machine_pb2.DiskUsageInfo]:
        """Send the open directories that do not contain ``parent`` (all of them when None)."""
        while stack and (parent is None or (stack[-1].info.name.rstrip("/") or "/") != parent):
            folder = stack.pop()
            if stack:
                stack[-1].info.size += folder.info.size
            if _wanted(request, folder.info, folder.depth if stack else 0, True):
                yield folder.info

    try:
        for entry in listing:
            if entry.error:
                yield machine_pb2.DiskUsageInfo(
                    name=entry.name, relative_name=entry.relative_name, error=entry.error
                )
                continue
            size = 0 if entry.name in _UNSIZED else max(entry.size, 0)
            info = machine_pb2.DiskUsageInfo(name=entry.name, relative_name=entry.relative_name, size=size)
            if stack:
                parent = entry.name.rsplit("/", 1)[0] or "/"
                yield from close_until(parent)
            if entry.is_dir:
                stack.append(_Folder(info, _depth(entry.name, root_depth)))
                continue
            if stack:
                stack[-1].info.size += size
            if _wanted(request, info, _depth(entry.name, root_depth), False):
                yield info
    except GRPCError as exc:  # the path itself: missing, unreadable, outside the root
        yield machine_pb2.DiskUsageInfo(name=path, relative_name=path, error=exc.message or "")
        return
    yield from close_until(None)


class UsageMethods:
    """Mixed into MachineService (``self._node`` is the node: its layout and supervisor)."""

    _node: Any

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:  # provided by MachineService
        raise NotImplementedError

    async def DiskUsage(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "DiskUsage")
        for info in disk_usage(self._node.layout, request):
            await stream.send_message(info)

    async def LogsContainers(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "LogsContainers")
        reply = machine_pb2.LogsContainer(ids=registered_logs(self._node))
        await stream.send_message(machine_pb2.LogsContainersResponse(messages=[reply]))


CONTROLLER_RUNTIME_LOG = "controller-runtime"
"""The log id that is not a service: the controller runtime's own log, as in Talos."""


def registered_logs(node: Any) -> list[str]:
    """The log ids ``talosctl logs`` can read now: as in Talos, those something has written to (every
    service that logged, and the controller runtime)."""
    layout: Layout = node.layout
    ids = [info.id for info in node.supervisor.list() if node.supervisor.log_path(info.id).exists()]
    if layout.controller_runtime_log.exists():
        ids.append(CONTROLLER_RUNTIME_LOG)
    return sorted(ids)
