"""``Containers``, ``ImageList`` and ``ImagePull``: the node's two containerd instances, read through
``ctr`` (:class:`ichor.machined.cri.Ctr`).

``Containers`` with ``namespace: k8s.io`` asks the CRI containerd, anything else the system one
(``talosctl containers [-k]``); ``ImageList``/``ImagePull`` map ``NS_CRI`` (the default) to
``k8s.io`` in the CRI containerd and ``NS_SYSTEM`` to ``system`` in the system containerd; a pull is
retried while its registry cannot be reached (:func:`ichor.machined.cri.pull_with_retry`). A node
that runs no containerd answers ``FAILED_PRECONDITION`` with the reason; a containerd that does not
answer is ``UNAVAILABLE``, as in Talos.
"""

from __future__ import annotations

from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machined import cri
from ichor.machined.services.containerd import skip_reason

__all__ = ["ContainerMethods"]


def _instance(namespace: str) -> cri.Instance:
    return cri.CRI if namespace == cri.CRI.namespace else cri.SYSTEM


def _image_instance(namespace: int) -> cri.Instance:
    return cri.SYSTEM if namespace == common_pb2.NS_SYSTEM else cri.CRI


def _grpc_error(err: cri.CRIError) -> GRPCError:
    if isinstance(err, cri.ContainerdUnavailableError):
        return GRPCError(Status.UNAVAILABLE, str(err))
    if "not found" in str(err):
        return GRPCError(Status.NOT_FOUND, str(err))
    return GRPCError(Status.INTERNAL, str(err))


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
        try:
            found = await self._ctr(_instance(namespace)).containers(namespace)
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        infos = [
            machine_pb2.ContainerInfo(
                namespace=namespace,
                id=c.id,
                name=c.id,
                pod_id=c.id,
                image=c.image,
                pid=c.pid,
                status=c.status,
            )
            for c in found
        ]
        await stream.send_message(
            machine_pb2.ContainersResponse(messages=[machine_pb2.Container(containers=infos)])
        )

    async def ImageList(self, stream: Stream[Any, Any]) -> None:
        request = await self._request(stream, "ImageList")
        instance = _image_instance(request.namespace)
        try:
            images = await self._ctr(instance).images(instance.namespace)
        except cri.CRIError as err:
            raise _grpc_error(err) from None
        for image in images:
            await stream.send_message(
                machine_pb2.ImageListResponse(name=image.name, digest=image.digest, size=image.size)
            )

    async def ImagePull(self, stream: Stream[Any, Any]) -> None:
        """Retried while the registry cannot be reached (Talos's ``image.Pull``), each retry on the
        node's console with its reason; bounded by the caller's deadline when it sets one."""
        request = await self._request(stream, "ImagePull")
        reference = request.reference
        if not reference:
            raise GRPCError(Status.INVALID_ARGUMENT, "image reference is required")
        instance = _image_instance(request.namespace)
        ctr = self._ctr(instance)
        hosts_dir = self._node.layout.path(cri.CRI_HOSTS_DIR)
        timeout = cri.PULL_TIMEOUT
        if stream.deadline is not None:
            timeout = min(timeout, max(0.0, stream.deadline.time_remaining() - 1.0))
        try:
            await cri.pull_with_retry(
                lambda: ctr.pull(instance.namespace, reference, hosts_dir),
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
