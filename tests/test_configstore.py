"""What a node accepts as a bootable config: valid, and complete enough to serve its API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.machined.configstore import ConfigStore
from ichor.machined.configstore import load as _load
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import MACHINE_CONFIGS
from ichor.machined.server._maintenance import MaintenanceService
from ichor.machinery.errors import MachineryError
from ichor.machinery.generate import GenOptions, OutputType, generate
from ichor.machinery.secrets import SecretsBundle


@pytest.fixture(scope="module")
def controlplane() -> str:
    bundle = SecretsBundle.generate()
    opts = GenOptions(cluster_name="c", endpoint="https://127.0.0.1:6443")
    return generate(bundle, opts, output_types=[OutputType.CONTROLPLANE], with_docs=False).outputs[
        OutputType.CONTROLPLANE
    ]


def test_generated_config_is_bootable(controlplane: str) -> None:
    assert _load(controlplane, "test").v1alpha1["machine"]["type"] == "controlplane"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    ca:\n        crt: LS0t", "    ca:\n        crt: AAAA", "incomplete config: machine.ca"),
        ("    token: ", "    token: ''\n    oldtoken: ", "unknown keys"),
    ],
)
def test_damaged_configs_are_refused(controlplane: str, old: str, new: str, message: str) -> None:
    with pytest.raises(MachineryError, match=message):
        _load(controlplane.replace(old, new, 1), "test")


# --- bytes that are not UTF-8 --------------------------------------------------------------------


def _not_utf8(controlplane: str) -> tuple[bytes, int]:
    data = controlplane.encode().replace(
        b"    network: {}", b"    network:\n        hostname: node-\xff\xfe", 1
    )
    assert b"\xff\xfe" in data
    return data, data.index(b"\xff")


@contextlib.contextmanager
def _store(tmp_path: Path) -> Iterator[tuple[ConfigStore, State, list[str]]]:
    layout = Layout(root=tmp_path / "node", address="127.5.0.3")
    layout.ensure()
    said: list[str] = []
    state = State()
    yield (
        ConfigStore(layout, state, EventBus(), say=said.append, clock=lambda: datetime.now(UTC)),
        state,
        said,
    )


def test_a_config_that_is_not_utf8_is_refused_naming_the_byte(controlplane: str, tmp_path: Path) -> None:
    data, offset = _not_utf8(controlplane)

    async def go() -> None:
        with _store(tmp_path) as (store, state, _):
            applied = store.await_maintenance_config()
            request = machine_pb2.ApplyConfigurationRequest(data=data)
            with pytest.raises(GRPCError) as caught:
                await store.apply(request)
            assert caught.value.status == Status.INVALID_ARGUMENT
            assert f"not UTF-8 text: invalid start byte at byte {offset} (0xff)" in str(caught.value.message)
            # Nothing changed: no config taken, no resource, no file.
            assert not applied.done()
            assert not state.list(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS)
            assert not store.layout.config_file.exists()
            # The same config as UTF-8 is taken.
            fixed = data.replace(b"\xff\xfe", "\u00ff\u00fe".encode())
            await store.apply(machine_pb2.ApplyConfigurationRequest(data=fixed))
            assert (await applied).config.machine.network.hostname == "node-\u00ff\u00fe"  # type: ignore[union-attr]

    asyncio.run(go())


def test_a_stored_config_that_is_not_utf8_is_reported_not_rewritten(
    controlplane: str, tmp_path: Path
) -> None:
    data, offset = _not_utf8(controlplane)

    async def go() -> None:
        with _store(tmp_path) as (store, _, said):
            store.layout.config_file.write_bytes(data)
            assert await store.acquire() is None
            assert any(f"invalid start byte at byte {offset}" in line for line in said), said
            assert store.layout.config_file.read_bytes() == data

    asyncio.run(go())


def test_the_maintenance_api_refuses_a_config_that_is_not_utf8(controlplane: str, tmp_path: Path) -> None:
    data, offset = _not_utf8(controlplane)

    async def go() -> None:
        with _store(tmp_path) as (store, _, _):
            store.await_maintenance_config()
            server = Server([MaintenanceService(store)])
            socket = str(tmp_path / "maintenance.sock")
            await server.start(path=socket)
            channel = Channel(path=socket)
            try:
                stub = machine_grpc.MachineServiceStub(channel)
                with pytest.raises(GRPCError) as caught:
                    await stub.ApplyConfiguration(machine_pb2.ApplyConfigurationRequest(data=data))
                assert caught.value.status == Status.INVALID_ARGUMENT
                assert f"at byte {offset} (0xff)" in str(caught.value.message)
            finally:
                channel.close()
                server.close()
                await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 30))
