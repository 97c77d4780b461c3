"""What a node accepts as a bootable config: valid, and complete enough to serve its API."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server
from network_helpers import ether

from ichor.api.gen.machine import machine_grpc, machine_pb2
from ichor.machined.configstore import ConfigStore
from ichor.machined.configstore import load as _load
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    ADDRESS_STATUSES,
    LINK_STATUSES,
    MACHINE_CONFIGS,
    AddressFamily,
    AddressStatusSpec,
)
from ichor.machined.server._maintenance import MaintenanceService
from ichor.machinery.errors import ConfigValidationError, MachineryError
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


def test_kubernetes_versions_talos_17_does_not_run_are_refused_naming_the_key(controlplane: str) -> None:
    """Talos's runtime validation: the kubelet's and the control plane's image tags name a version it runs."""
    kubelet = controlplane.replace(
        "image: ghcr.io/siderolabs/kubelet:v1.30.3", "image: ghcr.io/siderolabs/kubelet:v1.99.0"
    )
    assert kubelet != controlplane
    with pytest.raises(ConfigValidationError) as refused:
        _load(kubelet, "test")
    assert refused.value.problems == [
        "machine.kubelet.image: kubelet image is not valid: "
        "version of Kubernetes 1.99.0 is too new to be used with Talos 1.7.6"
    ]
    assert refused.value.hint is not None and "1.25.0 to 1.30.x" in refused.value.hint
    old = controlplane.replace("kube-apiserver:v1.30.3", "kube-apiserver:v1.24.9").replace(
        "kube-scheduler:v1.30.3", "kube-scheduler:latest"
    )
    with pytest.raises(ConfigValidationError) as refused:
        _load(old, "test")
    assert refused.value.problems == [
        "cluster.apiServer.image: kube-apiserver image is not valid: "
        "version of Kubernetes 1.24.9 is too old to be used with Talos 1.7.6",
        "cluster.scheduler.image: kube-scheduler image is not valid: invalid image reference: "
        '"registry.k8s.io/kube-scheduler:latest" (its tag must be the version, e.g. :v1.30.3)',
    ]
    # A worker runs no control plane: only its kubelet's version is checked.
    opts = GenOptions(cluster_name="c", endpoint="https://127.0.0.1:6443")
    worker = generate(
        SecretsBundle.generate(), opts, output_types=[OutputType.WORKER], with_docs=False
    ).outputs[OutputType.WORKER]
    worker = worker.replace(
        "\ncluster:\n",
        "\ncluster:\n    apiServer:\n        image: registry.k8s.io/kube-apiserver:v1.24.9\n",
        1,
    )
    assert "kube-apiserver:v1.24.9" in worker
    assert _load(worker, "test").v1alpha1["machine"]["type"] == "worker"


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


# --- a large config is parsed, compared, diffed and written off the event loop ----------------------


def test_every_step_of_an_apply_that_grows_with_the_config_runs_off_the_event_loop(
    controlplane: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ichor.machined import configstore

    calls: list[tuple[str, bool, bool]] = []  # (step, on the event loop thread, collector enabled)

    def spy(name: str, real: Any) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, threading.get_ident() == loop_thread, gc.isenabled()))
            return real(*args, **kwargs)

        return step

    for name in ("load", "can_apply_immediately", "unified_diff", "write_atomic", "to_plain"):
        monkeypatch.setattr(configstore, name, spy(name, getattr(configstore, name)))
    hostname = controlplane.replace("    network: {}", "    network:\n        hostname: h1", 1).encode()
    env = controlplane.replace(
        "machine:\n", "machine:\n    env:\n        A: b\n", 1
    ).encode()  # needs a reboot
    modes = machine_pb2.ApplyConfigurationRequest

    async def go() -> None:
        with _store(tmp_path) as (store, _, _):
            store.activate(_load(controlplane, "test"))
            calls.clear()
            await store.apply(modes(data=hostname, mode=modes.AUTO, dry_run=True))
            await store.apply(modes(data=hostname, mode=modes.NO_REBOOT))
            await store.apply(modes(data=hostname, mode=modes.STAGED))
            with pytest.raises(GRPCError, match="can't be applied in immediate mode"):
                await store.apply(modes(data=env, mode=modes.NO_REBOOT))

    loop_thread = threading.get_ident()
    assert gc.isenabled()
    asyncio.run(go())
    steps = {name for name, _, _ in calls}
    assert {"load", "can_apply_immediately", "unified_diff", "write_atomic", "to_plain"} <= steps
    assert [c for c in calls if c[1]] == [], "ran on the event loop"
    # The garbage collector is paused while a config is built, and back on afterwards.
    assert all(not enabled for name, _, enabled in calls if name == "load")
    assert gc.isenabled()


