"""The legacy syslinux ADV at the end of the META partition (2 x 512 bytes), as Talos 1.7 keeps it.

Talos reads tags from it when its own ADV lacks them and deletes there as a fallback; it writes the
1024 bytes back unchanged otherwise. Layout of one 512-byte copy, little-endian::

    0     magic1 0x5a2d2fa5
    4     checksum: 0xa3041767 minus the sum of the u32 words at 8..507
    8     tag (u8), len (u8), value ... a zero tag ends the list
    508   magic3 0xdd28bf64

The second copy repeats the first. Edits give the bytes of Talos's syslinux package (its tests'
vectors), except that a delete shifts everything after the tag: Talos stops at byte 100 and
garbles tags stored past it.
"""

from __future__ import annotations

import struct

__all__ = ["ADV_SIZE", "SyslinuxADV"]

ADV_SIZE = 512
_MAGIC1 = 0x5A2D2FA5
_MAGIC2 = 0xA3041767
_MAGIC3 = 0xDD28BF64
_LIMIT = ADV_SIZE - 4 - 2  # the last offset where a tag header may start, exclusive


class SyslinuxADV:
    """A mutable view of the 1024 legacy bytes."""

    def __init__(self, data: bytes | None = None) -> None:
        if data is None:
            data = bytes(2 * ADV_SIZE)
        if len(data) != 2 * ADV_SIZE:
            raise ValueError(f"a syslinux ADV is {2 * ADV_SIZE} bytes, not {len(data)}")
        self._a = bytearray(data)

    def to_bytes(self) -> bytes:
        return bytes(self._a)

    def _walk(self) -> list[tuple[int, int, int]]:
        """(offset, tag, size) of every tag in the first copy."""
        out = []
        i = 8
        while i < _LIMIT:
            tag, size = self._a[i], self._a[i + 1]
            if tag == 0:
                break
            out.append((i, tag, size))
            i += 2 + size
        return out

    def tags(self) -> list[int]:
        """Tags in the order stored (a tag may repeat)."""
        return [tag for _, tag, _ in self._walk()]

    def get(self, tag: int) -> bytes | None:
        for i, t, size in self._walk():
            if t == tag:
                return bytes(self._a[i + 2 : i + 2 + size])
        return None

    def set(self, tag: int, value: bytes) -> bool:
        """Replace a tag (value up to 255 bytes); False when it does not fit."""
        if len(value) > 255:
            return False
        self.delete(tag)
        i = 8
        while i < _LIMIT:
            if self._a[i] != 0:
                i += 2 + self._a[i + 1]
                continue
            if i + 2 + len(value) > _LIMIT:
                return False
            self._a[i] = tag
            self._a[i + 1] = len(value)
            self._a[i + 2 : i + 2 + len(value)] = value
            self._cleanup()
            return True
        return False

    def delete(self, tag: int) -> bool:
        """Remove the first occurrence of a tag, shifting what follows it left."""
        for i, t, size in self._walk():
            if t != tag:
                continue
            start = i + 2 + size
            # Talos shifts only the bytes up to index 100 (it reads the bound from the first byte
            # of magic3), which garbles tags stored past it; shift everything up to the tail.
            self._a[i:_LIMIT] = (self._a[start:_LIMIT] + bytes(_LIMIT - i))[: _LIMIT - i]
            self._cleanup()
            return True
        return False

    def _cleanup(self) -> None:
        struct.pack_into("<I", self._a, 0, _MAGIC1)
        checksum = _MAGIC2
        for k in range(8, ADV_SIZE - 4, 4):
            checksum = (checksum - struct.unpack_from("<I", self._a, k)[0]) & 0xFFFFFFFF
        struct.pack_into("<I", self._a, 4, checksum)
        struct.pack_into("<I", self._a, ADV_SIZE - 4, _MAGIC3)
        self._a[ADV_SIZE:] = self._a[:ADV_SIZE]
