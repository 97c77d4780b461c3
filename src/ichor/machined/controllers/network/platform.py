"""``network.PlatformConfigController``: what the platform says about the machine.

Talos's platform layer; here it writes PlatformMetadata ``platformmetadata``: the platform's name
(``container`` or ``process``, as ``talosctl version`` reports it) and the node's hostname, as
Talos's container platform fills it from the container's hostname. Container and process nodes
have no region, zone, instance type or id, so those stay empty (``talosctl get platformmetadata``,
the dashboard and ``talosctl meta`` read it).

It also writes the platform's network probes as ProbeSpecs (layer ``platform``, id
``tcp:<endpoint>``), as Talos's does from a platform's network config. Only some cloud platforms
of Talos have probes; Ichor's platforms (container, process, metal) have no network config of
their own, so ``probes`` is empty on a node and ``talosctl get probespecs`` lists none, as on
Talos in Docker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ichor.machined.cosi import Controller, ControllerContext, Input, Output
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    PLATFORM_METADATA_ID,
    PLATFORM_METADATAS,
    ConfigLayer,
    PlatformMetadataSpec,
)
from ichor.machined.resources._network_probes import PROBE_SPECS, ProbeSpecSpec

__all__ = ["PlatformConfigController", "platform_config_controller"]


class PlatformConfigController(Controller):
    name = "network.PlatformConfigController"
    inputs = (Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),)
    outputs = (Output(PLATFORM_METADATAS), Output(PROBE_SPECS))

    def __init__(self, layout: Layout, probes: Sequence[ProbeSpecSpec] = ()) -> None:
        self._layout = layout
        self._probes = {p.id: dataclasses.replace(p, layer=ConfigLayer.PLATFORM) for p in probes}

    async def run(self, ctx: ControllerContext) -> None:
        while True:
            await ctx.changed()
            for probe_id, probe in self._probes.items():
                ctx.modify(PROBE_SPECS, probe_id, probe)
            ctx.clean_up_outputs(PROBE_SPECS, set(self._probes))
            hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
            if hostname is None:
                ctx.waiting("hostname", "the node has no hostname yet")
                continue
            ctx.clear_waiting()
            spec = PlatformMetadataSpec(platform=self._layout.platform.value, hostname=hostname.spec.fqdn)
            ctx.modify(PLATFORM_METADATAS, PLATFORM_METADATA_ID, spec)


def platform_config_controller(
    layout: Layout, probes: Sequence[ProbeSpecSpec] = ()
) -> PlatformConfigController:
    """The controller for ``layout``'s platform; ``probes``: the platform's network probes (none on
    Ichor's platforms)."""
    return PlatformConfigController(layout, probes)
