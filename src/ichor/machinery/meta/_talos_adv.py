"""Talos's own ADV ("modern" META format), byte-compatible with Talos 1.7.

One copy is 256 KiB, all big-endian::

    0x0000   4 bytes        magic1 0x5a4b3c2d
    0x0004   4 + 4 + len    tag (u32), len (u32), value ... repeated; a zero tag ends the list
    -0x0024  32 bytes       sha256 of the whole copy with this field zeroed
    -0x0004  4 bytes        magic2 0xa5b4c3d2

The partition holds two identical copies back to back; a reader takes the first that checks out.
Talos writes tags in Go map order; this module writes them sorted by tag, which Talos reads alike.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from ichor.machinery.errors import MetaError

__all__ = ["DATA_LENGTH", "LENGTH", "MAGIC1", "MAGIC2", "SIZE", "TalosADV"]

LENGTH = 256 * 1024
"""Bytes in one copy."""
DATA_LENGTH = LENGTH - 40
"""Talos's capacity bound for :meth:`TalosADV.set` (its ``DataLength``)."""
SIZE = 2 * LENGTH
"""Bytes of both copies."""
MAGIC1 = 0x5A4B3C2D
MAGIC2 = 0xA5B4C3D2

_CHECKSUM = slice(LENGTH - 36, LENGTH - 4)


class TalosADV:
    """The tag -> value map of one Talos ADV; tags are uint8 as in Talos (the format has room for u32)."""

    def __init__(self, tags: Mapping[int, bytes] | None = None) -> None:
        self._tags: dict[int, bytes] = {}
        for tag, value in (tags or {}).items():
            if not self.set(tag, value):
                raise MetaError("meta write failed")

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def parse_copy(cls, block: bytes) -> TalosADV:
        """Decode one 256 KiB copy; raises :class:`MetaError` with Talos's ``adv: ...`` texts."""
        if len(block) != LENGTH:
            raise MetaError(f"adv: copy is {len(block)} bytes, expecting {LENGTH}")
        (magic1,) = struct.unpack_from(">I", block, 0)
        if magic1 != MAGIC1:
            raise MetaError(f"adv: unexpected magic {magic1:x}, expecting {MAGIC1:x}")
        (magic2,) = struct.unpack_from(">I", block, LENGTH - 4)
        if magic2 != MAGIC2:
            raise MetaError(f"adv: unexpected magic {magic2:x}, expecting {MAGIC2:x}")
        checksum = bytes(block[_CHECKSUM])
        zeroed = bytearray(block)
        zeroed[_CHECKSUM] = bytes(32)
        actual = hashlib.sha256(zeroed).digest()
        if checksum != actual:
            raise MetaError(f"adv: checksum mismatch: {checksum.hex()}, expecting {actual.hex()}")
        adv = cls()
        data = memoryview(block)[4 : LENGTH - 36]
        pos = 0
        while len(data) - pos >= 8:
            tag, size = struct.unpack_from(">II", data, pos)
            if tag == 0:
                break
            if len(data) - pos < size + 8:
                raise MetaError(f"adv: value goes beyond the end of the buffer: tag {tag}, size {size}")
            # Talos keeps tags as uint8: a wider tag is truncated, a repeated one overwrites.
            adv._tags[tag & 0xFF] = bytes(data[pos + 8 : pos + 8 + size])
            pos += 8 + size
        return adv

    @classmethod
    def load(cls, data: bytes) -> TalosADV:
        """Decode both copies (:data:`SIZE` bytes): the first copy if it checks out, else the second.

        Raises :class:`MetaError` (the second copy's problem) when neither does, as Talos does.
        """
        if len(data) < SIZE:
            raise MetaError(f"META holds {len(data)} bytes, the ADV needs {SIZE}")
        try:
            return cls.parse_copy(data[:LENGTH])
        except MetaError:
            return cls.parse_copy(data[LENGTH:SIZE])

    # -- writing ------------------------------------------------------------------------------

    def marshal(self) -> bytes:
        """One 256 KiB copy."""
        buf = bytearray(LENGTH)
        struct.pack_into(">I", buf, 0, MAGIC1)
        struct.pack_into(">I", buf, LENGTH - 4, MAGIC2)
        pos = 4
        end = LENGTH - 36
        for tag in sorted(self._tags):
            value = self._tags[tag]
            if pos + 8 + len(value) > end:
                raise MetaError(f"adv: overflow {pos + 8 + len(value) - end} bytes")
            struct.pack_into(">II", buf, pos, tag, len(value))
            buf[pos + 8 : pos + 8 + len(value)] = value
            pos += 8 + len(value)
        buf[_CHECKSUM] = hashlib.sha256(buf).digest()
        return bytes(buf)

    def to_bytes(self) -> bytes:
        """Both copies, as written to the start of the META partition."""
        one = self.marshal()
        return one + one

    # -- the map ------------------------------------------------------------------------------

    def get(self, tag: int) -> bytes | None:
        return self._tags.get(tag)

    def tags(self) -> list[int]:
        """The tags present, ascending."""
        return sorted(self._tags)

    def items(self) -> dict[int, bytes]:
        return dict(sorted(self._tags.items()))

    def used(self) -> int:
        """Talos's size estimate that :meth:`set` compares with :data:`DATA_LENGTH`."""
        return 20 + sum(len(v) + 8 for v in self._tags.values())

    def set(self, tag: int, value: bytes) -> bool:
        """Set a tag; False (nothing changed) when it would not fit, Talos's ``SetTagBytes``."""
        _check_tag(tag)
        # Talos's bound, exactly: a new tag's 8 header bytes are not counted until it exists.
        size = self.used() + len(value) - len(self._tags.get(tag, b""))
        if size > DATA_LENGTH:
            return False
        self._tags[tag] = bytes(value)
        return True

    def delete(self, tag: int) -> bool:
        """Remove a tag; False when it was not there."""
        return self._tags.pop(tag, None) is not None


def _check_tag(tag: int) -> None:
    if not 0 < tag <= 0xFF:
        raise MetaError(f"META key {tag} is not a tag: keys are 1-255", hint="key must be a uint8")
