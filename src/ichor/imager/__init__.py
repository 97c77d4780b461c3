"""The OS image builder: ``python -m ichor.imager <profile>`` (Talos's imager profiles and names).

Builds the kernel (``vmlinuz-amd64``) and the initramfs (``initramfs-amd64.xz``) a machine boots
with ``talos.platform=metal``. Every input is pinned: Debian packages by exact version, checked
against the apt index's sha256 (``pins/debs.lock``), PyPI wheels by sha256 (``pins/wheels.lock``),
and the Ichor source tree itself. The root filesystem is three read-only squashfs layers (base:
Python, its libraries, kmod and the kernel modules; pydeps: the wheels; ichor: Ichor's source and
``/sbin/init``), each cached under ``${XDG_CACHE_HOME:-~/.cache}/ichor/image/`` by a key over its
inputs, so a change to Ichor's source rebuilds only the top layer. The same inputs give
byte-identical outputs.

The initramfs carries the layers, the three modules that mount them and a busybox ``/init``
(:mod:`._stage1`); machined is PID 1 after ``switch_root``.

This package never writes into the output directory until an artefact is complete: each output
is written beside it under a temporary name and renamed into place.

Exceptions::

    ImagerError                 anything the imager refuses (str() is the message, .hint the fix)
    ├── InputError              a pinned input that is missing, of the wrong version or hash, or unpinned
    └── OutputError             an output directory that cannot be written
"""

from __future__ import annotations

from ichor.machinery.errors import MachineryError

__all__ = ["ImagerError", "InputError", "OutputError"]


class ImagerError(MachineryError):
    """The imager cannot build what was asked."""


class InputError(ImagerError):
    """A pinned input is missing, of the wrong version or hash, or not pinned at all."""


class OutputError(ImagerError):
    """The output directory cannot be written."""
