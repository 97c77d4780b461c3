"""Resources of namespace ``files``: the ``/etc`` files machined writes, as Talos 1.7 declares them.

``EtcFileSpecs`` (``hosts``, ``resolv.conf``) say what a file under ``/etc`` should contain;
``EtcFileStatuses`` say which spec version is on disk (``talosctl get etcfilestatus``).
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import ResourceType

__all__ = ["ETC_FILE_SPECS", "ETC_FILE_STATUSES", "FILES_NAMESPACE", "EtcFileSpecSpec", "EtcFileStatusSpec"]

FILES_NAMESPACE = "files"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EtcFileSpecSpec:
    contents: str = dataclasses.field(metadata={"binary": True})
    """The file's text (Go ``[]byte`` in Talos: a sequence of numbers in YAML, bytes in protobuf)."""
    mode: int = 0o644


@dataclasses.dataclass(frozen=True, kw_only=True)
class EtcFileStatusSpec:
    spec_version: str
    """The version of the EtcFileSpec whose contents are on disk."""


ETC_FILE_SPECS: ResourceType[EtcFileSpecSpec] = ResourceType(
    type="EtcFileSpecs.files.talos.dev", default_namespace=FILES_NAMESPACE, spec_class=EtcFileSpecSpec
)
ETC_FILE_STATUSES: ResourceType[EtcFileStatusSpec] = ResourceType(
    type="EtcFileStatuses.files.talos.dev", default_namespace=FILES_NAMESPACE, spec_class=EtcFileStatusSpec
)
