"""META keys: the tags Talos 1.7 defines (``internal/pkg/meta/constants.go``) and their resource ids."""

from __future__ import annotations

import enum

__all__ = ["MetaKey", "key_id", "parse_key"]


class MetaKey(enum.IntEnum):
    """The META tags Talos 1.7 gives a meaning to, with Talos's names.

    Tags 0-5 are reserved by the ADV format (0 ends the list); any other uint8 is a valid key
    for ``talosctl meta write`` but carries no meaning for the node.
    """

    Upgrade = 6
    """The label of the slot to fall back to after an upgrade (Talos: "previous label")."""
    StagedUpgradeImageRef = 7
    """The installer image of an upgrade staged with ``--stage``."""
    StagedUpgradeInstallOptions = 8
    """The JSON install options of an upgrade staged with ``--stage``."""
    StateEncryptionConfig = 9
    """The JSON STATE encryption config (deleted when STATE is wiped without META)."""
    MetalNetworkPlatformConfig = 0x0A
    """The metal platform's network config (written by the dashboard)."""
    DownloadURLCode = 0x0B
    """The value of ``${code}`` in a ``talos.config=`` URL."""
    UserReserved1 = 0x0C
    UserReserved2 = 0x0D
    UserReserved3 = 0x0E
    UUIDOverride = 0x0F
    """The machine UUID to use instead of the hardware's."""
    UniqueMachineToken = 0x10
    """A token unique to this machine (UUIDs may repeat or be all zeros)."""


def key_id(tag: int) -> str:
    """The id of a tag's ``MetaKeys.runtime.talos.dev`` resource: ``0x06``, ``0x10``."""
    return f"0x{tag:02x}"


def parse_key(text: str) -> int:
    """A key as ``talosctl meta write`` takes it (decimal, ``0x`` hex, ``0o``/``0b``), range-checked.

    Raises :class:`ValueError` with Talos's server text ``key must be a uint8`` when it is out of range.
    """
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"invalid key {text!r}") from None
    if not 0 <= value <= 0xFF:
        raise ValueError("key must be a uint8")
    return value
