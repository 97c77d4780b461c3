"""The Talos API from Python: the public async SDK (:class:`Talos`) and the connection under it.

The SDK (what talosctl's commands use too)::

    import asyncio
    from ichor.client import Talos

    async def main() -> None:
        async with Talos.from_config(context="mycluster") as talos:   # talosconfig: $TALOSCONFIG, ~/.talos/config
            for v in await talos.version():                            # one result per node, each with .node
                print(v.node, v.tag)
            for svc in await talos.services():
                print(svc.node, svc.id, svc.state, svc.health.text)
            async for stage in talos.health():                         # StageResult per step
                print(stage)

    asyncio.run(main())

Methods: ``version``, ``services``, ``service_start/stop/restart``, ``logs`` (async iterator of
lines), ``get``/``watch`` (any resource type by name, or by Talos's spec message class for typed
``.proto``), ``apply_config`` (modes, dry run), ``etcd_members``, ``etcd_snapshot``, ``health``
(async iterator), ``reboot``/``shutdown``/``reset``, ``contexts``; ``with_node``/``with_nodes``
pick targets. Calls over several nodes return :class:`Results` (a list, plus ``errors``: one
:class:`NodeFailedError` per node that failed); when every node failed they raise
:class:`AllNodesFailedError`. Every exception is a :class:`ClientError` and carries ``.node`` when
it came from one node. ``Talos.client`` is the lower-level :class:`Client` below.

The lower-level client, for any RPC (generated stubs)::

    from ichor.client import Client, node_replies

    async with Client.from_options(opts) as c:          # opts: GlobalOptions (talosctl's global flags)
        c.require_nodes()
        reply = await c.machine.Version(Empty())          # `nodes` metadata: one-to-many
        replies = node_replies(reply, fallback_node=c.peer_host).check("error getting version")
        for node, version in replies: ...
        if replies.warning(): print(replies.warning(), file=sys.stderr)

* Endpoints (``-e`` or the context's) are where the client connects; nodes (``-n`` or the context's)
  are what a command acts on and travel as ``nodes`` gRPC metadata on every call. COSI calls go per
  node with ``node`` metadata: ``c.with_node(n).cosi``.
* Several endpoints are shuffled; when one cannot be connected to, the next is tried.
* ``Client.from_options(opts, insecure=True, cert_fingerprints=[...])`` is maintenance mode: the
  ``--nodes`` are dialled directly, no client certificate, no verification, optional SPKI pinning.
* Every call failure is a :class:`ClientError`; gRPC statuses leave a call (or a stream's ``async
  with`` block) as :class:`RPCError`.

Exception tree (all carry ``hint``; the CLI edge prints ``error:``/``hint:``)::

    MachineryError
    └── ClientError                       anything this package refuses
        ├── NoEndpointsError              nothing to dial (names `talosctl config endpoint` and -e)
        ├── NoNodesError                  a command needs nodes and none are set (or too many)
        ├── ConnectionFailedError         no endpoint could be connected; .failures, one per endpoint
        │   ├── EndpointUnreachableError  refused / timed out / did not resolve, on every endpoint
        │   └── TLSError                  the TLS handshake failed
        │       ├── UnknownAuthorityError     server cert not from the context's CA (other cluster?)
        │       │   └── MaintenanceModeError  the node is in maintenance mode (no config yet)
        │       ├── CertificateNameError      server cert has no SAN for the endpoint as typed
        │       └── FingerprintMismatchError  --cert-fingerprint does not match (maintenance mode)
        ├── RPCError                      the server returned a gRPC error (.code, .code_name, .rpc_message)
        │   ├── PermissionDeniedError     PermissionDenied; .roles_needed names the role(s)
        │   ├── NoForwardingError         the endpoint is a worker: it forwards no calls to other nodes
        │   └── ConnectionLostError       the connection closed under a call
        │       └── ClientCertificateRequiredError  --insecure against a configured node (TLS: certificate required)
        ├── AllNodesFailedError           every node of a one-to-many reply failed; .errors
        ├── NodesFailedError              Results.raise_for_errors(): some nodes failed; .errors
        ├── NodeFailedError               one node's in-band error (.node, .code, .error)
        │   └── ResourceNotFoundError     get(type, id): that node has no such resource
        ├── UnknownResourceTypeError      get/watch of a type the node does not define
        ├── SnapshotError                 etcd_snapshot failed or was cut short
        ├── WatchEndedError               the node ended a watch (it is going away)
        └── HealthError, HealthCheckError (ichor.client.health) the cluster info is unusable / a stage failed

Talosconfig problems (missing file, unknown context, damaged base64) are
:class:`~ichor.machinery.errors.ClientConfigError`, as elsewhere.

This package never prints (except the once-per-process certificate expiry warning on stderr) and
never exits; it does not define CLI commands.
"""

