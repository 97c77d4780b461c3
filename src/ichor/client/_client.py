"""``Client``: a talosctl connection built from the global flags and the talosconfig.

It resolves the context, normalises endpoints, builds the TLS context, opens one failover channel
(lazily, at the first call) and hands out generated stubs bound to it with the right routing
metadata. It never prints except the one expiry warning, and never exits: errors are raised.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import random
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ichor.client._channel import CallContext, FailoverChannel, ScopedChannel
from ichor.client._endpoints import Endpoint, parse_endpoints
from ichor.client._errors import NoEndpointsError, NoNodesError
from ichor.client._tls import (
    certificate_roles,
    client_ssl_context,
    insecure_ssl_context,
    parse_fingerprint,
    warn_if_expiring,
)
from ichor.machinery.clientconfig import GlobalOptions
from ichor.machinery.errors import ClientConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ichor.api.gen.cluster.cluster_grpc import ClusterServiceStub
    from ichor.api.gen.inspectapi.inspect_grpc import InspectServiceStub
    from ichor.api.gen.machine.machine_grpc import MachineServiceStub
    from ichor.api.gen.storage.storage_grpc import StorageServiceStub
    from ichor.api.gen.timeapi.time_grpc import TimeServiceStub
    from ichor.api.gen.v1alpha1.state_grpc import StateStub
    from ichor.machinery.clientconfig import Context

DEFAULT_CONNECT_TIMEOUT = 10.0

NODES_NOT_SET = (
    "nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes "
    "to run the command against"
)


def _b64(value: str, what: str, context: str) -> bytes:
    try:
        return base64.b64decode(value.strip(), validate=True) if value.strip() else b""
    except (binascii.Error, ValueError):
        raise ClientConfigError(
            f"error decoding {what}: contexts.{context}.{what} is not valid base64",
            hint="the talosconfig is damaged; regenerate it (`talosctl gen config`) or merge a good one",
        ) from None


class _Connection:
    """The shared part of a client and its views: one failover channel (plus per-node ones if insecure)."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        make_ssl: Callable[[], Any],
        call: CallContext,
        *,
        connect_timeout: float,
        fingerprints: tuple[str, ...],
        rng: random.Random,
    ) -> None:
        self.endpoints = endpoints
        self._make_ssl = make_ssl
        self._ssl: Any = None
        self.call = call
        self.connect_timeout = connect_timeout
        self.fingerprints = fingerprints
        self._rng = rng
        self._channel: FailoverChannel | None = None
        self._children: dict[str, _Connection] = {}

    def channel(self) -> FailoverChannel:
        if self._channel is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError(
                    "ichor.client.Client is used from async code (inside a running loop)"
                ) from None
            if self._ssl is None:
                self._ssl = self._make_ssl()
            self._channel = FailoverChannel(
                self.endpoints,
                self._ssl,
                call=self.call,
                connect_timeout=self.connect_timeout,
                fingerprints=self.fingerprints,
                rng=self._rng,
            )
        return self._channel

    def child(self, endpoint: Endpoint) -> _Connection:
        """A connection to one endpoint only (maintenance mode: ``node`` means "dial that node")."""
        found = self._children.get(endpoint.address)
        if found is None:
            found = _Connection(
                [endpoint],
                self._make_ssl,
                self.call,
                connect_timeout=self.connect_timeout,
                fingerprints=self.fingerprints,
                rng=self._rng,
            )
            found._ssl = self._ssl
            self._children[endpoint.address] = found
        return found

    def close(self) -> None:
        for child in self._children.values():
            child.close()
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def aclose(self) -> None:
        """Close, and return once every socket is closed."""
        for child in self._children.values():
            await child.aclose()
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.aclose()


