"""The event sink (the ``EventSinkConfig`` document, kernel argument ``talos.events.sink``): Talos's
``EventSinkConfigs`` (namespace ``runtime``, one resource, id ``event-sink``, no aliases or columns).
"""

from __future__ import annotations

import dataclasses

from ichor.machined.cosi import ResourceType

__all__ = ["EVENT_SINK_CONFIGS", "EVENT_SINK_CONFIG_ID", "EventSinkConfigSpec"]

EVENT_SINK_CONFIG_ID = "event-sink"


@dataclasses.dataclass(frozen=True)
class EventSinkConfigSpec:
    """Where machined streams its events: a ``host:port`` of a gRPC ``EventSinkService``."""

    endpoint: str = ""


EVENT_SINK_CONFIGS: ResourceType[EventSinkConfigSpec] = ResourceType(
    type="EventSinkConfigs.runtime.talos.dev",
    default_namespace="runtime",
    spec_class=EventSinkConfigSpec,
)
"""``runtime.EventsSinkConfigController``: the document (else, on metal, the kernel argument) ->
EventSinkConfig ``event-sink``; ``v1alpha1.EventsSinkController`` sends every event to it."""
