"""Talos's rule for service start/stop/restart via the API, and runner names as Talos prints them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import IO

import pytest

from ichor.machined.platform import Layout
from ichor.machined.services import (
    ApiOperation,
    OperationNotSupportedError,
    ProcessRunner,
    RunContext,
    Service,
    ServiceState,
    Supervisor,
    UnknownServiceError,
    check_api_operation,
    goroutine,
)
from ichor.machined.services._runners import GoroutineRunner


async def forever(log: IO[str]) -> None:
    await asyncio.Event().wait()


@pytest.mark.parametrize(
    ("service_id", "allowed"),
    [
        ("kubelet", {"start", "restart"}),
        ("ext-iscsid", {"start", "stop", "restart"}),
        ("apid", set()),
        ("etcd", set()),
        ("cri", set()),
        ("machined", set()),
        ("extension", set()),  # only the ext- prefix counts
    ],
)
def test_api_operation_rule(service_id: str, allowed: set[str]) -> None:
    for operation in ApiOperation:
        if operation in allowed:
            check_api_operation(service_id, operation)
            continue
        with pytest.raises(OperationNotSupportedError) as info:
            check_api_operation(service_id, operation)
        assert str(info.value) == f'service "{service_id}" doesn\'t support {operation} operation via API'
        assert info.value.hint is not None and "kubelet" in info.value.hint


def test_supervisor_api_operations(tmp_path: Path) -> None:
    layout = Layout(root=tmp_path / "node", address="127.0.0.3")

    async def main() -> None:
        async with Supervisor(layout) as sup:
            sup.load(
                Service("apid", goroutine(forever)),
                Service("kubelet", goroutine(forever)),
                Service("ext-hello", goroutine(forever)),
            )
            # Not running: stop is a no-op even for a service the API may not stop.
            await sup.api_stop("apid")
            with pytest.raises(OperationNotSupportedError, match='service "apid" doesn\'t support start'):
                await sup.api_start("apid")
            assert sup.info("apid").state is ServiceState.INITIALIZED

            sup.start("apid")
            await sup.wait_up(["apid"], timeout=5)
            await sup.api_start("apid")  # running already: nothing to do, no error
            with pytest.raises(OperationNotSupportedError, match="doesn't support stop operation via API"):
                await sup.api_stop("apid")
            with pytest.raises(OperationNotSupportedError, match="doesn't support restart operation via API"):
                await sup.api_restart("apid")
            assert sup.info("apid").state is ServiceState.RUNNING

            await sup.api_restart("kubelet")  # not running: restart means start
            await sup.wait_up(["kubelet"], timeout=5)
            await sup.api_restart("kubelet")
            await sup.wait_up(["kubelet"], timeout=5)
            assert [e.message for e in sup.info("kubelet").events].count("Starting service") == 2
            with pytest.raises(OperationNotSupportedError, match='service "kubelet" doesn\'t support stop'):
                await sup.api_stop("kubelet")

            await sup.api_start("ext-hello")
            await sup.wait_up(["ext-hello"], timeout=5)
            await sup.api_stop("ext-hello")
            assert sup.info("ext-hello").state is ServiceState.FINISHED

            with pytest.raises(UnknownServiceError, match='service "nope" not defined'):
                await sup.api_start("nope")

    asyncio.run(asyncio.wait_for(main(), 30))


def test_runner_names_as_talos_prints_them(tmp_path: Path) -> None:
    context = RunContext(service_id="apid", log_path=tmp_path / "apid.log", stop_timeout=10)
    runner = ProcessRunner(
        ["/bin/containerd", "--address", "/system/run/containerd/containerd.sock"], context
    )
    assert str(runner) == 'Process(["/bin/containerd" "--address" "/system/run/containerd/containerd.sock"])'
    assert str(GoroutineRunner(forever, context)) == 'Goroutine("apid")'
