"""``Containers``, ``ImageList`` and ``ImagePull``: the node's two containerd instances, read through
``ctr`` (:class:`ichor.machined.cri.Ctr`).

``Containers`` with ``namespace: k8s.io`` asks the CRI containerd, anything else the system one
(``talosctl containers [-k]``); the CRI one's containers are named by pod as Talos 1.7 names them
(``kube-system/kube-apiserver-<node>`` for the sandbox, ``...:kube-apiserver:<id[:12]>`` for its
container: :mod:`ichor.machined.cri._pods`), and ``logs``/``restart``/``stats -k`` take those names
(``ns/pod:container`` alone means its newest attempt); ``ImageList``/``ImagePull`` ask the CRI containerd as Talos's do, ``NS_CRI`` (the
default) in namespace ``k8s.io`` and ``NS_SYSTEM`` in ``system``, where the kubelet's image is;
each listed image carries containerd's ``created_at`` (``image ls``'s CREATED); a pull is
retried while its registry cannot be reached (:func:`ichor.machined.cri.pull_with_retry`). A node
that runs no containerd answers ``FAILED_PRECONDITION`` with the reason; a containerd that does not
answer is ``UNAVAILABLE``, as in Talos.

``Stats`` asks containerd for each running task's metrics (``ctr tasks metrics``) rather than reading
cgroup files: containerd put the task in its cgroup (an ext service's under the node's own
subtree, a CRI task wherever its spec says) and knows that path; machined would have to re-derive
it from the spec per task and per cgroup version. ``Restart`` sends SIGTERM as Talos does; a task
with an owner (an ext service's supervisor, a pod's kubelet) is brought back by it, a bare CRI task
is waited for and started again detached, its output then in ``/var/log/containers/<id>.log``.
A pod's container logs to its CRI log file (``/var/log/pods/<ns>_<pod>_<uid>/<name>/<n>.log``);
a task started in the foreground by someone else (``ctr run``) writes to that process, not to a file. The ``driver`` field is not looked at: both
drivers are served through ``ctr``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machined import cri
from ichor.machined.logfile import follow_file
from ichor.machined.services.containerd import skip_reason

__all__ = ["ContainerMethods"]


def _instance(namespace: str) -> cri.Instance:
    return cri.CRI if namespace == cri.CRI.namespace else cri.SYSTEM


def image_namespace(namespace: int) -> str:
    """The CRI containerd's namespace ``ImageList``/``ImagePull`` use: ``system`` (the kubelet's and
    etcd's images, Talos 1.7's ``image ls --namespace system``) or ``k8s.io``. Talos asks the CRI
    containerd for both; the system containerd holds no images (its ``ext-*`` services run from
    extension rootfs)."""
    return cri.SYSTEM.namespace if namespace == common_pb2.NS_SYSTEM else cri.CRI.namespace


def _grpc_error(err: cri.CRIError) -> GRPCError:
    if isinstance(err, cri.ContainerdUnavailableError):
        return GRPCError(Status.UNAVAILABLE, str(err))
    if "not found" in str(err):
        return GRPCError(Status.NOT_FOUND, str(err))
    return GRPCError(Status.INTERNAL, str(err))


NO_CONTAINERS = (
    "the node runs no containerd or CRI yet: its services are processes, not containers "
    "(see `talosctl processes` and `talosctl services`)"
)
_STOP_WAIT = 10.0
_FLAG = "-k (--kubernetes)"


async def _wait_gone(ctr: cri.Ctr, namespace: str, container_id: str, pid: int, timeout: float) -> None:
    """Until the task that had ``pid`` is no longer the running one (stopped, or already replaced)."""
    async with asyncio.timeout(timeout):
        while await ctr.task_pid(namespace, container_id) == pid:
            await asyncio.sleep(0.2)


async def _stop(ctr: cri.Ctr, namespace: str, container_id: str, pid: int) -> None:
    """SIGTERM, then SIGKILL after the grace period: a task's init process in its own PID namespace
    ignores SIGTERM unless it handles it (busybox httpd does not)."""
    await ctr.kill(namespace, container_id, "SIGTERM")
    try:
        await _wait_gone(ctr, namespace, container_id, pid, _STOP_WAIT)
    except TimeoutError:
        await ctr.kill(namespace, container_id, "SIGKILL")
        await _wait_gone(ctr, namespace, container_id, pid, _STOP_WAIT)


class ContainerMethods:
    """Mixed into MachineService (``self._node.layout`` is the node's)."""

    _node: Any

    async def _request(self, stream: Stream[Any, Any], name: str) -> Any:  # provided by MachineService
        raise NotImplementedError

    def _ctr(self, instance: cri.Instance) -> cri.Ctr:
        reason = skip_reason(self._node.layout)
        if reason:
            raise GRPCError(Status.FAILED_PRECONDITION, f"this node runs no containerd: {reason}")
        return cri.Ctr(self._node.layout.path(instance.address))

    async def Containers(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Containers")
        namespace = request.namespace or cri.SYSTEM.namespace
        found = await self._listing(namespace)
        infos = [
            machine_pb2.ContainerInfo(namespace=namespace, id=c.display, name=c.name, pod_id=c.pod_id,
                                      image=c.image, pid=c.pid, status=c.status,
                                      network_namespace=c.network_namespace)
            for c in found
        ]  # fmt: skip
        await stream.send_message(
            machine_pb2.ContainersResponse(messages=[machine_pb2.Container(containers=infos)])
        )

    async def _listing(self, namespace: str) -> list[cri.PodContainer]:
        """The containers of ``namespace``: the CRI one's named by pod as Talos names them
        (``ns/pod``, ``ns/pod:container:id``), the system one's by their ids."""
        instance = _instance(namespace)
        ctr = self._ctr(instance)
        try:
            if instance is cri.CRI:
                return await cri.pod_containers(ctr, namespace, self._node.layout.path(cri.CRI_STATUS_DIR))
            return [
                cri.PodContainer(c.id, "", c.id, c.image, c.pid, c.status)
                for c in await ctr.containers(namespace)
            ]
        except cri.CRIError as err:
            raise _grpc_error(err) from None

    async def _find(self, namespace: str, container_id: str) -> cri.PodContainer:
        """The container, or Talos's ``container "<id>" not found`` with a hint naming ``-k`` when the
        other containerd has it."""
        instance = _instance(namespace)
        container = cri.find_pod_container(await self._listing(namespace), container_id)
        if container is not None:
            return container
        other = cri.SYSTEM if instance is cri.CRI else cri.CRI
        try:
            elsewhere = cri.find_pod_container(await self._listing(other.namespace), container_id) is not None
        except GRPCError:
            elsewhere = False
        message = f'container "{container_id}" not found'
        if elsewhere and other is cri.SYSTEM:
            message += f"; hint: it runs in the system containerd: drop {_FLAG}"
        elif elsewhere:
            message += f"; hint: it runs in the CRI containerd (k8s.io): add {_FLAG}"
        raise GRPCError(Status.NOT_FOUND, message)

    async def Stats(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Stats")
        namespace = request.namespace or cri.SYSTEM.namespace
        if reason := skip_reason(self._node.layout):  # rather than an empty table that reads "no load"
            raise GRPCError(Status.FAILED_PRECONDITION, f"{NO_CONTAINERS}: {reason}")
        ctr = self._ctr(_instance(namespace))
        stats = []
        try:
            for c in await self._listing(namespace):
                if c.status not in ("RUNNING", "CONTAINER_RUNNING"):
                    continue  # running containers only (a sandbox's pause uses next to nothing)
                try:
                    metrics = await ctr.metrics(namespace, c.id)
                except cri.CRIError as err:
                    if "not found" in str(err):
                        continue  # the task ended between the two calls
                    raise
                stats.append(
                    machine_pb2.Stat(namespace=namespace, id=c.display, pod_id=c.pod_id, name=c.name,
                                     memory_usage=metrics.memory_usage, cpu_usage=metrics.cpu_usage)
                )  # fmt: skip
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        await stream.send_message(machine_pb2.StatsResponse(messages=[machine_pb2.Stats(stats=stats)]))

    def _task_log(self, container_id: str) -> Path:
        return Path(self._node.layout.path(cri.TASK_LOG_DIR)) / f"{container_id}.log"

    async def Restart(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "Restart")
        namespace = request.namespace or cri.SYSTEM.namespace
        container = await self._find(namespace, request.id)
        ctr = self._ctr(_instance(namespace))
        # an ext service's supervisor, or for a pod's container the kubelet, starts it again
        owned = bool(container.pod) or (_instance(namespace) is cri.SYSTEM and self._owner(container.id))
        try:
            if container.status in ("RUNNING", "CONTAINER_RUNNING", "SANDBOX_READY"):
                await _stop(ctr, namespace, container.id, container.pid)
            if not owned:  # nobody brings it back: start the task again ourselves
                await ctr.start_detached(namespace, container.id, self._task_log(container.id))
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        except TimeoutError:
            raise GRPCError(
                Status.DEADLINE_EXCEEDED,
                f'container "{request.id}" did not stop within {_STOP_WAIT:g}s of SIGKILL',
            ) from None
        await stream.send_message(machine_pb2.RestartResponse(messages=[machine_pb2.Restart()]))

    def _owner(self, container_id: str) -> bool:
        """Whether a supervised service runs this container (``ext-<name>``: its runner restarts it)."""
        return any(info.id == container_id for info in self._node.supervisor.list())

    async def container_log(self, request: Any) -> AsyncIterator[bytes]:
        """``logs -k <id>``: a pod container's CRI log file (``/var/log/pods/...``, its lines as the
        kubelet's runtime writes them), or the log file of a task machined started in the background."""
        container = await self._find(request.namespace, request.id)
        path = (
            Path(self._node.layout.path(container.log_path))
            if container.log_path
            else self._task_log(container.id)
        )
        if not path.exists():
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                f'container "{container.id}" has no log file: its output goes to the process that started '
                f"its task; hint: `talosctl restart -k {container.id}` starts it again with its output in "
                f"{cri.TASK_LOG_DIR}/{container.id}.log",
            )
        tail = request.tail_lines if request.tail_lines >= 0 else None
        async for line in follow_file(path, tail=tail, follow=request.follow):
            yield line

    async def ImageList(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "ImageList")
        try:
            images = await self._ctr(cri.CRI).images(image_namespace(request.namespace))
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        for image in images:
            reply = machine_pb2.ImageListResponse(name=image.name, digest=image.digest, size=image.size)
            if image.created is not None:
                reply.created_at.FromDatetime(image.created)
            await stream.send_message(reply)

    async def ImagePull(self, stream: Stream[Any, Any]) -> None:
        """Retried while the registry cannot be reached (Talos's ``image.Pull``), each retry on the
        node's console with its reason; bounded by the caller's deadline when it sets one."""
        request = await self._request(stream, "ImagePull")
        reference = request.reference
        if not reference:
            raise GRPCError(Status.INVALID_ARGUMENT, "image reference is required")
        namespace = image_namespace(request.namespace)
        ctr = self._ctr(cri.CRI)
        hosts_dir = self._node.layout.path(cri.CRI_HOSTS_DIR)
        timeout = cri.PULL_TIMEOUT
        if stream.deadline is not None:
            timeout = min(timeout, max(0.0, stream.deadline.time_remaining() - 1.0))
        try:
            await cri.pull_with_retry(
                lambda: ctr.pull(namespace, reference, hosts_dir),
                reference,
                cri.mirrors_for(hosts_dir, cri.registry_of(reference)),
                report=self._node.say,
                timeout=timeout,
            )
        except cri.ImagePullError as err:
            status = Status.NOT_FOUND if err.not_found else Status.UNAVAILABLE
            raise GRPCError(status, f"{err}; hint: {err.hint}" if err.hint else str(err)) from None
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        await stream.send_message(machine_pb2.ImagePullResponse(messages=[machine_pb2.ImagePull()]))
