"""``network.PlatformConfigController``: what the platform says about the machine.

Talos's platform layer; here it writes PlatformMetadata ``platformmetadata``: the platform's name
(``container`` or ``process``, as ``talosctl version`` reports it) and the node's hostname, as
Talos's container platform fills it from the container's hostname. Container and process nodes
have no region, zone, instance type or id, so those stay empty (``talosctl get platformmetadata``,
the dashboard and ``talosctl meta`` read it).
"""

from __future__ import annotations

from ichor.machined.cosi import ControllerContext, Input, TransformController, WaitingFor
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    PLATFORM_METADATA_ID,
    PLATFORM_METADATAS,
    PlatformMetadataSpec,
)

__all__ = ["platform_config_controller"]


def platform_config_controller(layout: Layout) -> TransformController[PlatformMetadataSpec]:
    def derive(ctx: ControllerContext) -> dict[str, PlatformMetadataSpec]:
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        if hostname is None:
            raise WaitingFor("hostname", "the node has no hostname yet")
        spec = PlatformMetadataSpec(platform=layout.platform.value, hostname=hostname.spec.fqdn)
        return {PLATFORM_METADATA_ID: spec}

    return TransformController(
        "network.PlatformConfigController",
        inputs=[Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID)],
        output=PLATFORM_METADATAS,
        map_inputs=derive,
    )
