"""Protobuf wire-level surgery apid does on replies it does not otherwise understand.

Every Talos unary reply is ``XxxResponse { repeated Xxx messages = 1; }`` and every ``Xxx`` (and
every streamed message) starts with ``common.Metadata metadata = 1``. That lets apid tag a reply
with the node it came from without knowing its type:

* unary: the reply is exactly one field-1 length-delimited element; apid re-frames it with a
  new length after appending an encoded ``common.Empty{metadata{hostname}}``. A second field-1
  occurrence of a singular message field merges into the element's own ``metadata``.
* streaming: the encoded ``common.Empty{metadata{hostname}}`` is appended to the message itself.
* a failing node becomes ``common.EmptyResponse{messages:[Empty{metadata{hostname,error,status}}]}``
  (unary) or ``common.Empty{...}`` (streaming), which decodes as any reply type.

Pure functions over bytes; no I/O.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from google.rpc import status_pb2  # type: ignore[import-untyped]
from grpclib.const import Status

from ichor.api.gen.common import common_pb2
from ichor.api.wire import encode_varint

_WIRE_LEN = 2
_MESSAGES_FIELD = 1
_MESSAGES_TAG = (_MESSAGES_FIELD << 3) | _WIRE_LEN

# grpc-go's codes.Code.String(), which Talos puts into metadata.error via status.Error().
_GO_CODE_NAMES = {
    0: "OK",
    1: "Canceled",
    2: "Unknown",
    3: "InvalidArgument",
    4: "DeadlineExceeded",
    5: "NotFound",
    6: "AlreadyExists",
    7: "PermissionDenied",
    8: "ResourceExhausted",
    9: "FailedPrecondition",
    10: "Aborted",
    11: "OutOfRange",
    12: "Unimplemented",
    13: "Internal",
    14: "Unavailable",
    15: "DataLoss",
    16: "Unauthenticated",
}


class WireError(ValueError):
    """A reply that does not have the one-element ``messages`` shape apid relies on."""


def read_varint(data: bytes, pos: int = 0) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it."""
    value = 0
    for shift in range(0, 64, 7):
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise WireError("varint longer than 10 bytes")


def hostname_metadata(target: str) -> bytes:
    """Encoded ``common.Empty{metadata{hostname: target}}``: one field-1 occurrence."""
    return bytes(common_pb2.Empty(metadata=common_pb2.Metadata(hostname=target)).SerializeToString())


def append_info(reply: bytes, target: str, *, streaming: bool) -> bytes:
    """Tag one node's reply with ``metadata.hostname = target`` (see the module docstring)."""
    tag = hostname_metadata(target)
    if streaming:
        return reply + tag
    key, pos = read_varint(reply)
    if key != _MESSAGES_TAG:
        raise WireError(f"unexpected message format: {key}")
    # Like Talos, everything after the first header is taken as the one element, whatever the
    # declared length says: a backend must send exactly one element and nothing else.
    _, pos = read_varint(reply, pos)
    element = reply[pos:]
    return encode_varint(_MESSAGES_TAG) + encode_varint(len(element) + len(tag)) + element + tag


def go_error_string(code: int, message: str) -> str:
    """What Go's ``status.Error(code, message).Error()`` prints."""
    return f"rpc error: code = {_GO_CODE_NAMES.get(code, f'Code({code})')} desc = {message}"


def status_proto(status: Status, message: str, details: bytes | None = None) -> Any:
    """``google.rpc.Status`` for an error; ``details`` is a raw ``grpc-status-details-bin`` payload."""
    proto = status_pb2.Status(code=status.value, message=message)
    if details:
        try:
            sent = status_pb2.Status.FromString(details)
        except DecodeError:
            sent = None
        if sent is not None:
            proto.details.extend(sent.details)
    return proto


def error_reply(
    target: str, status: Status, message: str, details: bytes | None = None, *, streaming: bool
) -> bytes:
    """The in-band stand-in for a node that failed: a message carrying only ``metadata``."""
    metadata = common_pb2.Metadata(
        hostname=target,
        error=go_error_string(status.value, message),
        status=status_proto(status, message, details),
    )
    element = common_pb2.Empty(metadata=metadata)
    if streaming:
        return bytes(element.SerializeToString())
    return bytes(common_pb2.EmptyResponse(messages=[element]).SerializeToString())
