"""META key=value pairs as Talos passes them to the installer and imager (``--meta``, ``INSTALLER_META_BASE64``).

A value is ``<key>=<text>`` with the key in any Go integer syntax (``10``, ``0xa``) and printed as
``0xa=<text>``. A list travels in one environment variable: the pairs joined with ``;``, gzipped
(best compression) when over 256 bytes and ``allow_gzip``, then base64.
"""

from __future__ import annotations

import base64
import binascii
import gzip
from collections.abc import Sequence
from dataclasses import dataclass

from ichor.machinery.errors import MetaError

__all__ = ["VALUES_ENV", "MetaValue", "decode_values", "encode_values"]

VALUES_ENV = "INSTALLER_META_BASE64"
"""The environment variable (and ``talos.environment`` key) carrying META values to the installer."""


@dataclass(frozen=True)
class MetaValue:
    key: int
    value: str

    def __str__(self) -> str:
        return f"0x{self.key:x}={self.value}"

    @classmethod
    def parse(cls, text: str) -> MetaValue:
        """``10=foo`` / ``0xa=foo``; MetaError with Talos's ``invalid value``/``invalid key`` texts."""
        key, sep, value = text.partition("=")
        if not sep:
            raise MetaError(f'invalid value "{text}"')
        try:
            number = int(key, 0) if key.strip() == key else -1
        except ValueError:
            number = -1
        if not 0 <= number <= 0xFF:
            raise MetaError(f'invalid key "{key}"')
        return cls(number, value)


def encode_values(values: Sequence[MetaValue], *, allow_gzip: bool = True) -> str:
    """The ``INSTALLER_META_BASE64`` form of ``values``."""
    raw = ";".join(str(v) for v in values).encode()
    if allow_gzip and len(raw) > 256:
        raw = gzip.compress(raw, compresslevel=9, mtime=0)
    return base64.b64encode(raw).decode()


def decode_values(text: str) -> list[MetaValue]:
    """Read the ``INSTALLER_META_BASE64`` form (gzipped or not)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise MetaError(f"META values are not base64: {e}") from e
    if not raw:
        return []
    if len(raw) >= 10 and raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise MetaError(f"META values: bad gzip: {e}") from e
    return [MetaValue.parse(part) for part in raw.decode(errors="replace").split(";")]
