"""What every controller test needs: a real runtime over an in-memory State, a config to seed.

The standard controller test (STYLE.md): seed inputs into the state, then poll until an output
matches with ``assert_resource``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from ichor.machined.cosi import Controller, Registry, Runtime, State
from ichor.machined.resources import MACHINE_CONFIGS, MachineConfigSpec, register_node_types
from ichor.machinery import pki

ADDRESS = "127.5.0.9"


def config(
    *, type: str = "controlplane", ca: pki.CertKey | None = None, etcd: str = "{}", extra_machine: str = ""
) -> str:
    """A small v1alpha1 config: hostname cp-1.lab, token abc.def, the given CA and etcd section."""
    b64 = base64.b64encode
    ca_yaml = (
        f"{{crt: {b64(ca.crt).decode()}, key: {b64(ca.key).decode() if ca.has_key else ''}}}" if ca else "{}"
    )
    return (
        f"version: v1alpha1\nmachine:\n  type: {type}\n  token: abc.def\n  ca: {ca_yaml}\n{extra_machine}"
        f"  network: {{hostname: cp-1.lab}}\ncluster:\n  controlPlane: {{endpoint: 'https://10.0.0.1:6443'}}\n"
        f"  etcd: {etcd}\n"
    )


@asynccontextmanager
async def running(*controllers: Controller) -> AsyncIterator[State]:
    """A runtime with every node resource type registered, running ``controllers`` until the block ends."""
    state = State()
    registry = Registry()
    register_node_types(registry)
    rt = Runtime(state, registry=registry)
    for controller in controllers:
        rt.register(controller)
    task = asyncio.create_task(rt.run())
    try:
        yield state
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def apply(state: State, text: str) -> None:
    """What the config store does on apply: create or replace the ``v1alpha1`` MachineConfig."""
    existing = state.list("config", MACHINE_CONFIGS)
    if existing:
        state.update(existing[0].with_spec(MachineConfigSpec(text)))
    else:
        state.create(MACHINE_CONFIGS.new("v1alpha1", MachineConfigSpec(text)))


def run(main: Callable[[], Awaitable[None]], timeout: float = 20) -> None:
    asyncio.run(asyncio.wait_for(main(), timeout))
