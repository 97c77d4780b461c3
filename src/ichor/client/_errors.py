"""The client's exceptions, gRPC status names as Go prints them, and the role each RPC needs.

Nothing here dials anything; the connection code raises these, the CLI edge prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ichor.machinery.errors import MachineryError

# grpc-go's codes.Code.String(): talosctl prints these in `rpc error: code = <name> desc = ...`.
GO_CODE_NAMES = (
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
)


def code_name(code: int) -> str:
    """Go's name for a gRPC status code (``Code(17)`` for unknown values, as Go prints them)."""
    return GO_CODE_NAMES[code] if 0 <= code < len(GO_CODE_NAMES) else f"Code({code})"


def rpc_error_text(code: int, message: str) -> str:
    """``rpc error: code = <Name> desc = <message>``: the string of a Go status error."""
    return f"rpc error: code = {code_name(code)} desc = {message}"


class ClientError(MachineryError):
    """Base of everything :mod:`ichor.client` raises on purpose.

    ``node`` names the node the error came from when it came from one (a call the SDK made to one
    node, an in-band per-node error); None when it is not about one node (no endpoint answered).
    """

    node: str | None = None


class NoEndpointsError(ClientError):
    """Nothing to dial: no endpoints in the context or on the command line (or no nodes with --insecure)."""


class NoNodesError(ClientError):
    """A command needs target nodes and neither ``--nodes`` nor the context gives any (or too many)."""


@dataclass(frozen=True)
class EndpointFailure:
    """Why one endpoint could not be used."""

    endpoint: str
    """``host:port`` as dialled."""
    reason: str
    kind: str
    """``unreachable``, ``unknown-authority``, ``name``, ``fingerprint`` or ``tls``."""
    hint: str | None = None

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.reason}"


