"""A runner for a container of the system containerd (Talos's ``containerd`` runner).

:class:`ContainerRunner` writes the container's OCI spec (``config.json``) and runs it with
``ctr run --rm --config`` (:meth:`ichor.machined.cri.Ctr.run_args`) as a child whose output is the
service log: ``ctr`` relays the task's stdout and stderr, forwards SIGTERM to the task and exits with
its status. Why ``ctr`` rather than the containerd API: machined has no containerd gRPC stubs (see
:mod:`ichor.machined.cri._ctr`), and ``ctr run`` gives the foreground task, its output and its exit
status in one process, which is exactly what a service runner needs.

Running is reported once the task exists, with Talos's text (``Started task ext-x (PID n) for
container ext-x``); a stop sends SIGTERM, then SIGKILL to the task after the stop timeout. Whatever
way a run ends, the task and the container are deleted, so the next start begins clean (a container
left by a machined that was killed is removed before each start).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from ichor.machined.cri import CRIError, Ctr
from ichor.machined.services._errors import RunnerError
from ichor.machined.services._events import ServiceState
from ichor.machined.services._runners import Recorder, RunContext, _exit_text
from ichor.machinery import proc
from ichor.machinery.aio import race
from ichor.machinery.errors import ProcessError
from ichor.machinery.files import write_atomic

__all__ = ["ContainerRunner"]

PID_POLL_INTERVAL = 0.05


def _last_line(path: Path) -> str:
    """The last non-empty line of the service log (``ctr``'s error when a task cannot start)."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - 4096))
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")


class ContainerRunner:
    """Runs container ``container_id`` in ``namespace`` from ``spec`` (an OCI runtime spec dict)."""

    def __init__(
        self,
        ctr: Ctr,
        namespace: str,
        container_id: str,
        spec: dict[str, Any],
        config_path: Path,
        context: RunContext,
    ) -> None:
        self.ctr = ctr
        self.namespace = namespace
        self.container_id = container_id
        self.spec = spec
        self.config_path = config_path
        self.context = context
        self.pid = 0

    def __str__(self) -> str:
        return f"Containerd({self.container_id})"

    def _task(self) -> str:
        return f"task {self.container_id} (PID {self.pid}, container {self.container_id})"

    async def _remove(self) -> None:
        try:
            await self.ctr.remove(self.namespace, self.container_id)
        except CRIError as err:
            raise RunnerError(f"error removing container {self.container_id}: {err}") from err

    async def _wait_started(self, child: proc.Process) -> int:
        """The task's PID once it runs; 0 if ``ctr`` exited first (the task never started)."""
        while child.exit_code is None:
            with contextlib.suppress(CRIError):
                pid = await self.ctr.task_pid(self.namespace, self.container_id)
                if pid:
                    return pid
            await asyncio.sleep(PID_POLL_INTERVAL)
        return 0

    async def run(self, record: Recorder, stop: asyncio.Event) -> None:
        await self._remove()
        self.config_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.config_path, json.dumps(self.spec, indent=2) + "\n", mode=0o600)
        args = self.ctr.run_args(self.namespace, self.container_id, self.config_path)
        try:
            child = await proc.spawn(args, output=self.context.log_path)
        except ProcessError as err:
            raise RunnerError(f"error starting ctr: {err}") from err
        try:
            stopped, pid = await race(self._wait_started(child), stop)
            if not stopped and not pid:
                # Ended before a poll saw it run: ctr's own error, or the task's quick exit.
                code = await child.wait()
                last = _last_line(self.context.log_path)
                if last.startswith("ctr: "):
                    raise RunnerError(f"failed to start task {self.container_id}: {last}")
                if code:
                    raise RunnerError(_exit_text(code))
                return
            if pid:
                self.pid = pid
                record(
                    ServiceState.RUNNING,
                    f"Started task {self.container_id} (PID {pid}) for container {self.container_id}",
                )
                stopped, status = await race(child.wait(), stop)
                if not stopped:
                    if status:
                        raise RunnerError(_exit_text(status))
                    return
                record(ServiceState.STOPPING, f"Sending SIGTERM to {self._task()}")
                child.terminate()  # ctr forwards it to the task
                try:
                    async with asyncio.timeout(self.context.stop_timeout):
                        await child.wait()
                except TimeoutError:
                    record(ServiceState.STOPPING, f"Sending SIGKILL to {self._task()}")
        finally:
            child.kill()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(child.wait())
            await asyncio.shield(self._remove())
