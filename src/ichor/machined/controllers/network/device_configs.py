"""``network.DeviceConfigController``: MachineConfig + LinkStatuses -> DeviceConfigSpecs, one per
link each ``machine.network.interfaces[]`` entry configures, as Talos 1.7 lists them.

An entry with ``interface`` is one spec; one with a ``deviceSelector`` is a copy per matching link
(named as its ``interface``); a bond's ``deviceSelectors`` become its member ``interfaces`` (never
the bond itself). An entry whose selector matches nothing is left out and logged, as Talos does.
It only describes: the links are configured by the link/address/route config controllers.
"""

from __future__ import annotations

import copy
from typing import Any

from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.controllers.network._select import select_by_selector, select_links
from ichor.machined.cosi import ControllerContext, Input, TransformController
from ichor.machined.resources import LINK_STATUSES
from ichor.machined.resources._device_configs import DEVICE_CONFIG_SPECS, DeviceConfigSpecSpec

__all__ = ["device_config_controller"]


def device_config_controller() -> TransformController[DeviceConfigSpecSpec]:
    def derive(ctx: ControllerContext) -> dict[str, DeviceConfigSpecSpec]:
        config = active_config(ctx)
        network = config.machine.network if config.machine is not None else None
        links = {r.id: r.spec for r in ctx.list(LINK_STATUSES)}
        out: dict[str, DeviceConfigSpecSpec] = {}
        for index, device in enumerate((network.interfaces if network is not None else None) or []):
            plain: dict[str, Any] = device.model_dump(mode="json", by_alias=True, exclude_none=True)
            copies: list[dict[str, Any]] = [plain]
            if device.device_selector is not None and not device.interface:
                matched = select_links(device, links)
                if not matched:
                    ctx.logger.info("no matching network device for defined selector", index=index)
                    continue
                copies = [{**copy.deepcopy(plain), "interface": name} for name in matched]
            elif device.bond is not None and device.bond.device_selectors:
                members = [
                    name for selector in device.bond.device_selectors
                    for name in select_by_selector(selector, links) if name != device.interface
                ]  # fmt: skip
                if not members:
                    ctx.logger.info("no matching network device for defined bond selectors", index=index)
                    continue
                bond = {k: v for k, v in plain["bond"].items() if k != "deviceSelectors"}
                copies = [{**plain, "bond": {**bond, "interfaces": members}}]
            for j, entry in enumerate(copies):
                device_id = f"{entry.get('interface', '')}/{index:03d}"
                if len(copies) > 1:
                    device_id += f"/{j:03d}"
                out[device_id] = DeviceConfigSpecSpec(device=entry)
        return out

    return TransformController(
        "network.DeviceConfigController", inputs=[ACTIVE_CONFIG, Input(LINK_STATUSES)],
        output=DEVICE_CONFIG_SPECS, map_inputs=derive,
    )  # fmt: skip