class Client:
    """A talosctl connection: ``async with Client.from_options(opts) as c: await c.machine.Version(...)``.

    ``machine``/``storage``/``time``/``cluster``/``inspect`` carry ``nodes`` metadata (all target
    nodes) when nodes are set, as talosctl's ``WithClient`` does; ``cosi`` carries ``node`` (COSI is
    one node at a time): use ``with_node(n).cosi`` per node. In maintenance mode (``insecure``) no
    routing metadata is ever sent and the nodes are the dial targets.
    """

    def __init__(
        self,
        *,
        endpoints: Sequence[str],
        nodes: Sequence[str] = (),
        ca: bytes = b"",
        crt: bytes = b"",
        key: bytes = b"",
        context_name: str | None = None,
        insecure: bool = False,
        cert_fingerprints: Sequence[str] = (),
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        endpoints_source: str = "",
        rng: random.Random | None = None,
    ) -> None:
        """Explicit construction; ``ca``/``crt``/``key`` are PEM bytes (not base64)."""
        parsed = parse_endpoints(endpoints)
        if not parsed:
            raise _no_endpoints(insecure, context_name)
        fingerprints = tuple(parse_fingerprint(f) for f in cert_fingerprints)
        self.insecure = insecure
        self.context_name = context_name
        self.nodes: list[str] = [n.strip() for n in nodes if n.strip()]
        """Target nodes (``--nodes`` or the context's); in maintenance mode, the dial targets."""
        call = CallContext(
            context_name=context_name,
            roles=certificate_roles(crt) if crt else [],
            trusted_ca_pem=ca,
            endpoints_source=endpoints_source,
            insecure=insecure,
        )

        def make_ssl() -> Any:
            return (
                insecure_ssl_context()
                if insecure
                else client_ssl_context(ca_pem=ca, crt_pem=crt, key_pem=key)
            )

        # Build it now so a bad CA/crt/key is refused here, not at the first call.
        ready = None if insecure else make_ssl()
        self._conn = _Connection(
            parsed,
            make_ssl,
            call,
            connect_timeout=connect_timeout,
            fingerprints=fingerprints,
            rng=rng or random.Random(),
        )
        self._conn._ssl = ready
        self._owner = True
        self._metadata: tuple[tuple[str, str], ...] = (
            () if insecure else tuple(("nodes", n) for n in self.nodes)
        )
        self._cosi_metadata = _cosi_routing(self._metadata)

    # --- construction from talosconfig / flags -------------------------------------------------

    @classmethod
    def from_context(
        cls,
        context: Context,
        *,
        name: str | None = None,
        endpoints: Sequence[str] = (),
        nodes: Sequence[str] = (),
        now: datetime | None = None,
        warn: Callable[[str], object] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        rng: random.Random | None = None,
    ) -> Client:
        """A client for a talosconfig context; ``endpoints``/``nodes`` override the context's.

        Prints (via ``warn``, default stderr) a warning once if the client certificate expires
        within 30 days.
        """
        where = name or "<context>"
        ca = _b64(context.ca, "ca", where)
        crt = _b64(context.crt, "crt", where)
        key = _b64(context.key, "key", where)
        chosen = [e for e in endpoints if e.strip()]
        source = "-e/--endpoints" if chosen else f"talosconfig context {name!r}" if name else "the context"
        if not chosen:
            chosen = list(context.endpoints)
        if crt:
            warn_if_expiring(crt, name, now=now, write=warn)
        return cls(
            endpoints=chosen,
            nodes=list(nodes) or list(context.nodes),
            ca=ca,
            crt=crt,
            key=key,
            context_name=name,
            connect_timeout=connect_timeout,
            endpoints_source=source,
            rng=rng,
        )

    @classmethod
    def from_options(
        cls,
        opts: GlobalOptions,
        *,
        insecure: bool = False,
        cert_fingerprints: Sequence[str] = (),
        now: datetime | None = None,
        warn: Callable[[str], object] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        rng: random.Random | None = None,
    ) -> Client:
        """From talosctl's global flags: ``--talosconfig``, ``--context``, ``-e``, ``-n``; the one way
        talosctl's commands and ``cluster create`` build a client from a talosconfig.

        With ``insecure`` (maintenance mode) no talosconfig is read: ``--nodes`` are dialled directly.
        """
        if insecure:
            return cls(
                endpoints=list(opts.nodes),
                nodes=list(opts.nodes),
                insecure=True,
                cert_fingerprints=cert_fingerprints,
                connect_timeout=connect_timeout,
                endpoints_source="--nodes",
                rng=rng,
            )
        if cert_fingerprints:
            raise ClientConfigError(
                "--cert-fingerprint only applies with --insecure (maintenance mode)",
                hint="drop --cert-fingerprint, or add --insecure to talk to a node in maintenance mode",
            )
        from ichor.machinery.clientconfig import TalosConfig, find_talosconfig

        location = find_talosconfig(opts.talosconfig)
        if not location.path.exists():
            tried = ", ".join(str(p) for p in location.tried)
            raise ClientConfigError(
                f"talosconfig {str(location.path)!r} does not exist (looked at: {tried})",
                hint="generate one with `talosctl gen config`, then point to it with --talosconfig or $TALOSCONFIG",
            )
        name, context = TalosConfig.load(location.path).get(opts.context)
        return cls.from_context(
            context,
            name=name,
            endpoints=opts.endpoints,
            nodes=opts.nodes,
            now=now,
            warn=warn,
            connect_timeout=connect_timeout,
            rng=rng,
        )

    # --- views -----------------------------------------------------------------------------------

    def _view(self, conn: _Connection, metadata: tuple[tuple[str, str], ...], nodes: list[str]) -> Client:
        view = object.__new__(Client)
        view.insecure = self.insecure
        view.context_name = self.context_name
        view.nodes = nodes
        view._conn = conn
        view._owner = False
        view._metadata = metadata
        view._cosi_metadata = _cosi_routing(metadata)
        return view

    def with_node(self, node: str) -> Client:
        """A view acting on one node (``node`` metadata, one-to-one: replies carry no hostname).

        In maintenance mode: a view dialling that node directly, with no metadata.
        """
        if self.insecure:
            (endpoint,) = parse_endpoints([node])
            return self._view(self._conn.child(endpoint), (), [node])
        return self._view(self._conn, (("node", node),), [node])

    def with_nodes(self, *nodes: str) -> Client:
        """A view acting on ``nodes`` (one-to-many ``nodes`` metadata)."""
        if self.insecure:
            raise ValueError("maintenance mode has no one-to-many calls; use with_node() per node")
        return self._view(self._conn, tuple(("nodes", n) for n in nodes), list(nodes))

    def without_nodes(self) -> Client:
        """A view with no routing metadata: the endpoint itself answers (talosctl's ``WithClientNoNodes``)."""
        return self._view(self._conn, (), [])

    def require_nodes(self) -> list[str]:
        """The target nodes, or talosctl's "nodes are not set" error (for commands wrapped in WithClient)."""
        if not self.nodes:
            raise NoNodesError(
                NODES_NOT_SET,
                hint="pass -n/--nodes <IP>, or set default nodes with `talosctl config node <IP>`",
            )
        return list(self.nodes)

    def require_single_node(self, command: str) -> str:
        """The one target node for commands that refuse several (``kubeconfig``, ``read``, ``etcd snapshot``...)."""
        nodes = self.require_nodes()
        if len(nodes) > 1:
            raise NoNodesError(
                f"command {command!r} is not supported with multiple nodes",
                hint=f"pick one with -n/--nodes (got {', '.join(nodes)})",
            )
        return nodes[0]

    # --- stubs -----------------------------------------------------------------------------------

    @property
    def endpoints(self) -> list[Endpoint]:
        """The normalised endpoints this client dials (its nodes, in maintenance mode)."""
        return list(self._conn.endpoints)

    @property
    def current_endpoint(self) -> Endpoint | None:
        """The endpoint of the live (or last) connection; None before the first call."""
        channel = self._conn._channel
        return channel.endpoint if channel is not None else None

    @property
    def peer_host(self) -> str:
        """The host talosctl prints as NODE when a reply carries no ``metadata.hostname``."""
        ep = self.current_endpoint or self._conn.endpoints[0]
        return ep.host

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Routing metadata sent with calls of ``machine``/``storage``/``time``/``cluster``/``inspect``."""
        return self._metadata

    def channel(self, metadata: Sequence[tuple[str, str]] | None = None) -> Any:
        """A grpclib-Channel-compatible object for any generated stub (default: this view's metadata)."""
        return ScopedChannel(self._conn.channel(), self._metadata if metadata is None else tuple(metadata))

    async def connect(self) -> Endpoint:
        """Connect now (failing over between endpoints) instead of at the first call."""
        channel = self._conn.channel()
        await channel.__connect__()
        assert channel.endpoint is not None
        return channel.endpoint

    @property
    def machine(self) -> MachineServiceStub:
        from ichor.api.gen.machine.machine_grpc import MachineServiceStub

        return MachineServiceStub(self.channel())

    @property
    def storage(self) -> StorageServiceStub:
        from ichor.api.gen.storage.storage_grpc import StorageServiceStub

        return StorageServiceStub(self.channel())

    @property
    def time(self) -> TimeServiceStub:
        from ichor.api.gen.timeapi.time_grpc import TimeServiceStub

        return TimeServiceStub(self.channel())

    @property
    def cluster(self) -> ClusterServiceStub:
        from ichor.api.gen.cluster.cluster_grpc import ClusterServiceStub

        return ClusterServiceStub(self.channel())

    @property
    def inspect(self) -> InspectServiceStub:
        from ichor.api.gen.inspectapi.inspect_grpc import InspectServiceStub

        return InspectServiceStub(self.channel())

    @property
    def cosi(self) -> StateStub:
        """COSI State with ``node`` metadata (apid refuses one-to-many COSI calls)."""
        from ichor.api.gen.v1alpha1.state_grpc import StateStub

        if self._cosi_metadata is None:
            raise ValueError(
                "COSI calls go to one node at a time: use client.with_node(node).cosi for each node"
            )
        return StateStub(self.channel(self._cosi_metadata))

    async def list_resources(self, namespace: str, rtype: str) -> list[Any]:
        """Every ``cosi.resource.Resource`` of one type on the node this client is bound to
        (:meth:`with_node`), read with COSI ``State.List``."""
        from ichor.api.gen.v1alpha1 import state_pb2

        out = []
        async with self.cosi.List.open() as call:
            await call.send_message(state_pb2.ListRequest(namespace=namespace, type=rtype), end=True)
            async for reply in call:
                out.append(reply.resource)
        return out

    # --- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (views share their client's; closing a view does nothing)."""
        if self._owner:
            self._conn.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections and wait until their sockets are closed (TLS closes in loop callbacks)."""
        if self._owner:
            await self._conn.aclose()


def _cosi_routing(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...] | None:
    """COSI's metadata for a view: ``node`` for one target, none for none, None (refused) for several."""
    targets = [v for k, v in metadata if k in ("node", "nodes")]
    if not targets:
        return ()
    return (("node", targets[0]),) if len(targets) == 1 else None


def _no_endpoints(insecure: bool, context_name: str | None) -> NoEndpointsError:
    if insecure:
        return NoEndpointsError(
            "failed to determine endpoints: no --nodes given",
            hint="with --insecure (maintenance mode) talosctl connects to the nodes directly: pass -n/--nodes <IP>",
        )
    where = (
        f"talosconfig context {context_name!r} has no endpoints" if context_name else "no endpoints are set"
    )
    return NoEndpointsError(
        f"failed to determine endpoints: {where}",
        hint="set the control plane addresses with `talosctl config endpoint <IP>` or pass -e/--endpoints <IP> "
        "(endpoints are where talosctl connects; -n/--nodes are the machines a command acts on)",
    )
