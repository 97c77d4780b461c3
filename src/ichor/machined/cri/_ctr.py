"""Talking to a node's containerd through ``ctr``, the client Debian ships with containerd 1.6.20.

Why ``ctr`` and not gRPC stubs: containerd's protos import gogoproto and ``containerd/api/types``
(about 40 files to vendor and rewrite before ``protoc`` accepts them), while the few calls a node
makes here — version, image list, image pull, container and task lists — are one ``ctr`` command
each. Measured on this machine: ``ctr version`` against a running containerd returns in 11 ms
(median of 10), far under the 5 s health-check period, so the process start costs nothing a user sees.
What ``ctr`` does not print, an image's creation time (``talosctl image ls``'s CREATED), is read
from containerd's Images API directly (``/containerd.services.images.v1.Images/List`` over the
same socket, namespace in the ``containerd-namespace`` metadata; the one message set Ichor declares
is ``ichor/api/protos/containerd/images.proto``).

Every command runs through :func:`ichor.machinery.proc.run` in a thread; a containerd that does
not answer is :class:`ContainerdUnavailableError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ichor.machined.cri._errors import ContainerdUnavailableError, CRIError
from ichor.machined.cri._pull import PullAttemptError
from ichor.machinery import proc
from ichor.machinery.errors import ProcessError

__all__ = [
    "TASK_LOG_DIR",
    "Container",
    "Ctr",
    "Image",
    "TaskMetrics",
    "parse_containers",
    "parse_images",
    "parse_metrics",
    "parse_size",
]

CTR_TIMEOUT = 10.0
TASK_LOG_DIR = "/var/log/containers"
"""Where a task that machined (re)starts in the background writes its output (node-relative)."""
PULL_TIMEOUT = 600.0
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


@dataclass(frozen=True)
class Image:
    name: str
    digest: str
    size: int
    """Bytes, from ``ctr``'s rounded figure (e.g. ``2.1 MiB``)."""
    created: datetime | None = None
    """When containerd first recorded the image (UTC); None when its Images API had no such name."""


@dataclass(frozen=True)
class Container:
    id: str
    image: str
    pid: int
    status: str
    """The task's status upper-cased as Talos shows it (``RUNNING``, ``STOPPED``), ``CREATED`` with no task."""


@dataclass(frozen=True)
class TaskMetrics:
    """What ``talosctl stats`` shows of a running task, in Talos's units."""

    memory_usage: int
    """Bytes in use less the inactive page cache (``usage - inactive_file``), as Talos counts it."""
    cpu_usage: int
    """CPU time used so far, in nanoseconds (cgroup v1's ``cpuacct.usage``; v2's ``usage_usec`` x 1000)."""


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CRIError(f"ctr printed {what} that are not JSON: {err}") from err
    if not isinstance(data, dict):
        raise CRIError(f"ctr printed {what} that are not a JSON object: {text[:200]!r}")
    return data


def parse_metrics(text: str) -> TaskMetrics:
    """``ctr tasks metrics --format json``: containerd's cgroup v2 ``Metrics`` (``memory.usage``,
    ``memory.inactive_file``, ``cpu.usage_usec``) or v1's (``memory.usage.usage``,
    ``memory.total_inactive_file``, ``cpu.usage.total``), whichever the node's cgroup tree is."""
    data = _json_object(text, "task metrics")
    memory = data.get("memory") or {}
    cpu = data.get("cpu") or {}
    usage = memory.get("usage", 0)
    if isinstance(usage, dict):  # cgroup v1
        used, inactive = int(usage.get("usage", 0)), int(memory.get("total_inactive_file", 0))
        cpu_ns = int((cpu.get("usage") or {}).get("total", 0))
    else:
        used, inactive = int(usage), int(memory.get("inactive_file", 0))
        cpu_ns = int(cpu.get("usage_usec", 0)) * 1000
    return TaskMetrics(memory_usage=used - inactive if inactive < used else 0, cpu_usage=cpu_ns)


