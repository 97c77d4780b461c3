"""controllers/config.py: MachineType and the acquire status follow the MachineConfig resource."""

from __future__ import annotations

import pytest
from controller_helpers import apply, config, run, running

from ichor.machined.controllers import config as config_area
from ichor.machined.cosi import assert_no_resource, assert_resource
from ichor.machined.resources import ACQUIRE_CONFIG_STATUSES, MACHINE_TYPES, MachineConfigSpec


def test_machine_type_follows_the_config() -> None:
    async def main() -> None:
        async with running(config_area.machine_type_controller()) as state:
            apply(state, config(type="init"))
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "init")
            apply(state, config(type="worker"))
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "worker")

    run(main)


def test_a_config_is_acquired_once_one_is_there() -> None:
    async def main() -> None:
        async with running(config_area.acquire_status_controller()) as state:
            await assert_no_resource(state, ACQUIRE_CONFIG_STATUSES, "machine-config", timeout=0.2)
            apply(state, config())
            await assert_resource(state, ACQUIRE_CONFIG_STATUSES, "machine-config")

    run(main)


@pytest.mark.parametrize("kind", ["controlplane", "init"])
def test_init_is_a_control_plane(kind: str) -> None:
    spec = MachineConfigSpec(config(type=kind)).v1alpha1
    assert spec is not None
    assert config_area.machine_type_of(spec) == kind and config_area.machine_type_of(spec).is_control_plane