def test_applies_run_one_at_a_time(
    controlplane: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ichor.machined import configstore

    running, most = 0, 0
    real_load = configstore.load

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            time.sleep(0.05)
            return real_load(*args, **kwargs)
        finally:
            running -= 1

    monkeypatch.setattr(configstore, "load", counting_load)
    modes = machine_pb2.ApplyConfigurationRequest

    async def go() -> None:
        with _store(tmp_path) as (store, _, _):
            store.activate(real_load(controlplane, "test"))
            requests = [
                modes(data=controlplane.replace("    network: {}", f"    network:\n        hostname: h{i}", 1).encode(),
                      mode=modes.NO_REBOOT)
                for i in range(4)
            ]  # fmt: skip
            await asyncio.gather(*(store.apply(r) for r in requests))
            assert store.active is not None and store.active.config.machine.network.hostname == "h3"  # type: ignore[union-attr]

    asyncio.run(go())
    assert most == 1


def test_a_node_keeps_a_bounded_number_of_old_configs_alive(controlplane: str, tmp_path: Path) -> None:
    import weakref

    from ichor.machined.configstore import CONFIG_HISTORY

    layout = Layout(root=tmp_path / "node", address="127.5.0.3")
    layout.ensure()
    # As the node builds its state; with the default history of 1024 every applied config stayed.
    state = State(history_of={MACHINE_CONFIGS.type: CONFIG_HISTORY})
    store = ConfigStore(layout, state, EventBus(), say=lambda _: None, clock=lambda: datetime.now(UTC))
    modes = machine_pb2.ApplyConfigurationRequest
    alive: list[weakref.ref[Any]] = []

    async def go() -> None:
        store.activate(_load(controlplane, "test"))
        watch = state.watch_kind(MACHINE_CONFIGS.default_namespace, MACHINE_CONFIGS, bootstrap=False)
        for i in range(2 * CONFIG_HISTORY + 2):
            text = controlplane.replace("    network: {}", f"    network:\n        hostname: h{i}", 1)
            await store.apply(modes(data=text.encode(), mode=modes.NO_REBOOT))
            assert store.active is not None
            alive.append(weakref.ref(store.active.container))
        del watch

    asyncio.run(go())
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= CONFIG_HISTORY + 1
    assert alive[-1]() is not None  # the active config, of course


def test_garbage_frozen_with_configs_is_collected_every_so_many_applies() -> None:
    from ichor.machined.configstore import _CollectorPause

    pause = _CollectorPause(clean_every=4)
    try:
        with pause.loading():
            pass  # the first freeze starts clean
        clean = gc.get_freeze_count()
        batch = clean // 4 + 1
        for _ in range(15):
            with pause.loading():
                # Alive when the config is frozen, then dead in reference cycles (a call's objects).
                junk: list[list[Any]] = [[] for _ in range(batch)]
                for item in junk:
                    item.append(item)
            del junk
        # Never collected, these would be 15 batches (nearly 4x the clean size) on top of it.
        assert gc.get_freeze_count() <= clean + 4 * batch
    finally:
        gc.unfreeze()
    assert gc.isenabled()


def test_a_network_change_that_cuts_the_node_off_is_applied_with_a_warning_naming_the_key(
    controlplane: str, tmp_path: Path
) -> None:
    moved = controlplane.replace(
        "    network: {}", "    network:\n        interfaces:\n            - interface: eth0\n"
        "              dhcp: false\n              addresses: [10.9.9.2/24]", 1,
    ).encode()  # fmt: skip
    kept = moved.replace(b"[10.9.9.2/24]", b"[10.5.0.3/24]")
    modes = machine_pb2.ApplyConfigurationRequest

    async def go() -> None:
        with _store(tmp_path) as (store, state, said):
            state.create(LINK_STATUSES.new("eth0", ether(2, "0a:58:0a:05:00:03", up=True)))
            state.create(ADDRESS_STATUSES.new("eth0/10.5.0.3/24", AddressStatusSpec(
                address=ipaddress.ip_interface("10.5.0.3/24"), link_name="eth0", link_index=2,
                family=AddressFamily.INET4,
            )))  # fmt: skip
            store.activate(_load(controlplane, "test"))
            for mode in (modes.NO_REBOOT, modes.TRY):
                reply = await store.apply(modes(data=moved, mode=mode))
                assert [w.split(": ", 1)[0] for w in reply.warnings] == [
                    "machine.network.interfaces[0].addresses[0]"
                ]
                assert "outside every such subnet" in reply.warnings[0] and "--mode=try" in reply.warnings[0]
                assert any("machine.network.interfaces[0].addresses[0]" in line for line in said), said
            dry = await store.apply(modes(data=moved, mode=modes.NO_REBOOT, dry_run=True))
            assert len(dry.warnings) == 1
            # The same interface kept in its subnet: no warning.
            assert list((await store.apply(modes(data=kept, mode=modes.NO_REBOOT))).warnings) == []

    asyncio.run(go())