from __future__ import annotations

__all__ = [
    "APID_PORT",
    "APPLY_MODES",
    "DEFAULT_CONNECT_TIMEOUT",
    "EXPIRY_WARNING",
    "GRPC_MAX_MESSAGE_SIZE",
    "NODES_NOT_SET",
    "AllNodesFailedError",
    "ApplyMode",
    "ApplyResult",
    "CertificateNameError",
    "Client",
    "ClientCertificateRequiredError",
    "ClientError",
    "ConnectionFailedError",
    "ConnectionLostError",
    "ContextInfo",
    "Endpoint",
    "EndpointFailure",
    "EndpointUnreachableError",
    "EtcdMember",
    "FingerprintMismatchError",
    "GlobalOptions",
    "LifecycleAction",
    "LogLine",
    "MaintenanceModeError",
    "NoEndpointsError",
    "NoForwardingError",
    "NoNodesError",
    "NodeError",
    "NodeFailedError",
    "NodeLineBuffer",
    "NodeReplies",
    "NodesFailedError",
    "PermissionDeniedError",
    "RPCError",
    "Resource",
    "ResourceEvent",
    "ResourceNotFoundError",
    "Results",
    "Service",
    "ServiceAction",
    "ServiceEvent",
    "ServiceHealth",
    "SnapshotError",
    "StageResult",
    "TLSError",
    "Talos",
    "UnknownAuthorityError",
    "UnknownResourceTypeError",
    "Version",
    "WatchEndedError",
    "code_name",
    "errors_hint",
    "expiry_warning",
    "format_errors",
    "format_tabbed",
    "message_error",
    "message_node",
    "node_column",
    "node_replies",
    "parse_endpoint",
    "parse_endpoints",
    "parse_fingerprint",
    "prefix_lines",
    "render_table",
    "roles_for",
    "rpc_error_text",
    "spki_fingerprint",
    "warn_if_expiring",
]

from ichor.client._client import DEFAULT_CONNECT_TIMEOUT, NODES_NOT_SET, Client
from ichor.client._endpoints import APID_PORT, Endpoint, parse_endpoint, parse_endpoints
from ichor.client._errors import (
    AllNodesFailedError,
    CertificateNameError,
    ClientCertificateRequiredError,
    ClientError,
    ConnectionFailedError,
    ConnectionLostError,
    EndpointFailure,
    EndpointUnreachableError,
    FingerprintMismatchError,
    MaintenanceModeError,
    NoEndpointsError,
    NoForwardingError,
    NoNodesError,
    PermissionDeniedError,
    RPCError,
    TLSError,
    UnknownAuthorityError,
    code_name,
    roles_for,
    rpc_error_text,
)
from ichor.client._output import NodeLineBuffer, format_tabbed, node_column, prefix_lines, render_table
from ichor.client._replies import (
    NodeError,
    NodeReplies,
    errors_hint,
    format_errors,
    message_error,
    message_node,
    node_replies,
)
from ichor.client._talos import (
    ResourceNotFoundError,
    SnapshotError,
    Talos,
    UnknownResourceTypeError,
    WatchEndedError,
)
from ichor.client._tls import (
    EXPIRY_WARNING,
    GRPC_MAX_MESSAGE_SIZE,
    expiry_warning,
    parse_fingerprint,
    spki_fingerprint,
    warn_if_expiring,
)
from ichor.client._types import (
    APPLY_MODES,
    ApplyMode,
    ApplyResult,
    ContextInfo,
    EtcdMember,
    LifecycleAction,
    LogLine,
    NodeFailedError,
    NodesFailedError,
    Resource,
    ResourceEvent,
    Results,
    Service,
    ServiceAction,
    ServiceEvent,
    ServiceHealth,
    StageResult,
    Version,
)
from ichor.machinery.clientconfig import GlobalOptions
