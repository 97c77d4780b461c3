"""The node's time servers, layered as Talos layers them.

* ``network.TimeServerConfigController``: ``default`` layer ``time.cloudflare.com`` (Talos's),
  ``configuration`` layer ``machine.time.servers`` -> layered TimeServerSpecs (the DHCP operator
  adds an ``operator`` layer from the NTP option);
* ``network.TimeServerMergeController`` -> TimeServerSpec ``timeservers``;
* ``network.TimeServerSpecController`` -> TimeServerStatus ``timeservers`` (``talosctl get
  timeservers``), which the time sync controller queries.
"""

from __future__ import annotations

from collections.abc import Iterator

from ichor.machined.controllers.config import ACTIVE_CONFIG
from ichor.machined.controllers.network._layers import config_controller, merge_controller
from ichor.machined.controllers.network.config import config_or_none
from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController
from ichor.machined.resources import (
    TIME_SERVER_ID,
    TIME_SERVER_SPECS,
    TIME_SERVER_STATUSES,
    ConfigLayer,
    TimeServerSpecSpec,
    TimeServerStatusSpec,
)

__all__ = ["DEFAULT_TIME_SERVERS", "time_server_controllers"]

DEFAULT_TIME_SERVERS = ("time.cloudflare.com",)


def _config_controller() -> TransformController[TimeServerSpecSpec]:
    def derive(ctx: ControllerContext) -> Iterator[tuple[str, TimeServerSpecSpec]]:
        yield TIME_SERVER_ID, TimeServerSpecSpec(time_servers=DEFAULT_TIME_SERVERS, layer=ConfigLayer.DEFAULT)
        config = config_or_none(ctx)
        time = config.machine.time if config is not None and config.machine is not None else None
        servers = tuple(s.strip() for s in (time.servers or []) if s.strip()) if time is not None else ()
        if servers:
            yield TIME_SERVER_ID, TimeServerSpecSpec(time_servers=servers, layer=ConfigLayer.CONFIGURATION)

    return config_controller("network.TimeServerConfigController", TIME_SERVER_SPECS, [ACTIVE_CONFIG], derive)


def _spec_controller() -> TransformController[TimeServerStatusSpec]:
    def derive(ctx: ControllerContext) -> dict[str, TimeServerStatusSpec]:
        spec = ctx.get_or_none(TIME_SERVER_SPECS, TIME_SERVER_ID)
        if spec is None:
            raise SkipReconcile
        return {TIME_SERVER_ID: TimeServerStatusSpec(time_servers=spec.spec.time_servers)}

    return TransformController(
        "network.TimeServerSpecController", inputs=[Input(TIME_SERVER_SPECS, id=TIME_SERVER_ID)],
        output=TIME_SERVER_STATUSES, map_inputs=derive,
    )  # fmt: skip


def time_server_controllers() -> list[
    TransformController[TimeServerSpecSpec] | TransformController[TimeServerStatusSpec]
]:
    """Config -> layered specs -> merged spec -> status, in registration order."""
    return [
        _config_controller(),
        merge_controller("network.TimeServerMergeController", TIME_SERVER_SPECS),
        _spec_controller(),
    ]
