"""``Talos``: the public, typed, async Python SDK for the Talos API (what talosctl's commands use).

It wraps a :class:`~ichor.client.Client` (the connection: talosconfig context, endpoints vs nodes,
mutual TLS, failover) and turns each Talos API call into a method that returns dataclasses
(:mod:`ichor.client._types`) instead of protobuf replies, with each result naming its node.
Nothing here prints or exits; failures are exceptions of :mod:`ichor.client`'s tree, with ``.node``
set when they came from one node.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from ichor.client._client import DEFAULT_CONNECT_TIMEOUT, Client
from ichor.client._errors import AllNodesFailedError, ClientError, RPCError
from ichor.client._replies import errors_hint, format_errors, message_error, message_node
from ichor.client._types import (
    APPLY_MODES,
    ApplyMode,
    ApplyResult,
    ContextInfo,
    EtcdMember,
    LifecycleAction,
    LogLine,
    NodeFailedError,
    Resource,
    ResourceEvent,
    Results,
    Service,
    ServiceAction,
    StageResult,
    Version,
    resource_type_of,
)
from ichor.machinery.clientconfig import GlobalOptions

if TYPE_CHECKING:
    from ichor.client.health import ClusterInfo

T = TypeVar("T")
S = TypeVar("S")

RESOURCE_DEFINITIONS = "ResourceDefinitions.meta.cosi.dev"
SNAPSHOT_TRAILER = 32
"""An etcd snapshot ends with a sha256 of its bbolt pages: its size % 512 is exactly this."""

_EVENT_KINDS: dict[int, Literal["created", "updated", "destroyed"]] = {
    0: "created",
    1: "updated",
    2: "destroyed",
}
_BOOTSTRAPPED, _ERRORED = 3, 4


class UnknownResourceTypeError(ClientError):
    """``get``/``watch`` of a type the node does not define (or a name matching several)."""


class ResourceNotFoundError(NodeFailedError):
    """``get(type, id)``: the node has no resource with that id."""


class WatchEndedError(ClientError):
    """The node ended a :meth:`Talos.watch` (it is going away: rebooting, shutting down)."""


class SnapshotError(ClientError):
    """``etcd_snapshot``: the stream failed, was cut short, or the file could not be written."""


def _empty() -> Any:
    from google.protobuf import empty_pb2  # type: ignore[import-untyped]

    return empty_pb2.Empty()


class Talos:
    """An async client of the Talos API (Talos 1.7's protos, metadata and mutual TLS).

    Build one from a talosconfig with :meth:`from_config` (or :meth:`maintenance` for nodes that
    have no config yet) and use it in ``async with``::

        async with Talos.from_config(context="mycluster", nodes=["10.5.0.2"]) as talos:
            for v in await talos.version():
                print(v.node, v.tag)

    *Endpoints* are where the client connects; *nodes* are what a call acts on (apid forwards to
    them). Calls that go to several nodes at once return :class:`Results` (a list, plus ``errors``
    for nodes that failed); COSI calls (``get``/``watch``) go to each node in turn. ``client`` is
    the underlying :class:`Client`, whose generated stubs (``client.machine``...) reach any RPC
    this class has no method for.
    """

    def __init__(self, client: Client, *, _definitions: dict[tuple[str, str], Any] | None = None) -> None:
        self.client = client
        self._definitions: dict[tuple[str, str], Any] = {} if _definitions is None else _definitions
        """Resource definitions already looked up, by (node, name asked): shared with views."""

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        endpoints: Sequence[str] = (),
        nodes: Sequence[str] = (),
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        warn: Callable[[str], object] | None = None,
    ) -> Talos:
        """From a talosconfig: ``path`` (default: ``$TALOSCONFIG``, then ``~/.talos/config``...),
        its current context or ``context``; ``endpoints``/``nodes`` override the context's.

        A client certificate expiring within 30 days is warned about once through ``warn``
        (default: a line on stderr).
        """
        opts = GlobalOptions(
            talosconfig=os.fspath(path) if path is not None else None,
            context=context,
            endpoints=list(endpoints),
            nodes=list(nodes),
        )
        return cls.from_options(opts, connect_timeout=connect_timeout, warn=warn)

    @classmethod
    def from_options(
        cls,
        opts: GlobalOptions,
        *,
        insecure: bool = False,
        cert_fingerprints: Sequence[str] = (),
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        warn: Callable[[str], object] | None = None,
    ) -> Talos:
        """From talosctl's global flags (``--talosconfig``, ``--context``, ``-e``, ``-n``), as the CLI does."""
        return cls(
            Client.from_options(
                opts,
                insecure=insecure,
                cert_fingerprints=cert_fingerprints,
                connect_timeout=connect_timeout,
                warn=warn,
            )
        )

    @classmethod
    def maintenance(
        cls,
        nodes: Sequence[str],
        *,
        cert_fingerprints: Sequence[str] = (),
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> Talos:
        """Nodes in maintenance mode (no config yet, ``talosctl --insecure``): each node is dialled
        directly, with no client certificate; ``cert_fingerprints`` pin the node's key (SPKI sha256).
        There is no forwarding in maintenance mode: a call goes to one node, so use
        ``with_node(n)`` for each node when there are several."""
        return cls(
            Client(
                endpoints=list(nodes),
                nodes=list(nodes),
                insecure=True,
                cert_fingerprints=cert_fingerprints,
                connect_timeout=connect_timeout,
                endpoints_source="--nodes",
            )
        )

    @staticmethod
    def contexts(path: str | os.PathLike[str] | None = None) -> list[ContextInfo]:
        """The contexts of a talosconfig (default lookup as :meth:`from_config`), current one marked."""
        from ichor.client._tls import certificate_roles
        from ichor.machinery.clientconfig import TalosConfig, find_talosconfig
        from ichor.machinery.errors import ClientConfigError

        location = find_talosconfig(os.fspath(path) if path is not None else None)
        if not location.path.exists():
            raise ClientConfigError(
                f"talosconfig {str(location.path)!r} does not exist",
                hint="generate one with `talosctl gen config`, or pass its path",
            )
        config = TalosConfig.load(location.path)
        out = []
        for name, ctx in sorted(config.contexts.items()):
            try:
                roles = tuple(certificate_roles(base64.b64decode(ctx.crt))) if ctx.crt else ()
            except (binascii.Error, ValueError):
                roles = ()
            out.append(
                ContextInfo(
                    name=name,
                    endpoints=tuple(ctx.endpoints),
                    nodes=tuple(ctx.nodes),
                    current=name == config.context,
                    roles=roles,
                )
            )
        return out

    # --- targets -----------------------------------------------------------------------------

    @property
    def context(self) -> str | None:
        """The talosconfig context in use (None in maintenance mode or when built by hand)."""
        return self.client.context_name

    @property
    def endpoints(self) -> list[str]:
        """Where this client connects (``host:port``)."""
        return [e.address for e in self.client.endpoints]

    @property
    def nodes(self) -> list[str]:
        """The nodes calls act on; empty means "the endpoint itself"."""
        return list(self.client.nodes)

    def with_nodes(self, *nodes: str) -> Talos:
        """A view acting on ``nodes`` (sharing this one's connection)."""
        if self.client.insecure:
            raise ClientError(
                "maintenance mode has no one-to-many calls", hint="use with_node() for each node"
            )
        return Talos(self.client.with_nodes(*nodes), _definitions=self._definitions)

    def with_node(self, node: str) -> Talos:
        """A view acting on one node (in maintenance mode: dialling that node)."""
        return Talos(self.client.with_node(node), _definitions=self._definitions)

    @contextlib.contextmanager
    def _attributing(self) -> Iterator[None]:
        """Name the node on a gRPC error the server returned for a call to one node (or to the
        endpoint itself, with no nodes); a call to several nodes leaves ``.node`` None."""
        try:
            yield
        except RPCError as exc:
            if exc.node is None and len(self.client.nodes) <= 1:
                exc.node = self.client.nodes[0] if self.client.nodes else self.client.peer_host
            raise

    @property
    def _fallback_node(self) -> str:
        """The node a reply that names none came from: the one target node (a ``node`` view's
        replies are one-to-one, untagged), else the endpoint that answered."""
        return self.client.nodes[0] if len(self.client.nodes) == 1 else self.client.peer_host

    def _targets(self) -> list[str]:
        return self.client.nodes or [self.client.peer_host]

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Talos:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (views share it: closing a view does nothing)."""
        await self.client.aclose()

    # --- one-to-many helpers -----------------------------------------------------------------

    def _split(self, response: Any, what: str, convert: Callable[[str, Any], list[T]]) -> Results[T]:
        out: Results[T] = Results()
        fallback = self._fallback_node
        answered = 0
        for message in response.messages:
            error = message_error(message, fallback)
            if error is not None:
                out.errors.append(NodeFailedError(error.node, error.error, error.code))
            else:
                answered += 1
                out.extend(convert(message_node(message, fallback), message))
        if out.errors and not answered:
            text = format_errors(out.errors).rstrip("\n")
            failure = AllNodesFailedError(
                f"{what}: {text}" if what else text, out.errors, hint=errors_hint(out.errors)
            )
            if len(out.errors) == 1:
                failure.node = out.errors[0].node
            raise failure
        return out

    # --- machine API -------------------------------------------------------------------------

    async def version(self) -> Results[Version]:
        """Each node's version (``talosctl version``)."""
        with self._attributing():
            response = await self.client.machine.Version(_empty())
        return self._split(response, "error getting version", lambda n, m: [Version.from_proto(n, m)])

    async def services(self, service_id: str | None = None) -> Results[Service]:
        """The services of each node (``talosctl service``); only ``service_id``'s when given."""
        with self._attributing():
            response = await self.client.machine.ServiceList(_empty())
        return self._split(
            response,
            "error listing services",
            lambda n, m: [
                Service.from_proto(n, s) for s in m.services if service_id is None or s.id == service_id
            ],
        )

    async def _service_action(
        self, action: Literal["start", "stop", "restart"], service_id: str
    ) -> Results[ServiceAction]:
        from ichor.api.gen.machine import machine_pb2

        call: Any
        call, request = {
            "start": (self.client.machine.ServiceStart, machine_pb2.ServiceStartRequest),
            "stop": (self.client.machine.ServiceStop, machine_pb2.ServiceStopRequest),
            "restart": (self.client.machine.ServiceRestart, machine_pb2.ServiceRestartRequest),
        }[action]
        with self._attributing():
            response = await call(request(id=service_id))
        return self._split(
            response,
            f"error performing {action}",
            lambda n, m: [ServiceAction(n, service_id, action, m.resp)],
        )

    async def service_start(self, service_id: str) -> Results[ServiceAction]:
        """Start a service (``talosctl service <id> start``)."""
        return await self._service_action("start", service_id)

    async def service_stop(self, service_id: str) -> Results[ServiceAction]:
        """Stop a service."""
        return await self._service_action("stop", service_id)

    async def service_restart(self, service_id: str) -> Results[ServiceAction]:
        """Restart a service."""
        return await self._service_action("restart", service_id)

    async def logs(
        self,
        service_id: str,
        *,
        follow: bool = False,
        tail: int = -1,
        kubernetes: bool = False,
        on_error: Callable[[NodeFailedError], object] | None = None,
    ) -> AsyncGenerator[LogLine, None]:
        """A service's log, line by line, from every node (``talosctl logs``); ``follow`` keeps
        streaming new lines until the caller stops iterating (close it with
        ``contextlib.aclosing``); ``tail`` limits the lines from before (-1: all).

        A node that fails in the stream raises :class:`NodeFailedError` (after the lines before
        it), unless ``on_error`` is given: then it is passed there and the other nodes go on.
        """
        from ichor.api.gen.machine import machine_pb2

        request = machine_pb2.LogsRequest(
            namespace="k8s.io" if kubernetes else "system", id=service_id, follow=follow, tail_lines=tail
        )
        fallback = self._fallback_node
        partial: dict[str, str] = {}
        with self._attributing():
            async with self.client.machine.Logs.open() as call:
                await call.send_message(request, end=True)
                async for message in call:
                    error = message_error(message, fallback)
                    if error is not None:
                        failure = NodeFailedError(error.node, error.error, error.code)
                        if on_error is None:
                            raise failure
                        on_error(failure)
                        continue
                    node = message_node(message, fallback)
                    text = partial.pop(node, "") + message.bytes.decode("utf-8", errors="replace")
                    *complete, rest = text.split("\n")
                    if rest:
                        partial[node] = rest
                    for line in complete:
                        yield LogLine(node, line)
        for node, rest in partial.items():
            yield LogLine(node, rest)

    async def apply_config(
        self,
        config: bytes | str,
        *,
        mode: ApplyMode = "auto",
        dry_run: bool = False,
        try_timeout: timedelta = timedelta(minutes=1),
    ) -> Results[ApplyResult]:
        """Send a machine config (YAML text or bytes) to the nodes (``talosctl apply-config``).

        ``mode``: ``auto`` (the node decides), ``no-reboot``, ``reboot``, ``staged`` (at the next
        boot) or ``try`` (rolled back after ``try_timeout`` unless applied again). ``dry_run``
        reports what would happen (in ``mode_details``) and changes nothing.
        """
        from ichor.api.gen.machine import machine_pb2

        if mode not in APPLY_MODES:
            raise ClientError(
                f"unknown apply mode {mode!r}", hint=f"use one of {', '.join(sorted(APPLY_MODES))}"
            )
        data = config.encode() if isinstance(config, str) else bytes(config)
        request = machine_pb2.ApplyConfigurationRequest(
            data=data, mode=mode.upper().replace("-", "_"), dry_run=dry_run
        )
        if mode == "try":
            request.try_mode_timeout.FromTimedelta(try_timeout)
        with self._attributing():
            response = await self.client.machine.ApplyConfiguration(request)
        return self._split(
            response, "error applying new configuration", lambda n, m: [ApplyResult.from_proto(n, m)]
        )

    async def etcd_members(self) -> Results[EtcdMember]:
        """The etcd members each node's etcd knows (``talosctl etcd members``)."""
        from ichor.api.gen.machine import machine_pb2

        self.client.require_nodes()
        with self._attributing():
            response = await self.client.machine.EtcdMemberList(
                machine_pb2.EtcdMemberListRequest(query_local=True)
            )
        return self._split(
            response,
            "error getting members",
            lambda n, m: [EtcdMember.from_proto(n, member) for member in m.members],
        )

    async def etcd_snapshot_chunks(self) -> AsyncGenerator[bytes, None]:
        """The etcd snapshot of the one target node, as the node streams it."""
        from ichor.api.gen.machine import machine_pb2

        self.client.require_single_node("etcd snapshot")
        with self._attributing():
            async with self.client.machine.EtcdSnapshot.open() as call:
                await call.send_message(machine_pb2.EtcdSnapshotRequest(), end=True)
                async for data in call:
                    error = message_error(data, self._fallback_node)
                    if error is not None:
                        failure = SnapshotError(f"error reading: {error.error}")
                        failure.node = error.node
                        raise failure
                    yield bytes(data.bytes)

    async def etcd_snapshot(self, path: str | os.PathLike[str]) -> int:
        """Save the one target node's etcd snapshot to ``path``; return its size in bytes.

        It is written to ``<path>.part`` (mode 0600) and renamed only once whole (its sha256
        trailer arrived), so a dropped stream never leaves a partial file at ``path``.
        """
        target = Path(path)
        part = Path(os.fspath(path) + ".part")
        if target.is_dir():
            raise SnapshotError(
                f"{os.fspath(path)!r} is a directory",
                hint="give the snapshot a file name, e.g. `talosctl etcd snapshot db.snapshot`",
            )
        self.client.require_single_node("etcd snapshot")
        try:
            handle = open(part, "wb")  # noqa: SIM115 - closed in the finally below
            os.chmod(part, 0o600)
        except OSError as exc:
            raise SnapshotError(
                f"error creating temporary file: open {part}: {exc.strerror}",
                hint="choose a writable location for the snapshot",
            ) from None
        size = 0
        try:
            async with contextlib.aclosing(self.etcd_snapshot_chunks()) as chunks:
                async for chunk in chunks:
                    handle.write(chunk)
                    size += len(chunk)
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            if size % 512 != SNAPSHOT_TRAILER:
                raise SnapshotError(
                    f"sha256 checksum not found (size {size})",
                    hint="the snapshot stream was cut short or is not an etcd snapshot; take it again",
                )
            os.replace(part, target)
        finally:
            handle.close()
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
        return size

    async def _lifecycle(
        self, action: Literal["reboot", "shutdown", "reset"], request: Any
    ) -> Results[LifecycleAction]:
        method = getattr(self.client.machine, action.capitalize())
        with self._attributing():
            response = await method(request)
        return self._split(
            response, f"error executing {action}", lambda n, m: [LifecycleAction(n, action, m.actor_id)]
        )

    async def reboot(self, *, mode: Literal["default", "powercycle"] = "default") -> Results[LifecycleAction]:
        """Reboot the nodes (``talosctl reboot --wait=false``)."""
        from ichor.api.gen.machine import machine_pb2

        return await self._lifecycle("reboot", machine_pb2.RebootRequest(mode=mode.upper()))

    async def shutdown(self, *, force: bool = False) -> Results[LifecycleAction]:
        """Shut the nodes down; ``force`` skips the cordon/drain."""
        from ichor.api.gen.machine import machine_pb2

        return await self._lifecycle("shutdown", machine_pb2.ShutdownRequest(force=force))

    async def reset(
        self,
        *,
        graceful: bool = True,
        reboot: bool = False,
        wipe: Sequence[str] = (),
        mode: str = "all",
        user_disks: Sequence[str] = (),
    ) -> Results[LifecycleAction]:
        """Reset the nodes: wipe ``wipe``'s partition labels (default: the whole system disk, so
        the node forgets its config), leaving etcd first when ``graceful``; then reboot or power
        off. ``mode`` is ``--wipe-mode`` (all, system-disk, user-disks); ``user_disks`` are
        ``--user-disks-to-wipe``."""
        return await self._lifecycle(
            "reset",
            reset_request(graceful=graceful, reboot=reboot, wipe=wipe, mode=mode, user_disks=user_disks),
        )

    # --- COSI resources ----------------------------------------------------------------------

    async def _per_node(self, node: str, work: Callable[[Talos], Any]) -> Any:
        try:
            return await work(self.with_node(node))
        except ClientError as exc:
            if exc.node is None:
                exc.node = node
            raise

    async def resource_definition(self, resource_type: str) -> Any:
        """The ``ResourceDefinitionSpec`` (protobuf) of a type, found as talosctl does: by its full
        name, any alias (``members``, ``mc``), or a prefix ending at a dot (``members.cluster``).
        This view must act on one node (:meth:`with_node`). Definitions are looked up once per
        client (views share them)."""
        key = (",".join(self.client.nodes) or self.client.peer_host, resource_type)
        cached = self._definitions.get(key)
        if cached is not None:
            return cached
        found = match_definition(
            await self.client.list_resources("meta", RESOURCE_DEFINITIONS), resource_type
        )
        self._definitions[key] = found
        return found

    @overload
    async def get(
        self, resource_type: type[S], resource_id: str | None = None, *, namespace: str | None = None
    ) -> Results[Resource[S]]: ...

    @overload
    async def get(
        self, resource_type: str, resource_id: str | None = None, *, namespace: str | None = None
    ) -> Results[Resource[Any]]: ...

    async def get(
        self, resource_type: str | type[Any], resource_id: str | None = None, *, namespace: str | None = None
    ) -> Results[Resource[Any]]:
        """Resources of a type from every node (``talosctl get``); only the one with ``resource_id``
        when given (a node without it is in ``errors`` as :class:`ResourceNotFoundError`).

        ``resource_type`` is a name as talosctl takes it (``members``, ``MachineStatuses.runtime.talos.dev``)
        or Talos's spec message class (``MachineStatusSpec``): then the results are typed
        ``Resource[MachineStatusSpec]`` and ``.proto`` is that message. ``namespace`` defaults to the type's.
        """
        name = resource_type if isinstance(resource_type, str) else resource_type_of(resource_type)
        nodes = self._targets()
        out: Results[Resource[Any]] = Results()
        for node in nodes:
            try:
                found = await self._per_node(node, lambda t: t._get_here(name, resource_id, namespace))
            except ClientError as exc:
                if len(nodes) == 1:
                    raise  # one node: its error (and hint) is the call's error
                out.errors.append(
                    exc if isinstance(exc, NodeFailedError) else NodeFailedError(node, str(exc), _code(exc))
                )
                continue
            out.extend(found)
        if out.errors and len(out.errors) == len(nodes):
            text = format_errors(out.errors).rstrip("\n")
            raise AllNodesFailedError(text, out.errors, hint=errors_hint(out.errors))
        return out

    async def _get_here(
        self, name: str, resource_id: str | None, namespace: str | None
    ) -> list[Resource[Any]]:
        node = self.client.nodes[0] if self.client.nodes else self.client.peer_host
        spec = await self.resource_definition(name)
        ns = namespace or spec.default_namespace
        raws = await self.client.list_resources(ns, spec.resource_type)
        found = [
            Resource.from_proto(node, r) for r in raws if resource_id is None or r.metadata.id == resource_id
        ]
        if resource_id is not None and not found:
            raise ResourceNotFoundError(
                node, f"resource {spec.resource_type}({ns}/{resource_id}) doesn't exist", 5
            )
        return found

    @overload
    def watch(
        self,
        resource_type: type[S],
        resource_id: str | None = None,
        *,
        namespace: str | None = None,
        bootstrap: bool = True,
    ) -> AsyncGenerator[ResourceEvent[S], None]: ...

    @overload
    def watch(
        self,
        resource_type: str,
        resource_id: str | None = None,
        *,
        namespace: str | None = None,
        bootstrap: bool = True,
    ) -> AsyncGenerator[ResourceEvent[Any], None]: ...

    def watch(
        self,
        resource_type: str | type[Any],
        resource_id: str | None = None,
        *,
        namespace: str | None = None,
        bootstrap: bool = True,
    ) -> AsyncGenerator[ResourceEvent[Any], None]:
        """Changes to resources of a type on the one target node (``talosctl get -w``), as they happen.

        With ``bootstrap`` (and no ``resource_id``) the current resources come first as ``created``
        events, then one ``bootstrapped`` event, then every change. A watched ``resource_id`` sends
        its current state first. It runs until the caller stops iterating or the node ends it
        (:class:`ClientError`). Watch several nodes with one ``with_node(n).watch(...)`` each.
        """
        name = resource_type if isinstance(resource_type, str) else resource_type_of(resource_type)
        return self._watch(name, resource_id, namespace, bootstrap)

    async def _watch(
        self, name: str, resource_id: str | None, namespace: str | None, bootstrap: bool
    ) -> AsyncGenerator[ResourceEvent[Any], None]:
        from ichor.api.gen.v1alpha1 import state_pb2

        targets = self._targets()
        if len(targets) != 1:
            raise ClientError(
                f"watch goes to one node at a time (got {', '.join(targets)})",
                hint="use talos.with_node(node).watch(...) for each node",
            )
        node = targets[0]
        bound = self.with_node(node)
        spec = await self._per_node(node, lambda t: t.resource_definition(name))
        request = state_pb2.WatchRequest(
            namespace=namespace or spec.default_namespace, type=spec.resource_type, api_version=1
        )
        if resource_id is not None:
            request.id = resource_id
        elif bootstrap:
            request.options.bootstrap_contents = True
        async with bound.client.cosi.Watch.open() as call:
            await call.send_message(request, end=True)
            async for reply in call:
                for event in reply.event:
                    if event.event_type == _ERRORED:
                        failure = ClientError(f"{node}: watch failed: {event.error}")
                        failure.node = node
                        raise failure
                    if event.event_type == _BOOTSTRAPPED:
                        yield ResourceEvent(node, "bootstrapped", None)
                        continue
                    kind = _EVENT_KINDS.get(event.event_type, "updated")
                    yield ResourceEvent(node, kind, Resource.from_proto(node, event.resource))
        failure = WatchEndedError(f"{node}: the node ended the watch")
        failure.node = node
        raise failure

    # --- health ------------------------------------------------------------------------------

    async def discover(self) -> ClusterInfo:
        """The cluster's control plane and worker nodes, from the discovery members the one target
        node knows (``talosctl get members``)."""
        from ichor.client.health import discover

        node = self.client.require_single_node("health") if self.client.nodes else self.client.peer_host
        info: ClusterInfo = await self._per_node(node, lambda t: discover(t.client))
        return info

    async def health(
        self,
        *,
        control_plane_nodes: Sequence[str] = (),
        worker_nodes: Sequence[str] = (),
        cluster: ClusterInfo | None = None,
        timeout: timedelta = timedelta(minutes=20),
        server: bool = True,
        k8s_endpoint: str = "",
        interval: float = 1.0,
    ) -> AsyncGenerator[StageResult, None]:
        """Check the cluster's health stage by stage (``talosctl health``), yielding a
        :class:`StageResult` as each stage waits (with why), passes or is skipped.

        With ``server`` (the default, as talosctl) the one target node runs the checks and streams
        its progress; otherwise they run here, over this client. The nodes are the ones given, or
        the cluster members from discovery (``cluster``, from :meth:`discover`, gives them too). A stage that cannot pass within ``timeout`` raises
        :class:`~ichor.client.health.HealthCheckError`.
        """
        from ichor.client.health import ClusterInfo, HealthCheckError, cluster_checks, stages

        given = cluster or ClusterInfo.from_flags(list(control_plane_nodes), list(worker_nodes))
        if server:
            from google.protobuf import duration_pb2

            from ichor.api.gen.cluster import cluster_pb2

            node = self.client.require_single_node("health")
            wait = duration_pb2.Duration()
            wait.FromTimedelta(timeout)
            request = cluster_pb2.HealthCheckRequest(
                wait_timeout=wait,
                cluster_info=cluster_pb2.ClusterInfo(
                    control_plane_nodes=given.control_plane_nodes if given else [],
                    worker_nodes=given.worker_nodes if given else [],
                    force_endpoint=k8s_endpoint,
                ),
            )
            with self._attributing():
                async with self.client.cluster.HealthCheck.open() as call:
                    await call.send_message(request, end=True)
                    async for progress in call:
                        if progress.HasField("metadata") and progress.metadata.error:
                            failure = HealthCheckError(
                                f"healthcheck error: {progress.metadata.error}",
                                hint="see the lines above for the check that did not pass",
                            )
                            failure.node = progress.metadata.hostname or node
                            raise failure
                        yield StageResult.from_line(progress.message)
            return
        info = given if given is not None else await self.discover()
        async for result in stages(
            cluster_checks(self.client, info, k8s_endpoint=k8s_endpoint), timeout=timeout, interval=interval
        ):
            yield result


def match_definition(definitions: Sequence[Any], resource_type: str) -> Any:
    """The ``ResourceDefinitionSpec`` among ``definitions`` (COSI ``ResourceDefinitions`` resources)
    that ``resource_type`` names: full name, alias, or a prefix ending at a dot."""
    from ichor.api.gen.v1alpha1 import meta_pb2

    wanted = resource_type.lower()
    found = []
    for raw in definitions:
        spec = meta_pb2.ResourceDefinitionSpec()
        spec.ParseFromString(raw.spec.proto_spec)
        names = {spec.resource_type.lower(), *(a.lower() for a in spec.all_aliases)}
        if wanted in names or spec.resource_type.lower().startswith(wanted + "."):
            found.append(spec)
    if not found:
        raise UnknownResourceTypeError(
            f'resource type "{resource_type}" is not registered; list the types with '
            "`talosctl get resourcedefinitions`"
        )
    if len(found) > 1:
        raise UnknownResourceTypeError(
            f'resource type "{resource_type}" is ambiguous: {", ".join(s.resource_type for s in found)}'
        )
    return found[0]


def _code(exc: ClientError) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


RESET_WIPE_MODES = ("all", "system-disk", "user-disks")
"""``talosctl reset --wipe-mode`` values, in ``ResetRequest.WipeMode`` order."""


def reset_request(
    *,
    graceful: bool,
    reboot: bool,
    wipe: Sequence[str] = (),
    mode: str = "all",
    user_disks: Sequence[str] = (),
) -> Any:
    """The ``ResetRequest`` talosctl's flags make (``buildResetRequest``)."""
    from ichor.api.gen.machine import machine_pb2

    return machine_pb2.ResetRequest(
        graceful=graceful,
        reboot=reboot,
        mode=machine_pb2.ResetRequest.WipeMode.Name(RESET_WIPE_MODES.index(mode)),
        user_disks_to_wipe=list(user_disks),
        system_partitions_to_wipe=[machine_pb2.ResetPartitionSpec(label=label, wipe=True) for label in wipe],
    )
