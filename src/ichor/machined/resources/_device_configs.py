"""``DeviceConfigSpecs`` (namespace ``network``, sensitive as in Talos): each
``machine.network.interfaces[]`` entry, one per link it configures, as Talos 1.7 lists them.

Ids are Talos's: ``<interface>/<index>`` (the entry's index, three digits), and
``<interface>/<index>/<match>`` when a ``deviceSelector`` matches several links. The spec is the
entry itself (``device:``); a selector's copy names the link it matched as its ``interface``, a
bond's ``deviceSelectors`` become its ``interfaces``. Talos's protobuf form of it is the entry's
YAML in field 1 (``yaml_marshalled``), which :meth:`DeviceConfigSpecSpec.proto_spec` writes.
Types only; ``controllers.network.device_configs`` fills it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from google.protobuf import wrappers_pb2  # type: ignore[import-untyped]

from ichor.machined.cosi import ResourceType
from ichor.machinery.yamlio import dump_document, from_plain

__all__ = ["DEVICE_CONFIG_SPECS", "DeviceConfigSpecSpec"]


@dataclasses.dataclass(frozen=True)
class DeviceConfigSpecSpec:
    device: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The ``machine.network.interfaces[]`` entry under Talos's YAML keys."""

    def proto_spec(self) -> bytes:
        # Talos's DeviceConfigSpecSpec is `bytes yaml_marshalled = 1`, the wire form of BytesValue.
        yaml = dump_document(from_plain(dict(self.device))).encode()
        return bytes(wrappers_pb2.BytesValue(value=yaml).SerializeToString())


DEVICE_CONFIG_SPECS: ResourceType[DeviceConfigSpecSpec] = ResourceType(
    type="DeviceConfigSpecs.net.talos.dev", default_namespace="network", spec_class=DeviceConfigSpecSpec,
    sensitive=True,
)  # fmt: skip
