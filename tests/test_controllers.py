from __future__ import annotations

import asyncio
from pathlib import Path

from ichor.machined import controllers
from ichor.machined.cosi import Registry, Runtime, State, assert_resource
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUSES,
    MACHINE_CONFIGS,
    MACHINE_TYPES,
    MachineConfigSpec,
    register_node_types,
)

CONFIG = "version: v1alpha1\nmachine:\n  type: {type}\n  network: {network}\ncluster: {{}}\n"


def test_machine_type_and_hostname_follow_the_config(tmp_path: Path) -> None:
    async def go() -> None:
        state = State()
        registry = Registry()
        register_node_types(registry)
        runtime = Runtime(state, registry=registry)
        runtime.register(controllers.machine_type_controller())
        runtime.register(controllers.hostname_controller(Layout(root=tmp_path, address="127.5.0.9")))
        task = asyncio.create_task(runtime.run())
        try:
            state.create(
                MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(CONFIG.format(type="init", network="{}")))
            )
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "controlplane")
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname", lambda r: r.spec.hostname == "talos-127-5-0-9"
            )
            current = state.get(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS, "v1alpha1")
            text = CONFIG.format(type="worker", network="{hostname: node-7.lab.example}")
            state.update(current.with_spec(MachineConfigSpec(text)))
            await assert_resource(state, MACHINE_TYPES, "machine-type", lambda r: r.spec == "worker")
            await assert_resource(
                state, HOSTNAME_STATUSES, "hostname",
                lambda r: (r.spec.hostname, r.spec.domainname) == ("node-7", "lab.example"),
            )  # fmt: skip
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(go(), 10))
