"""META: Talos 1.7's key/value partition, byte-compatible, on a block device or an image file.

The node keeps facts here that must survive a reboot before STATE is mounted: the slot to fall back
to after an upgrade (:attr:`MetaKey.Upgrade`), a staged upgrade, the STATE encryption config, the
metal network config, UUID overrides. ``talosctl meta write/delete`` and ``get metakeys`` read and
write it; ``imager --meta`` and the installer write keys at build and install time.

- :class:`Meta` reads/writes a partition (both ADV copies + fsync; Talos's overlay rule on reload).
- :class:`TalosADV` is the 256 KiB x 2 codec, :class:`SyslinuxADV` the legacy 2 x 512 B one.
- :class:`MetaValue`, :func:`encode_values`/:func:`decode_values`: ``--meta k=v`` and
  ``INSTALLER_META_BASE64`` as Talos spells them.
- :class:`MetaKey` names Talos's tags; :func:`key_id` gives the resource id (``0x06``).

Errors are :class:`~ichor.machinery.errors.MetaError` (``meta write failed`` when full). This package
never decides what a key means for the node; that is machined's business.
"""

from ichor.machinery.errors import MetaError
from ichor.machinery.meta._keys import MetaKey, key_id, parse_key
from ichor.machinery.meta._meta import Meta
from ichor.machinery.meta._syslinux_adv import SyslinuxADV
from ichor.machinery.meta._talos_adv import DATA_LENGTH, LENGTH, SIZE, TalosADV
from ichor.machinery.meta._values import VALUES_ENV, MetaValue, decode_values, encode_values

__all__ = [
    "DATA_LENGTH",
    "LENGTH",
    "SIZE",
    "VALUES_ENV",
    "Meta",
    "MetaError",
    "MetaKey",
    "MetaValue",
    "SyslinuxADV",
    "TalosADV",
    "decode_values",
    "encode_values",
    "key_id",
    "parse_key",
]
