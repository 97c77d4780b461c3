"""apid: the node's Talos API endpoint on ``<address>:50000`` — a transparent gRPC proxy.

Callers reach machined (on its unix socket) only through apid. apid terminates mutual TLS, works
out the caller's roles (certificate Organization, RBAC on/off, impersonation), routes the call by
its ``node``/``nodes``/``proxyfrom`` metadata to this node's machined or to other nodes' apids,
and for one-to-many calls tags each node's reply with ``metadata.hostname`` and turns a node's
failure into an in-band error element. It forwards protobuf bytes without decoding them. It refuses
a call the caller's roles do not allow (:mod:`ichor.machined.authz`) before reading its request,
and a request message over :data:`MAX_MESSAGE_SIZE` from its length prefix; machined checks
``talos-role`` again.

Public surface:

* :class:`Apid` — the server (``start``/``close``/``serve``, async context manager).
* :class:`MachineApi` — machined's handlers as the machined service publishes them, for apid to
  call in-process when both run in one process (no HTTP/2 hop on the unix socket).
* :data:`METHODS`, :func:`is_streamed` — the proxied methods and which fan out as streams.
* :func:`route`, :class:`Route`, :class:`RouteKind` — the routing decision on its own.
* :func:`append_info`, :func:`error_reply`, :func:`go_error_string` — the wire-level reply edits.
* :class:`RawCodec` — the passthrough codec; :data:`MAX_MESSAGE_SIZE` (32 MiB, Talos's limit).
* :func:`server_context`, :func:`client_context`, :func:`ext_key_usage_problem` — TLS.
"""

from __future__ import annotations

__all__ = [
    "APID_PORT",
    "DIAL_TIMEOUT",
    "MAX_MESSAGE_SIZE",
    "METHODS",
    "NODES_KEY",
    "NODE_KEY",
    "PROXYFROM_KEY",
    "Apid",
    "MachineApi",
    "Method",
    "RawCodec",
    "RawStatusDetailsCodec",
    "Route",
    "RouteKind",
    "WireError",
    "append_info",
    "check_target",
    "client_context",
    "error_reply",
    "ext_key_usage_problem",
    "go_error_string",
    "hostname_metadata",
    "is_streamed",
    "local_target_checker",
    "route",
    "server_context",
]

from ichor.api.limits import MAX_MESSAGE_SIZE

from ._codec import RawCodec, RawStatusDetailsCodec
from ._inproc import MachineApi
from ._methods import METHODS, Method, is_streamed
from ._proxy import APID_PORT, DIAL_TIMEOUT, Apid
from ._router import (
    NODE_KEY,
    NODES_KEY,
    PROXYFROM_KEY,
    Route,
    RouteKind,
    check_target,
    local_target_checker,
    route,
)
from ._tls import client_context, ext_key_usage_problem, server_context
from ._wire import WireError, append_info, error_reply, go_error_string, hostname_metadata