def parse_size(text: str) -> int:
    """``2.1 MiB`` -> bytes (``ctr``'s ``progress.Bytes`` format)."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?i?B)\s*", text)
    if match is None or match.group(2) not in _UNITS:
        raise CRIError(f"ctr printed an image size it cannot be read back from: {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def parse_images(text: str) -> list[Image]:
    """``ctr images ls``: ``REF TYPE DIGEST SIZE PLATFORMS LABELS`` (the size holds a space)."""
    images = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5:
            continue
        images.append(Image(name=fields[0], digest=fields[2], size=parse_size(f"{fields[3]} {fields[4]}")))
    return images


def parse_containers(containers: str, tasks: str) -> list[Container]:
    """``ctr containers ls`` (``CONTAINER IMAGE RUNTIME``) joined with ``ctr tasks ls`` (``TASK PID STATUS``)."""
    running: dict[str, tuple[int, str]] = {}
    for line in tasks.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[1].isdigit():
            running[fields[0]] = (int(fields[1]), fields[2].upper())
    out = []
    for line in containers.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 2:
            continue
        pid, status = running.get(fields[0], (0, "CREATED"))
        out.append(Container(id=fields[0], image=fields[1], pid=pid, status=status))
    return out


class Ctr:
    """``ctr`` against one containerd socket."""

    def __init__(self, address: Path, *, binary: str | None = None) -> None:
        self.address = address
        self.binary = binary or shutil.which("ctr") or "/usr/bin/ctr"

    def _run(self, namespace: str | None, *args: str, timeout: float = CTR_TIMEOUT) -> str:
        argv = [self.binary, "--address", str(self.address)]
        if namespace:
            argv += ["--namespace", namespace]
        try:
            done = proc.run([*argv, *args], timeout=timeout, check=False)
        except ProcessError as err:  # did not start, or timed out
            raise CRIError(f"ctr {' '.join(args)}: {(err.stderr_tail or str(err)).strip()}") from err
        if done.exit_code == 0:
            return done.stdout
        stderr = done.stderr.strip()
        # Only a failure to reach containerd's own socket: a registry refusing a pull is not that.
        if f'failed to dial "{self.address}"' in stderr or f"dial unix {self.address}" in stderr:
            raise ContainerdUnavailableError(
                f"containerd at {self.address} does not answer: {stderr.splitlines()[-1]}",
                hint="see `talosctl services` and `talosctl logs containerd` / `talosctl logs cri`",
            )
        if args[:2] == ("images", "pull"):
            raise PullAttemptError(stderr)
        raise CRIError(f"ctr {' '.join(args)}: {stderr[-2000:] or f'exit code {done.exit_code}'}")

    async def version(self) -> str:
        """The server's version (the health check): ``1.6.20``."""
        text = await asyncio.to_thread(self._run, None, "version")
        server = text.split("Server:", 1)[-1]
        match = re.search(r"Version:\s*(\S+)", server)
        if "Server:" not in text or match is None:
            raise ContainerdUnavailableError(f"containerd at {self.address} sent no version")
        return match.group(1)

    async def images(self, namespace: str) -> list[Image]:
        """``ctr images ls`` (name, digest, size) with each image's creation time from containerd."""
        listed = parse_images(await asyncio.to_thread(self._run, namespace, "images", "ls"))
        if not listed:
            return listed
        created = await self.image_times(namespace)
        return [dataclasses.replace(image, created=created.get(image.name)) for image in listed]

    async def image_times(self, namespace: str) -> dict[str, datetime]:
        """Each image's ``created_at`` (UTC) from containerd's Images API, by name."""
        from grpclib.client import Channel
        from grpclib.exceptions import GRPCError, StreamTerminatedError

        from ichor.api.gen.containerd import images_grpc, images_pb2

        channel = Channel(path=str(self.address))
        try:
            reply = await images_grpc.ImagesStub(channel).List(
                images_pb2.ListImagesRequest(),
                metadata={"containerd-namespace": namespace},
                timeout=CTR_TIMEOUT,
            )
        except (OSError, StreamTerminatedError, TimeoutError) as err:
            raise ContainerdUnavailableError(
                f"containerd at {self.address} does not answer: {err or type(err).__name__}",
                hint="see `talosctl services` and `talosctl logs containerd` / `talosctl logs cri`",
            ) from None
        except GRPCError as err:
            raise CRIError(f"containerd images list: {err.message or err.status.name}") from None
        finally:
            channel.close()
        return {
            image.name: image.created_at.ToDatetime(tzinfo=UTC)
            for image in reply.images
            if image.HasField("created_at")
        }

    async def containers(self, namespace: str) -> list[Container]:
        containers = await asyncio.to_thread(self._run, namespace, "containers", "ls")
        tasks = await asyncio.to_thread(self._run, namespace, "tasks", "ls")
        return parse_containers(containers, tasks)

    async def info(self, namespace: str, container_id: str) -> dict[str, Any]:
        """``ctr containers info``: the container's record (labels, spec, extensions) as JSON."""
        text = await asyncio.to_thread(self._run, namespace, "containers", "info", container_id)
        return _json_object(text, "container details")

    def run_args(self, namespace: str, container_id: str, config: Path) -> list[str]:
        """``ctr run --rm --config <config.json> <id>``: create the container from an OCI spec and run
        its task in the foreground. ``ctr`` relays the task's stdout/stderr, forwards the signals it
        gets (SIGTERM stops the task) and exits with the task's status; ``--rm`` deletes the
        container when the task ends."""
        argv = [self.binary, "--address", str(self.address), "--namespace", namespace]
        return [*argv, "run", "--rm", "--config", str(config), container_id]

    async def task_pid(self, namespace: str, container_id: str) -> int:
        """The PID of the container's running task (0 while there is none)."""
        for container in await self.containers(namespace):
            if container.id == container_id and container.status == "RUNNING":
                return container.pid
        return 0

    async def remove(self, namespace: str, container_id: str) -> None:
        """Kill and delete the container's task, then the container; whatever is missing is skipped."""
        for args in (("tasks", "delete", "--force", container_id), ("containers", "delete", container_id)):
            try:
                await asyncio.to_thread(self._run, namespace, *args)
            except CRIError as err:
                if "not found" not in str(err):
                    raise

    async def metrics(self, namespace: str, container_id: str) -> TaskMetrics:
        """The running task's cgroup figures, read by containerd from the cgroup it put the task in."""
        text = await asyncio.to_thread(
            self._run, namespace, "tasks", "metrics", "--format", "json", container_id
        )
        return parse_metrics(text)

    async def kill(self, namespace: str, container_id: str, signal: str = "SIGTERM") -> None:
        """Send ``signal`` to the task's init process."""
        await asyncio.to_thread(self._run, namespace, "tasks", "kill", "--signal", signal, container_id)

    async def start_detached(self, namespace: str, container_id: str, log: Path) -> None:
        """Delete the container's stopped task and start a new one in the background, its stdout and
        stderr appended to ``log`` (a task started detached has no reader of its own)."""
        await asyncio.to_thread(self._run, namespace, "tasks", "delete", container_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        uri = f"file://{log}"
        await asyncio.to_thread(
            self._run, namespace, "tasks", "start", "--detach", "--log-uri", uri, container_id
        )

    async def mount_image(self, namespace: str, reference: str, target: Path) -> None:
        """Mount a writable snapshot of the pulled image ``reference`` at ``target`` (a container's
        root file system for ``ctr run --config``); a mount left at ``target`` is replaced."""
        await self.unmount_image(namespace, target)
        target.mkdir(parents=True, exist_ok=True, mode=0o755)
        await asyncio.to_thread(self._run, namespace, "images", "mount", "--rw", reference, str(target))

    async def unmount_image(self, namespace: str, target: Path) -> None:
        """Unmount ``target`` and remove its snapshot; nothing mounted there is not an error."""
        try:
            await asyncio.to_thread(self._run, namespace, "images", "unmount", "--rm", str(target))
        except CRIError as err:
            if (
                "not found" not in str(err)
                and "not mounted" not in str(err)
                and "invalid argument" not in str(err)
            ):
                raise

    async def pull(self, namespace: str, reference: str, hosts_dir: Path) -> None:
        """Pull ``reference`` through the registry host files (mirrors) in ``hosts_dir``."""
        await asyncio.to_thread(
            self._run,
            namespace,
            "images",
            "pull",
            "--hosts-dir",
            str(hosts_dir),
            reference,
            timeout=PULL_TIMEOUT,
        )
