"""Just enough protobuf encoding for Talos's typed ``proto_spec`` of simple resource specs.

Talos marshals specs with ``protoenc`` from the Go struct's ``protobuf:"N"`` tags; zero values are
left out, as in proto3. Only scalars, bytes/strings and nested messages are needed here. This
module encodes; it never decodes and knows nothing about particular resources.
"""

from __future__ import annotations

from collections.abc import Iterable

from ichor.api.wire import encode_varint

__all__ = ["bool_field", "bytes_field", "message_field", "repeated", "string_field", "varint_field"]

_WIRE_VARINT = 0
_WIRE_LEN = 2


def _varint(value: int) -> bytes:
    # int64 two's complement for negative numbers, as Go encodes them
    return encode_varint(value & ((1 << 64) - 1) if value < 0 else value)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def varint_field(number: int, value: int) -> bytes:
    return _key(number, _WIRE_VARINT) + _varint(value) if value else b""


def bool_field(number: int, value: bool) -> bytes:
    return varint_field(number, 1 if value else 0)


def bytes_field(number: int, value: bytes) -> bytes:
    return _key(number, _WIRE_LEN) + _varint(len(value)) + value if value else b""


def string_field(number: int, value: str) -> bytes:
    return bytes_field(number, value.encode())


def message_field(number: int, encoded: bytes) -> bytes:
    """A nested message; present even when all its fields are zero (Go encodes non-nil structs)."""
    return _key(number, _WIRE_LEN) + _varint(len(encoded)) + encoded


def repeated(number: int, encoded_items: Iterable[bytes]) -> bytes:
    """A repeated message or string field, one length-delimited entry per item."""
    return b"".join(_key(number, _WIRE_LEN) + _varint(len(item)) + item for item in encoded_items)
