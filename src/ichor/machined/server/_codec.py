"""How machined's gRPC servers decode requests: a body that is not the message an RPC takes is refused.

grpclib hands a request body to its protobuf codec inside the handler; a body that does not parse
(truncated, garbage, a string field that is not UTF-8) raised ``DecodeError`` there, which grpclib
answered as ``Unknown: Internal Server Error`` with a traceback in the node log. Every server
machined runs (the machine API on its unix socket, maintenance mode, trustd) uses
:func:`grpc_server`, whose codec makes that ``InvalidArgument`` with the parser's reason, for every
RPC at once. Replies are encoded exactly as grpclib's own codec encodes them.
"""

from __future__ import annotations

__all__ = ["RequestCodec", "grpc_server"]

from collections.abc import Collection
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from grpclib.encoding.proto import ProtoCodec
from grpclib.server import Server

from ichor.api.limits import undecodable


class RequestCodec(ProtoCodec):
    """grpclib's protobuf codec; a request that does not decode is ``InvalidArgument``."""

    def decode(self, data: bytes, message_type: Any) -> Any:
        try:
            return super().decode(data, message_type)
        except DecodeError as exc:
            raise undecodable(message_type, exc) from None


def grpc_server(handlers: Collection[Any]) -> Server:
    """A grpclib server for ``handlers`` that refuses undecodable requests (see the module docstring)."""
    return Server(list(handlers), codec=RequestCodec())
