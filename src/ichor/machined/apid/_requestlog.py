"""apid's request log: one line per call, as Talos's gRPC logging middleware writes it.

Talos's apid logs every call when it ends (``pkg/grpc/middleware/log``, Go's ``log`` with date,
microseconds and short file name)::

    2024/05/01 12:00:00.123456 log.go:73: OK [/machine.MachineService/Version] 1.2345ms unary Success (:authority=10.5.0.2:50000;content-type=application/grpc;user-agent=grpc-go/1.62.1)

the status code by Go's name, the method, how long it took (Go's ``Duration``), ``unary`` or
``stream``, ``Success`` or the error as Go prints it, and the caller's metadata sorted by key
(``token`` hidden). ``talosctl logs apid`` shows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from grpclib.const import Status

from ichor.machinery import goduration

__all__ = ["GO_CODE_NAMES", "request_line"]

GO_CODE_NAMES = {
    Status.OK: "OK", Status.CANCELLED: "Canceled", Status.UNKNOWN: "Unknown",
    Status.INVALID_ARGUMENT: "InvalidArgument", Status.DEADLINE_EXCEEDED: "DeadlineExceeded",
    Status.NOT_FOUND: "NotFound", Status.ALREADY_EXISTS: "AlreadyExists",
    Status.PERMISSION_DENIED: "PermissionDenied", Status.RESOURCE_EXHAUSTED: "ResourceExhausted",
    Status.FAILED_PRECONDITION: "FailedPrecondition", Status.ABORTED: "Aborted",
    Status.OUT_OF_RANGE: "OutOfRange", Status.UNIMPLEMENTED: "Unimplemented", Status.INTERNAL: "Internal",
    Status.UNAVAILABLE: "Unavailable", Status.DATA_LOSS: "DataLoss", Status.UNAUTHENTICATED: "Unauthenticated",
}  # fmt: skip
"""gRPC's codes as Go's ``codes.Code.String()`` names them."""

_SENSITIVE = frozenset({"token"})


def request_line(
    at: datetime,
    *,
    path: str,
    streaming: bool,
    took: timedelta,
    status: Status,
    message: str,
    metadata: Iterable[tuple[str, str]],
) -> str:
    """One call's log line (without the newline)."""
    values: dict[str, list[str]] = {}
    for key, value in metadata:
        values.setdefault(key, []).append(value)
    pairs = ";".join(
        f"{key}={'<hidden>' if key in _SENSITIVE else ','.join(values[key])}" for key in sorted(values)
    )
    code = GO_CODE_NAMES.get(status, f"Code({status.value})")
    outcome = "Success" if status is Status.OK else f"rpc error: code = {code} desc = {message}"
    where, kind = ("log.go:94", "stream") if streaming else ("log.go:73", "unary")
    stamp = at.strftime("%Y/%m/%d %H:%M:%S.%f")
    return f"{stamp} {where}: {code} [{path}] {goduration.format(took)} {kind} {outcome} ({pairs})"
