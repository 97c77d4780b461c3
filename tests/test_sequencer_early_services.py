"""Early services (Talos 1.6+): the system containerd and extension services start before the
config is acquired, run in maintenance mode, and the config's boot leaves them running (started
once, never rerun) while it starts the services the config adds; the node wires them so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ichor.machined.configstore import LoadedConfig
from ichor.machined.cosi import Source, State
from ichor.machined.events import EventBus
from ichor.machined.platform import EXIT_POWEROFF, Layout, Platform
from ichor.machined.resources import MachineStage
from ichor.machined.sequencer import NodeParts, Sequencer
from ichor.machined.services import RestartPolicy, Service, ServiceState, Supervisor, goroutine
from ichor.machinery.config import load_config

CONFIG = "version: v1alpha1\nmachine:\n  type: worker\n"


class _Store:
    """The config store's surface the boot sequence uses: no saved config, so maintenance mode."""

    def __init__(self) -> None:
        self.request_reboot: Callable[[], None] | None = None
        self.activated: list[LoadedConfig] = []

    async def acquire(self) -> LoadedConfig | None:
        return None

    def activate(self, loaded: LoadedConfig) -> None:
        self.activated.append(loaded)


def _forever(ran: list[str], name: str) -> Callable[..., Any]:
    async def body(_log: IO[str]) -> None:
        ran.append(name)
        await asyncio.Event().wait()

    return goroutine(body)


def _once(ran: list[str], name: str) -> Callable[..., Any]:
    async def body(_log: IO[str]) -> None:
        ran.append(name)

    return goroutine(body)


def _starts(supervisor: Supervisor, service_id: str) -> int:
    return sum(e.state is ServiceState.RUNNING for e in supervisor.info(service_id).events)


async def _until(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def test_extension_services_run_in_maintenance_mode_and_keep_running_after_the_config(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "root", "127.0.0.1")
    layout.ensure()
    ran: list[str] = []
    seen_in_maintenance: dict[str, bool] = {}

    async def scenario() -> int:
        async with Supervisor(layout) as supervisor:
            stage = Source("stage", MachineStage.BOOTING)

            def early() -> list[Service]:
                return [
                    Service("containerd", _forever(ran, "containerd")),
                    Service("ext-agent", _forever(ran, "ext-agent"), depends_on=("containerd",)),
                    Service("ext-once", _once(ran, "ext-once"), restart=RestartPolicy.ONCE),
                ]

            def for_config(_loaded: LoadedConfig) -> list[Service]:
                # The config's boot names the early ones again (as the node's list did before).
                return [
                    *early(),
                    Service("apid", _forever(ran, "apid")),
                    Service("cri", _forever(ran, "cri")),
                ]

            async def maintenance() -> LoadedConfig:
                await _until(
                    lambda: supervisor.is_running("ext-agent") and _starts(supervisor, "ext-agent") == 1
                )
                await _until(lambda: supervisor.info("ext-once").state is ServiceState.FINISHED)
                seen_in_maintenance["stage is maintenance"] = stage.value is MachineStage.MAINTENANCE
                seen_in_maintenance["apid loaded"] = any(i.id == "apid" for i in supervisor.list())
                return LoadedConfig(load_config(CONFIG), CONFIG)

            parts = NodeParts(
                layout=layout, state=State(), events=EventBus(), store=_Store(),  # type: ignore[arg-type]
                supervisor=supervisor, stage=stage, say=lambda _line: None, clock=lambda: datetime.now(UTC),
                services=for_config, maintenance=maintenance, leave_etcd=None,  # type: ignore[arg-type]
                early_services=early,
            )  # fmt: skip
            sequencer = Sequencer(parts)
            running = asyncio.ensure_future(sequencer.run())
            await _until(lambda: stage.value is MachineStage.RUNNING)
            await _until(lambda: supervisor.is_running("apid") and supervisor.is_running("cri"))
            await asyncio.sleep(0.1)  # a rerun of an early service would show by now
            assert _starts(supervisor, "ext-agent") == 1, supervisor.info("ext-agent").events
            assert supervisor.is_running("ext-agent") and supervisor.is_running("containerd")
            assert _starts(supervisor, "ext-once") == 1, "an early service that ended was run again"
            assert supervisor.info("ext-once").state is ServiceState.FINISHED
            sequencer.finish(EXIT_POWEROFF)
            return await asyncio.wait_for(running, 5)

    assert asyncio.run(scenario()) == EXIT_POWEROFF
    assert seen_in_maintenance == {"stage is maintenance": True, "apid loaded": False}
    assert ran.count("ext-agent") == 1 and ran.count("ext-once") == 1 and ran.count("containerd") == 1
    assert ran.index("ext-agent") < ran.index("apid")


def test_the_node_starts_containerd_and_extension_services_early_and_the_rest_with_the_config(
    tmp_path: Path,
) -> None:
    from ichor.machined.node import Node, _SystemServices

    layout = Layout(tmp_path / "root", "127.0.0.1", Platform.CONTAINER)
    layout.ensure()
    specs = layout.path("/usr/local/etc/containers")
    specs.mkdir(parents=True)
    (specs / "agent.yaml").write_text(
        "name: agent\ncontainer:\n  entrypoint: /bin/agent\ndepends:\n  - service: cri\nrestart: always\n"
    )
    layout.path("/usr/local/lib/containers/agent").mkdir(parents=True)
    node = Node(layout)
    system = _SystemServices.__new__(_SystemServices)
    system.node = node
    system.store = type("Store", (), {"say": staticmethod(lambda _line: None)})()  # type: ignore[assignment]
    system.handlers = lambda: []  # type: ignore[method-assign]
    system.machine_api = None  # type: ignore[assignment]
    system.etcd = None  # type: ignore[assignment]
    early = [s.id for s in system.early()]
    assert early == ["syslogd", "containerd", "ext-agent"]
    loaded = LoadedConfig(load_config(CONFIG), CONFIG)
    later = [s.id for s in system.for_config(loaded)]
    assert not set(early) & set(later), later
    assert {"machined", "apid", "cri", "kubelet"} <= set(later), later
