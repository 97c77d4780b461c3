"""``k8s.StaticPodServerController``: every StaticPods resource, served to the kubelet as a PodList.

Talos 1.7 writes no manifests directory: the kubelet polls ``staticPodURL``, an HTTP server on
``127.0.0.1:<random port>`` inside the node that answers any ``GET`` with a ``v1`` ``PodList`` JSON
of the StaticPods resources (sorted by id). The URL is published as StaticPodServerStatus
``static-pod-server-status``; each pod the server has not served before is logged as
"rendered new static pod" with its id (the line the troubleshooting guide greps the console for).

The kubelet makes a static pod's mirror pod only when it syncs that pod while its node informer
already holds its Node, and when nothing changes it syncs a pod once a minute (``syncFrequency``):
the control-plane mirror pods (what ``health`` waits for) appeared 40-90 s after the node
registered. Its informer is late too: it lists Nodes with the client certificate it does not have
yet, so after minutes of ``Unauthorized`` its next list comes up to 30 s (client-go's reflector
backoff) after the certificate. So each served pod carries a ``metadata.uid`` of its own, the MD5
of the pod and the server's URL (what the kubelet would make itself; a changed pod still gets a new
UID and is replaced), and once the kubelet has its client certificate
(``/var/lib/kubelet/pki/kubelet-client-current.pem``, written a fraction of a second before it
registers the Node; looked for every :data:`REGISTERED_POLL` seconds while absent) every pod is
served with the annotation :data:`REGISTERED_ANNOTATION` set to a serial that goes up every
:data:`SERIAL_STEP` seconds for :data:`REGISTERED_WINDOW` seconds, then stays. Same UID, another
annotation: the first fetch after each step (the kubelet fetches every second, see
``kubelet_render.STATIC_POD_URL_CHECK``) is an update of each pod, which the kubelet syncs at once,
creating the mirror pod within a step of its informer having the Node, without restarting any
container (a container's hash covers its own spec only). A fetch between steps gets the same bytes,
which the kubelet drops unread.

The server only answers loopback clients of the node and reads at most a small request head with a
timeout; anything else gets an HTTP error and the connection is closed. It runs exactly as long
as the controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from ichor.machined.controllers.k8s.kubelet_render import CLIENT_CERTIFICATE
from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources._k8s import (
    STATIC_POD_SERVER_STATUS_ID,
    STATIC_POD_SERVER_STATUSES,
    STATIC_PODS,
    StaticPodServerStatusSpec,
)

__all__ = [
    "MAX_REQUEST_HEAD",
    "REGISTERED_ANNOTATION",
    "REGISTERED_POLL",
    "REGISTERED_WINDOW",
    "REQUEST_TIMEOUT",
    "SERIAL_STEP",
    "StaticPodServerController",
    "pod_list",
]

MAX_REQUEST_HEAD = 8192
"""Bytes of request line and headers a client may send; the kubelet sends a few hundred."""
REQUEST_TIMEOUT = 10.0


REGISTERED_ANNOTATION = "ichor.dev/kubelet-registered"
"""Set on every served pod once the kubelet has its client certificate (see the module doc)."""
REGISTERED_POLL = 1.0
"""Seconds between looks for ``kubelet_render.CLIENT_CERTIFICATE`` while it is absent and pods are served."""
REGISTERED_WINDOW = 120.0
"""Seconds after the client certificate is seen during which the serial goes up: the reflector's
30 s backoff plus a minute's resync, after which the kubelet's own resync has run."""
SERIAL_STEP = 3.0
"""Seconds between two serials: at most this long from the kubelet's informer having the Node to
the mirror pods, and 40 pod updates in the window."""


def _with_uid(pod: dict[str, Any], salt: str, serial: int | None) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    if not meta.get("uid"):
        digest = hashlib.md5(json.dumps(pod, sort_keys=True).encode() + salt.encode(), usedforsecurity=False)
        meta["uid"] = digest.hexdigest()
    if serial is not None:
        meta["annotations"] = {**(meta.get("annotations") or {}), REGISTERED_ANNOTATION: str(serial)}
    return out


def pod_list(pods: list[tuple[str, dict[str, Any]]], *, salt: str = "", serial: int | None = None) -> bytes:
    """The PodList body for ``(id, pod)`` pairs, in id order: each pod with its UID (the MD5 of the
    pod as given and ``salt``, unless it has one) and, with a ``serial``, :data:`REGISTERED_ANNOTATION`."""
    items = [_with_uid(pod, salt, serial) for _, pod in sorted(pods, key=lambda p: p[0])]
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}).encode()


def _response(status: HTTPStatus, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class StaticPodServerController(Controller):
    """``k8s.StaticPodServerController`` (see the module doc)."""

    name = "k8s.StaticPodServerController"
    inputs = (Input(STATIC_PODS),)
    outputs = (Output(STATIC_POD_SERVER_STATUSES),)
    writes = "(an HTTP server on the node's loopback, serving the kubelet's staticPodURL)"

    def __init__(
        self, layout: Layout, say: Callable[[str], None] | None = None, *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        # A node with its own network namespace owns its 127.0.0.1; a process node shares the
        # host's loopback and binds its own address there instead.
        self._host = "127.0.0.1" if layout.own_netns else layout.address
        self._say = say
        self._layout = layout
        self._clock = clock
        self._pods: list[tuple[str, dict[str, Any]]] = []
        self._url = ""
        self._registered_at: float | None = None
        self._body: tuple[list[tuple[str, dict[str, Any]]], int | None, bytes] | None = None
        """The last body served: the pod list it was made of (by identity), its serial, its bytes."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                response = _response(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, b"request head too large\n")
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            else:
                response = self._answer(head)
            writer.write(response)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> bytes:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return _response(HTTPStatus.BAD_REQUEST, b"malformed request line\n")
        if parts[0] not in (b"GET", b"HEAD"):
            return _response(HTTPStatus.METHOD_NOT_ALLOWED, b"only GET is served\n")
        serial: int | None = None
        if self._registered_at is not None:
            since = min(max(self._clock() - self._registered_at, 0.0), REGISTERED_WINDOW)
            serial = 1 + int(since // SERIAL_STEP)
        if self._body is None or self._body[0] is not self._pods or self._body[1] != serial:
            self._body = (self._pods, serial, pod_list(self._pods, salt=self._url, serial=serial))
        response = _response(HTTPStatus.OK, self._body[2], "application/json")
        return response[: response.index(b"\r\n\r\n") + 4] if parts[0] == b"HEAD" else response

    async def run(self, ctx: ControllerContext) -> None:
        server = await asyncio.start_server(self._handle, self._host, 0, limit=MAX_REQUEST_HEAD)
        try:
            port = server.sockets[0].getsockname()[1]
            url = self._url = f"http://{self._host}:{port}"
            served: set[str] = set()
            retry: float | None = None
            while True:
                await ctx.changed(timeout=retry)
                pods = self._pods = [(r.id, dict(r.spec.pod)) for r in ctx.list(STATIC_PODS)]
                if self._registered_at is None and self._layout.path(CLIENT_CERTIFICATE).exists():
                    self._registered_at = self._clock()
                retry = None if self._registered_at is not None or not pods else REGISTERED_POLL
                for id_ in sorted({id_ for id_, _ in pods} - served):
                    ctx.logger.info("rendered new static pod", id=id_)
                    if self._say is not None:
                        self._say(f'rendered new static pod {{"component": "controller-runtime", '
                                  f'"controller": "{self.name}", "id": "{id_}"}}')  # fmt: skip
                served = {id_ for id_, _ in pods}
                ctx.modify(
                    STATIC_POD_SERVER_STATUSES,
                    STATIC_POD_SERVER_STATUS_ID,
                    StaticPodServerStatusSpec(url=url),
                )
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
