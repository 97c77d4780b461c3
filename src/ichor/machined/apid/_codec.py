"""Codecs that hand protobuf messages and status details through as raw bytes.

apid never decodes what it forwards: request and reply messages stay the exact bytes the peer
sent, and so do the ``grpc-status-details-bin`` payloads of errors.
"""

from __future__ import annotations

from typing import Any

from grpclib.const import Status
from grpclib.encoding.base import CodecBase, StatusDetailsCodecBase

from ichor.api.limits import MAX_MESSAGE_SIZE, too_large


class RawCodec(CodecBase):
    """Messages are ``bytes`` on both sides; only their size is checked.

    The check here sees a message already read: it guards replies from backends. A caller's
    requests are refused before their body is read (:func:`ichor.api.limits.receive`).
    """

    # Same content subtype as protobuf: peers must see an ordinary ``application/grpc`` call.
    __content_subtype__ = "proto"

    def __init__(self, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        self.max_message_size = max_message_size

    def _checked(self, data: bytes) -> bytes:
        if len(data) > self.max_message_size:
            raise too_large(len(data), self.max_message_size)
        return data

    def encode(self, message: Any, message_type: Any) -> bytes:
        if not isinstance(message, bytes | bytearray | memoryview):
            raise TypeError(f"apid forwards raw bytes, not {type(message).__name__}")
        return self._checked(bytes(message))

    def decode(self, data: bytes, message_type: Any) -> bytes:
        return self._checked(bytes(data))


class RawStatusDetailsCodec(StatusDetailsCodecBase):
    """``grpc-status-details-bin`` (a serialized ``google.rpc.Status``) kept as bytes."""

    def encode(self, status: Status, message: str | None, details: Any) -> bytes:
        return bytes(details) if isinstance(details, bytes | bytearray) else b""

    def decode(self, status: Status, message: str | None, data: bytes) -> bytes:
        return bytes(data)
