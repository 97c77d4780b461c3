"""Extension service specs -> machined services: waits, restart policies, refusals, config restarts."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest

from ichor.machined.cosi import WAIT_STATUSES, State
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    EXTENSION_SERVICE_CONFIG_STATUSES,
    NETWORK_STATUS_ID,
    NETWORK_STATUSES,
    ExtensionServiceConfigStatusSpec,
    NetworkStatusSpec,
)
from ichor.machined.services import (
    RestartPolicy,
    ServiceLoadError,
    ServiceState,
    Supervisor,
    goroutine,
)
from ichor.machined.services import Service as SupervisedService
from ichor.machined.services._container import ContainerRunner
from ichor.machined.services._runners import RunContext
from ichor.machined.services.containerd import PROCESS_NODE_REASON
from ichor.machined.services.extensions import extension_services, follow_configs, network_ready
from ichor.machinery.errors import ExtensionServiceError
from ichor.machinery.extensions import (
    GRANTABLE_CAPABILITIES,
    NetworkCheck,
    capabilities_in,
    fit_to_node,
    parse_service_spec,
    runtime_spec,
)

T = TypeVar("T")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

HELLO = """\
name: hello
container:
  entrypoint: ./hello
depends:
  - service: cri
  - path: /run/ready
  - network: [addresses, connectivity]
  - time: true
  - configuration: true