class ConnectionFailedError(ClientError):
    """No endpoint could be connected to; ``failures`` says why for each one tried, in order."""

    def __init__(self, message: str, failures: Sequence[EndpointFailure], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.failures = list(failures)


class EndpointUnreachableError(ConnectionFailedError):
    """Every endpoint refused the connection, timed out or did not resolve."""


class TLSError(ConnectionFailedError):
    """The TLS handshake with the endpoint(s) failed."""


class UnknownAuthorityError(TLSError):
    """The endpoint's certificate is not signed by the talosconfig context's CA."""


class MaintenanceModeError(UnknownAuthorityError):
    """The endpoint is a node in maintenance mode: it serves only the insecure maintenance API."""


class CertificateNameError(TLSError):
    """The endpoint's certificate has no SAN for the endpoint as typed."""


class FingerprintMismatchError(TLSError):
    """Maintenance mode: the node's certificate does not match ``--cert-fingerprint``."""


class RPCError(ClientError):
    """The server answered with a gRPC error status.

    ``code`` is the numeric gRPC code, ``code_name`` Go's name for it, ``rpc_message`` the status
    message as sent; ``str()`` is what talosctl prints (``rpc error: code = ... desc = ...``).
    """

    def __init__(
        self, code: int, rpc_message: str, *, method: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(rpc_error_text(code, rpc_message), hint=hint)
        self.code = code
        self.rpc_message = rpc_message
        self.method = method

    @property
    def code_name(self) -> str:
        return code_name(self.code)


class PermissionDeniedError(RPCError):
    """``PermissionDenied``; ``roles_needed`` lists the roles that may call ``method`` (empty if unknown)."""

    def __init__(
        self,
        rpc_message: str,
        *,
        method: str | None,
        roles_needed: Sequence[str],
        roles_held: Sequence[str],
        context: str | None,
    ) -> None:
        self.roles_needed = tuple(roles_needed)
        self.roles_held = tuple(roles_held)
        if roles_needed:
            need = " or ".join(roles_needed)
            hint = (
                f"{_short(method)} needs role {need}"
                + (f"; the client certificate of context {context!r}" if context else "; this certificate")
                + (f" has {', '.join(roles_held)}" if roles_held else " has no roles")
                + f"; use a talosconfig with that role (an admin can make one: `talosctl config new --roles={roles_needed[0]}`)"
            )
        else:
            hint = "the client certificate's roles (its Organization) do not allow this call"
        super().__init__(7, rpc_message, method=method, hint=hint)


class NoForwardingError(RPCError):
    """The endpoint refused to forward the call to other nodes (``no request forwarding``): it is a
    worker, and only control plane nodes forward requests."""

    def __init__(self, rpc_message: str, *, method: str | None, endpoints_source: str = "") -> None:
        where = f" (endpoints from {endpoints_source})" if endpoints_source else ""
        hint = (
            f"the endpoint{where} is a worker node, and workers do not forward requests to other nodes; "
            "use control plane nodes as endpoints: `talosctl config endpoint <control-plane-ip>...` "
            "or -e <control-plane-ip>"
        )
        super().__init__(7, rpc_message, method=method, hint=hint)


class ConnectionLostError(RPCError):
    """The connection closed under a call (node rebooting, or the node refused the client certificate)."""


CERTIFICATE_REQUIRED = (
    'connection error: desc = "error reading server preface: remote error: tls: certificate required"'
)
"""What Talos's client (grpc-go) reports when a node's TLS refuses a client that sent no certificate."""


class ClientCertificateRequiredError(ConnectionLostError):
    """``--insecure`` (no client certificate) against a configured node: its TLS refused the connection."""

    def __init__(self, node: str, *, method: str | None = None) -> None:
        super().__init__(
            14,  # Unavailable, as grpc-go reports it
            CERTIFICATE_REQUIRED,
            method=method,
            hint=f"{node} is configured, not in maintenance mode: its API serves only clients with a certificate "
            "of its cluster, and --insecure sends none (it is for nodes still waiting for a config). Drop "
            "--insecure and use the cluster's talosconfig (`talosctl --talosconfig <file> -n <node> ...`); to "
            "start the node over in maintenance mode, `talosctl reset` it first",
        )


class NodeFailure(Protocol):
    """One node's failure, as :class:`AllNodesFailedError` holds them (``NodeFailedError``, ``NodeError``)."""

    @property
    def node(self) -> str: ...

    @property
    def error(self) -> str: ...

    @property
    def code(self) -> int | None: ...

    @property
    def code_name(self) -> str | None: ...


class AllNodesFailedError(ClientError):
    """Every node of a one-to-many call answered with an error; ``errors`` holds one per node."""

    def __init__(self, message: str, errors: Sequence[NodeFailure], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.errors: list[NodeFailure] = list(errors)


def _short(method: str | None) -> str:
    return (method or "this call").lstrip("/")


# Talos 1.7 machined/COSI authorization rules (spec: architecture §6). Unlisted methods are admin-only.
_ADMIN = ("os:admin",)
_OPERATOR = ("os:admin", "os:operator")
_READER = ("os:admin", "os:operator", "os:reader")

_MACHINE_READER = [
    "CPUInfo", "Containers", "DiskStats", "DiskUsage", "Dmesg", "EtcdMemberList", "Events", "Hostname",
    "ImageList", "List", "LoadAvg", "Logs", "LogsContainers", "Memory", "Mounts", "NetworkDeviceStats",
    "Netstat", "Processes", "ServiceList", "Stats", "SystemStat", "Version",
]  # fmt: skip
_MACHINE_OPERATOR = [
    "EtcdAlarmList", "EtcdAlarmDisarm", "EtcdDefragment", "EtcdStatus", "ImagePull", "PacketCapture",
    "Reboot", "Restart", "ServiceRestart", "ServiceStart", "ServiceStop", "Shutdown",
]  # fmt: skip
_READER_METHODS = (
    "/cluster.ClusterService/HealthCheck",
    "/inspect.InspectService/ControllerRuntimeDependencies",
    "/storage.StorageService/Disks",
    "/time.TimeService/Time",
    "/time.TimeService/TimeCheck",
    "/cosi.resource.State/Get",
    "/cosi.resource.State/List",
    "/cosi.resource.State/Watch",
    *(f"/machine.MachineService/{name}" for name in _MACHINE_READER),
)
_OPERATOR_METHODS = tuple(f"/machine.MachineService/{name}" for name in _MACHINE_OPERATOR)

_ROLES: dict[str, tuple[str, ...]] = {
    **{m: _READER for m in _READER_METHODS},
    **{m: _OPERATOR for m in _OPERATOR_METHODS},
    "/machine.MachineService/EtcdSnapshot": ("os:admin", "os:operator", "os:etcd:backup"),
}


def roles_for(method: str) -> tuple[str, ...]:
    """Roles that may call ``method`` (``/pkg.Service/Method``) on a Talos 1.7 node."""
    return _ROLES.get(method, _ADMIN)
