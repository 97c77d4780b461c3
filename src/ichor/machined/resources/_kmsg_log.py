"""Kernel log delivery (``KmsgLogConfig`` documents, kernel argument ``talos.logging.kernel``):
Talos's ``KmsgLogConfigs`` (namespace ``runtime``, one resource, id ``kmsg-log``, no aliases or
columns). Destinations are URLs, which Talos's YAML shows as Go ``*url.URL`` structs.
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import ResourceType

__all__ = ["KMSG_LOG_CONFIGS", "KMSG_LOG_CONFIG_ID", "KmsgLogConfigSpec"]

KMSG_LOG_CONFIG_ID = "kmsg-log"


@dataclasses.dataclass(frozen=True)
class KmsgLogConfigSpec:
    """Where the kernel log goes: ``tcp://host:port`` and ``udp://host:port`` URLs, JSON lines."""

    destinations: tuple[str, ...] = dataclasses.field(default=(), metadata={"url": True})


KMSG_LOG_CONFIGS: ResourceType[KmsgLogConfigSpec] = ResourceType(
    type="KmsgLogConfigs.runtime.talos.dev",
    default_namespace="runtime",
    spec_class=KmsgLogConfigSpec,
)
"""``runtime.KmsgLogConfigController``: the kernel argument (metal), then every document's URL ->
KmsgLogConfig ``kmsg-log``; ``runtime.KmsgLogDeliveryController`` sends the kernel log there."""