restart: untilSuccess
"""


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def node(tmp_path: Path, specs: dict[str, str], *, platform: Platform = Platform.CONTAINER) -> Layout:
    layout = Layout(root=tmp_path, address="127.0.0.1", platform=platform)
    directory = layout.path("/usr/local/etc/containers")
    directory.mkdir(parents=True)
    for name, text in specs.items():
        (directory / f"{name}.yaml").write_text(text)
    return layout


def rootfs(layout: Layout, name: str, *dirs: str) -> Path:
    root = layout.path(f"/usr/local/lib/containers/{name}")
    root.mkdir(parents=True)
    for directory in dirs:
        (root / directory).mkdir()
    return root


def test_a_spec_becomes_ext_name_with_talos_waits_and_policy(tmp_path: Path) -> None:
    layout = node(tmp_path, {"hello": HELLO})
    rootfs(layout, "hello")
    [service] = extension_services(layout, State())
    assert service.id == "ext-hello"
    assert service.depends_on == ("containerd", "cri")
    assert service.restart is RestartPolicy.UNTIL_SUCCESS
    assert [str(c) for c in service.conditions] == [
        'file "/run/ready" to exist',
        "network",
        "time sync",
        'extension service config "hello"',
    ]


def test_network_condition_waits_for_the_named_bits_only() -> None:
    async def scenario() -> None:
        state = State()
        condition = network_ready(state, (NetworkCheck.ADDRESSES, NetworkCheck.HOSTNAME))
        waiter = asyncio.ensure_future(condition.wait())
        state.create(NETWORK_STATUSES.new(NETWORK_STATUS_ID, NetworkStatusSpec(address_ready=True)))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        state.update(
            NETWORK_STATUSES.new(
                NETWORK_STATUS_ID, NetworkStatusSpec(address_ready=True, hostname_ready=True)
            )
        )
        await asyncio.wait_for(waiter, 5)

    run(scenario())


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("name: Bad\ncontainer: {entrypoint: ./x}\nrestart: always\n", 'name "Bad" is invalid'),
        ("name: hello\ncontainer: {}\nrestart: always\n", "container endpoint can't be empty"),
        ("name: hello\ncontainer: {entrypoint: ./x}\ndepends: [{disk: sda}]\nrestart: always\n", "depends[0].disk: unknown key"),
        ("name: other\ncontainer: {entrypoint: ./x}\nrestart: always\n", "container rootfs /usr/local/lib/containers/other is missing"),
    ],
)  # fmt: skip
def test_a_refused_spec_fails_with_the_reason_and_disturbs_nothing(
    tmp_path: Path, spec: str, reason: str
) -> None:
    layout = node(
        tmp_path, {"broken": spec, "hello": "name: hello\ncontainer: {entrypoint: ./x}\nrestart: never\n"}
    )
    rootfs(layout, "hello")
    services = extension_services(layout, State())
    assert [s.id for s in services] == ["ext-hello", "ext-broken"]

    async def scenario() -> None:
        blocker = asyncio.Event()

        async def other(_log: IO[str]) -> None:
            await blocker.wait()

        async with Supervisor(layout) as supervisor:
            supervisor.load(SupervisedService("apid", goroutine(other)), services[1])
            supervisor.start("apid", "ext-broken")
            await until(lambda: supervisor.info("ext-broken").state is ServiceState.FAILED)
            message = supervisor.info("ext-broken").events[-1].message
            assert message.startswith("Failed to create runner: extension service spec")
            assert reason in message
            assert supervisor.info("apid").state is ServiceState.RUNNING
            blocker.set()

    run(scenario())
    state = State()
    extension_services(layout, state, now=lambda: NOW)
    [wait] = state.list(WAIT_STATUSES.default_namespace, WAIT_STATUSES)
    assert wait.id == "ext-broken"
    assert wait.spec.waiting_for == "extension service ext-broken"
    assert wait.spec.reason.startswith("spec /usr/local/etc/containers/broken.yaml refused: ")
    assert reason in wait.spec.reason and wait.spec.since == NOW


ENV_SPEC = "name: hello\ncontainer:\n  entrypoint: ./x\n  environment: [A=spec]\n  environmentFile: /var/hello.env\nrestart: never\n"


def _env_of(layout: Layout, service: SupervisedService) -> list[str]:
    context = RunContext("ext-hello", layout.path("/var/log/ext-hello.log"), 10)
    runner = service.runner(context)
    assert isinstance(runner, ContainerRunner)
    env: list[str] = runner.spec["process"]["env"]
    return env


def test_the_deprecated_environment_file_is_waited_for_and_read_at_each_start(tmp_path: Path) -> None:
    layout = node(tmp_path, {"hello": ENV_SPEC})
    rootfs(layout, "hello")
    [service] = extension_services(layout, State())
    assert [str(c) for c in service.conditions] == ['file "/var/hello.env" to exist']
    env_file = layout.path("/var/hello.env")
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_text("B=file one\n\nC=x=y\n")
    env = _env_of(layout, service)
    assert env[-3:] == ["A=spec", "B=file one", "C=x=y"]
    env_file.write_text("B=changed\n")
    assert _env_of(layout, service)[-1] == "B=changed"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"JUSTANAME\n", "/var/hello.env:1: 'JUSTANAME' is not KEY=value"),
        (b"A=1\n=nokey\n", "/var/hello.env:2: '=nokey' is not KEY=value"),
        (b"BAD NAME=1\n", "is not KEY=value"),
        (b"A=\xff\n", "/var/hello.env: not UTF-8 (byte 2)"),
        (b"A=" + b"x" * 70000, "over the 65536 bytes an environment file may hold"),
    ],
)
def test_a_bad_environment_file_fails_the_start_with_the_reason(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    layout = node(tmp_path, {"hello": ENV_SPEC})
    rootfs(layout, "hello")
    [service] = extension_services(layout, State())
    env_file = layout.path("/var/hello.env")
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_bytes(content)
    with pytest.raises(ServiceLoadError, match=re.escape(reason)):
        _env_of(layout, service)
    env_file.unlink()
    with pytest.raises(
        ServiceLoadError, match=re.escape("cannot read environmentFile /var/hello.env: No such file")
    ):
        _env_of(layout, service)


def test_a_relative_environment_file_refuses_the_spec() -> None:
    with pytest.raises(
        ExtensionServiceError, match=re.escape("container.environmentFile: 'x.env' is not an absolute path")
    ):
        parse_service_spec(
            "name: hello\ncontainer: {entrypoint: ./x, environmentFile: x.env}\nrestart: never\n"
        )


def test_process_nodes_skip_extension_services_with_the_reason(tmp_path: Path) -> None:
    layout = node(tmp_path, {"hello": HELLO}, platform=Platform.PROCESS)
    rootfs(layout, "hello")
    [service] = extension_services(layout, State())

    async def scenario() -> None:
        async with Supervisor(layout) as supervisor:
            supervisor.load(service)
            supervisor.start("ext-hello")
            await until(lambda: supervisor.info("ext-hello").state is ServiceState.SKIPPED)
            assert (
                supervisor.info("ext-hello").events[-1].message == f"Service skipped: {PROCESS_NODE_REASON}"
            )

    run(scenario())


def test_pre_stage_refuses_a_root_without_its_mount_points(tmp_path: Path) -> None:
    layout = node(tmp_path, {"hello": "name: hello\ncontainer: {entrypoint: ./x}\nrestart: never\n"})
    root = rootfs(layout, "hello", "proc", "dev", "sys")
    [service] = extension_services(layout, State())
    assert service.pre is not None
    with pytest.raises(ServiceLoadError) as refused:
        run(service.pre())
    assert "mount point /run is missing in the root file system /usr/local/lib/containers/hello" in str(
        refused.value
    )
    assert (
        refused.value.hint
        == "ship the directory in the extension at rootfs/usr/local/lib/containers/hello/run"
    )
    (root / "run").mkdir()
    run(service.pre())


def test_fit_to_node_grants_only_held_capabilities_and_a_reachable_oom_score() -> None:
    oci = runtime_spec(parse_service_spec(HELLO))
    without_resource = capabilities_in(0x1FFFEFFFFFF)
    assert "CAP_SYS_RESOURCE" not in without_resource and "CAP_NET_ADMIN" in without_resource
    fitted = fit_to_node(oci, held=without_resource, oom_score_adj=0)
    assert "CAP_SYS_RESOURCE" not in fitted["process"]["capabilities"]["bounding"]
    assert fitted["process"]["oomScoreAdj"] == 0
    assert oci["process"]["oomScoreAdj"] == -600  # the input is left alone
    full = fit_to_node(oci, held=capabilities_in((1 << 41) - 1), oom_score_adj=0)
    assert full["process"]["capabilities"]["effective"] == list(GRANTABLE_CAPABILITIES)
    assert full["process"]["oomScoreAdj"] == -600


def test_a_new_config_version_restarts_the_running_service(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path, address="127.0.0.1")

    async def scenario() -> None:
        state = State()
        status = EXTENSION_SERVICE_CONFIG_STATUSES
        state.create(status.new("hello", ExtensionServiceConfigStatusSpec(spec_version="1")))

        async def body(_log: IO[str]) -> None:
            await asyncio.Event().wait()

        async with Supervisor(layout) as supervisor:
            supervisor.load(
                SupervisedService("ext-hello", goroutine(body)),
                SupervisedService("ext-other", goroutine(body)),
            )
            supervisor.start_all()
            follower = asyncio.ensure_future(follow_configs(state, supervisor))

            def starts(sid: str) -> int:
                return sum(e.state is ServiceState.RUNNING for e in supervisor.info(sid).events)

            await until(lambda: starts("ext-hello") == 1 and starts("ext-other") == 1)
            await asyncio.sleep(0.05)
            assert starts("ext-hello") == 1, "the version seen at boot restarts nothing"
            state.update(status.new("hello", ExtensionServiceConfigStatusSpec(spec_version="2")))
            await until(lambda: starts("ext-hello") == 2)
            state.create(status.new("other", ExtensionServiceConfigStatusSpec(spec_version="1")))
            await until(lambda: starts("ext-other") == 2)
            state.create(status.new("nobody", ExtensionServiceConfigStatusSpec(spec_version="1")))
            await asyncio.sleep(0.05)
            assert starts("ext-hello") == 2
            follower.cancel()

    run(scenario())
