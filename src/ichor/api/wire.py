"""Protobuf wire-format primitives shared by code that works below generated messages."""

from __future__ import annotations

__all__ = ["encode_varint"]


def encode_varint(value: int) -> bytes:
    """Base-128 varint of a non-negative integer (callers map signed values first)."""
    if value < 0:
        raise ValueError("varints here are unsigned")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
