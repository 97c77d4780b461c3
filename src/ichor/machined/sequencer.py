"""The sequencer: boot, maintenance, reboot, shutdown and reset as ordered, named tasks.

As Talos's sequencer, each sequence is a list of phases run in order; the stage it puts the
machine in is a :class:`~ichor.machined.cosi.Source` that ``runtime.MachineStatusController`` turns
into ``MachineStatus``. Sequences, phases and tasks are announced as Talos announces them
(``talosctl events``; Talos's client waits for some of them): ``SequenceEvent`` ``initialize`` and
``boot`` START/STOP at every boot, ``reboot``/``shutdown``/``reset`` START when requested (the node
goes down before a STOP, as Talos's does), a reset that stops early STOP with its error;
``PhaseEvent``/``TaskEvent`` ``stopEverything``/``stopAllServices`` (what ``reboot``, ``shutdown``
and ``reset`` trackers wait for); a reset runs Talos's ``leave``/``leaveEtcd``,
``preReset``/``sendResetSignal``, ``stopEverything`` and ``reset``/``resetSystemDisk`` (``resetSpec``
with chosen partitions). Events of a requested sequence carry the request's actor id.

* **early services**: before anything else, the system containerd and the extension services are
  started (Talos 1.6+'s ``earlyServices`` and its ExtensionServiceController): they run in
  maintenance mode and are left running by the boot below;
* **boot**: acquire the config (STATE, else the node's config source) -> maintenance mode when
  there is none -> on a node that installs to disk and is not installed yet, **install** (Talos's
  ``install`` sequence, in a worker thread; success reboots into the installed system, failure
  returns to maintenance mode saying why) -> save and activate it -> load and start the services
  -> running;
* **upgrade** (a node with a boot disk): the installer's upgrade mode in a worker while the node
  runs (a failure leaves it running, saying why: ``upgrade`` SequenceEvent with the error); without
  ``--preserve`` then Talos's ``leave`` phase on a node running etcd and EPHEMERAL wiped (services
  stopped first; kept when leaving failed); then a reboot. ``stageUpgrade`` leaves etcd (without
  ``--preserve``) and reboots; the upgrade staged in META runs at boot, before the services start,
  wipes EPHEMERAL without ``--preserve``, and reboots;
* **reboot** / **shutdown**: stop every service, then :meth:`Sequencer.run` returns the launcher's
  exit code (:data:`~ichor.machined.platform.EXIT_REBOOT` / ``EXIT_POWEROFF``);
* **reset**: leave etcd when graceful (a failure stops the reset: nothing is wiped), write
  ``MachineResetSignal`` (the discovery controller deletes this node's affiliate), stop etcd, wipe the
  chosen system partitions, then reboot or power off.

The sequencer writes only ``MachineResetSignal``; everything else it changes goes through the
config store (the machine config) and the supervisor (services).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.machined.configstore import ConfigStore, LoadedConfig
from ichor.machined.cosi import EmptySpec, EventType, Source, State, clear_wait, publish_wait
from ichor.machined.events import EventBus
from ichor.machined.partitions import DirectoryPartitions, SystemPartitions
from ichor.machined.platform import EXIT_POWEROFF, EXIT_REBOOT, Layout
from ichor.machined.resources import (
    DISCOVERY_STATUS_ID,
    DISCOVERY_STATUSES,
    MACHINE_RESET_SIGNAL_ID,
    MACHINE_RESET_SIGNALS,
    MachineStage,
)
from ichor.machined.services import Service, Supervisor
from ichor.machinery.errors import MachineryError

__all__ = ["NodeParts", "Sequencer"]

REQUEST_DELAY = 0.2
"""Seconds between an accepted reboot/shutdown/reset request and its start: the reply leaves first."""
DISCOVERY_LEAVE_TIMEOUT = 5.0
INSTALL_WAIT_ID = "install"
"""The ``waits`` resource an install in progress (or its failure) is reported in."""
STOP_ALL_LIMIT = 90.0
"""Seconds the end of a sequence waits for every service to stop before it goes on without the
ones still stopping (named on the console); each service's own stop has its kill timeouts."""
RESET_KEEPS = ("apid", "machined")
"""Services a reset leaves running while it wipes (the API answers until the node stops)."""


class StagedWrite(Protocol):
    """A staged upgrade performed at boot (``ichor.machined.upgrade.StagedUpgrade``)."""

    @property
    def preserve(self) -> bool: ...


StagedRun = Callable[[LoadedConfig, Callable[[str], None]], Awaitable[StagedWrite | None]]


@dataclass
class NodeParts:
    """What the sequences act on; built by the composition root."""

    layout: Layout
    state: State
    events: EventBus
    store: ConfigStore
    supervisor: Supervisor
    stage: Source[MachineStage]
    say: Callable[[str], None]
    clock: Callable[[], datetime]
    services: Callable[[LoadedConfig], Sequence[Service]]
    """The system services for a config (control planes add trustd and etcd); those already
    started early are left running as they are."""
    maintenance: Callable[[], Awaitable[LoadedConfig]]
    """Serve maintenance mode until a config is applied."""
    leave_etcd: Callable[[], Awaitable[str | None]]
    """Graceful reset: leave etcd; returns why it could not, if so."""
    leave_etcd_for_upgrade: Callable[[], Awaitable[str | None]] = lambda: _nothing_to_leave()
    """An upgrade without ``--preserve``: leave etcd, stop it, clear its data; returns why it could
    not leave, if so (None too on a node with no etcd member)."""
    background: Callable[[], Sequence[Callable[[], Coroutine[Any, Any, None]]]] = lambda: ()
    """Long-lived tasks to run while the node runs (e.g. etcd following its spec)."""
    install: Callable[[LoadedConfig, Callable[[str], None]], None] | None = None
    """Install to disk with a config (blocking: run in a worker thread; it reports progress lines
    through its second argument), on a node that installs to disk and is not installed yet."""
    staged_upgrade: StagedRun | None = None
    """Perform an upgrade staged in META (a node with a boot disk); what it wrote (the node must
    reboot), None when nothing was."""
    partitions: SystemPartitions | None = None
    """What a reset wipes (the node's disk or its directories); None: the layout's directories."""
    early_services: Callable[[], Sequence[Service]] = lambda: ()
    """Services started before the config is acquired, as Talos 1.6+ starts them: syslogd, the
    system containerd and the extension services, which run in maintenance mode too and keep
    running once the config arrives."""
    stopping: Callable[[int], None] = lambda _code: None
    """Told the exit code when the node begins stopping its services (machined's entry point bounds
    the time left to the process: :mod:`ichor.machined.exitdeadline`)."""
    prepare_kexec: Callable[[], str] | None = None
    """Talos's ``KexecPrepare`` on a node booted from its own disk (blocking: run in a thread): load the
    next boot's kernel so the reboot skips the firmware; returns the console line saying what it did
    (:class:`ichor.machined.kexecprep.KexecPrepare`). None where the node has no disk of its own."""


async def _nothing_to_leave() -> str | None:
    return None


class Sequencer:
    def __init__(self, parts: NodeParts) -> None:
        self.parts = parts
        self._stop: asyncio.Future[int] | None = None
        self._resetting = False
        self._actor = ""
        """The actor id of the requested sequence (reboot, shutdown, reset) in progress."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._kexec = True
        """The reboot ending this run may skip the firmware (Talos: not with ``--mode powercycle``, nor
        after a reset of the whole disk or of BOOT)."""
        parts.store.request_reboot = lambda: self.request_reboot("")

    def _stage(self, stage: MachineStage) -> None:
        self.parts.stage.set(stage)

    def _sequence_event(
        self, name: str, actor_id: str, *, stop: bool = False, error: str | None = None
    ) -> None:
        event = machine_pb2.SequenceEvent(
            sequence=name, action=machine_pb2.SequenceEvent.STOP if stop else machine_pb2.SequenceEvent.START
        )
        if error is not None:
            event.error.CopyFrom(common_pb2.Error(code=common_pb2.FATAL, message=error))
        self.parts.events.publish(event, actor_id=actor_id)

    @contextlib.contextmanager
    def _phase(self, phase: str, task: str) -> Any:
        """One phase of one task, announced START then STOP (STOP only when it completes)."""
        events, actor = self.parts.events, self._actor
        events.publish(
            machine_pb2.PhaseEvent(phase=phase, action=machine_pb2.PhaseEvent.START), actor_id=actor
        )
        events.publish(machine_pb2.TaskEvent(task=task, action=machine_pb2.TaskEvent.START), actor_id=actor)
        yield
        events.publish(machine_pb2.TaskEvent(task=task, action=machine_pb2.TaskEvent.STOP), actor_id=actor)
        events.publish(
            machine_pb2.PhaseEvent(phase=phase, action=machine_pb2.PhaseEvent.STOP), actor_id=actor
        )

    # --- the boot sequence --------------------------------------------------------------------------

    async def run(self) -> int:
        """Boot, run until a reboot/shutdown/reset request, stop; returns the launcher exit code."""
        parts = self.parts
        self._stop = asyncio.get_running_loop().create_future()
        self._stage(MachineStage.BOOTING)
        self._sequence_event("initialize", "")
        early = self._start_early_services()
        loaded = await parts.store.acquire()
        while True:
            if loaded is None:
                self._stage(MachineStage.MAINTENANCE)
                loaded = await self._race_stop(parts.maintenance())
                if loaded is None:
                    code = await self._stop
                    parts.stopping(code)  # the early services stop as the supervisor exits
                    return code
            if parts.install is None:
                break
            problem = await self._install(loaded, parts.install)
            if problem is None:
                parts.say("installation complete: rebooting into the installed system")
                self._stage(MachineStage.REBOOTING)
                self._sequence_event("reboot", "")
                return EXIT_REBOOT
            # A failed install leaves the node in maintenance mode, saying why (console and waits).
            parts.say(
                f"installation failed: {problem}; staying in maintenance mode "
                "(fix machine.install and apply the config again)"
            )
            publish_wait(parts.state, INSTALL_WAIT_ID, owner="", waiting_for="a machine config that installs",
                         reason=f"installation failed: {problem}", now=parts.clock())  # fmt: skip
            loaded = None
        staged = await self._staged_upgrade(loaded, parts.staged_upgrade) if parts.staged_upgrade else None
        if staged is not None:
            if not staged.preserve:  # Talos's installer wipes EPHEMERAL in the staged upgrade too
                await self.wipe_ephemeral_for_upgrade()
            parts.say("staged upgrade written: rebooting into it")
            self._stage(MachineStage.REBOOTING)
            self._sequence_event("reboot", "")
            return EXIT_REBOOT
        self._sequence_event("initialize", "", stop=True)
        self._sequence_event("boot", "")
        parts.store.activate(loaded)
        kind = "controlplane" if loaded.is_control_plane else "worker"
        parts.say(f"booting as {kind} {self._hostname(loaded)}")
        # What started early keeps running (an extension service that already ended is not rerun).
        later = [service for service in parts.services(loaded) if service.id not in early]
        parts.supervisor.load(*later)
        parts.supervisor.start(*sorted({service.id for service in later}))
        self._stage(MachineStage.RUNNING)
        self._sequence_event("boot", "", stop=True)
        try:
            async with asyncio.TaskGroup() as group:
                background = [
                    group.create_task(work(), name="node background") for work in parts.background()
                ]
                code = await self._stop
                for task in background:
                    task.cancel()
        finally:
            for task in self._tasks:
                task.cancel()
        if not self._resetting:
            # A reset stays "resetting" to the end: discovery would publish the node again otherwise.
            self._stage(MachineStage.REBOOTING if code == EXIT_REBOOT else MachineStage.SHUTTING_DOWN)
        parts.stopping(code)
        await self._way_out(code)
        return code

    async def _way_out(self, code: int) -> None:
        """Stop every service, then (a reboot Talos kexecs) load the next boot for kexec."""
        parts = self.parts
        parts.say("stopping all services")
        if self._resetting:  # the reset announced its own stopEverything
            await self._stop_all()
        else:
            with self._phase("stopEverything", "stopAllServices"):
                await self._stop_all()
        if code == EXIT_REBOOT and self._kexec and parts.prepare_kexec is not None:
            with self._phase("kexec", "kexecPrepare"):
                parts.say(await asyncio.to_thread(parts.prepare_kexec))

    async def _stop_all(self, *, keep: Sequence[str] = ()) -> None:
        """Stop every service but ``keep``, going on after :data:`STOP_ALL_LIMIT` without those still
        stopping."""
        supervisor = self.parts.supervisor
        try:
            async with asyncio.timeout(STOP_ALL_LIMIT):
                await supervisor.stop_all(keep=keep)
        except TimeoutError:
            still = [i.id for i in supervisor.list() if i.id not in keep and supervisor.is_running(i.id)]
            self.parts.say(f"stopping all services: {', '.join(still) or 'none'} still stopping after "
                           f"{STOP_ALL_LIMIT:.0f} s; going on without them")  # fmt: skip

    def _start_early_services(self) -> set[str]:
        """Load and start the early services (before maintenance mode); their ids."""
        parts = self.parts
        early = list(parts.early_services())
        if early:
            parts.supervisor.load(*early)
            parts.supervisor.start(*sorted({service.id for service in early}))
        return {service.id for service in early}

    async def _install(
        self, loaded: LoadedConfig, install: Callable[[LoadedConfig, Callable[[str], None]], None]
    ) -> str | None:
        """Talos's install sequence: the installer's disk step and the config saved to STATE, in a
        worker thread (the API keeps answering), progress on the console and as the ``install``
        wait; the reason when it failed."""
        parts = self.parts
        loop = asyncio.get_running_loop()
        self._stage(MachineStage.INSTALLING)
        self._sequence_event("install", "")

        def progress(line: str) -> None:
            parts.say(f"install: {line}")
            publish_wait(parts.state, INSTALL_WAIT_ID, owner="", waiting_for="the installation to disk",
                         reason=line.splitlines()[0] if line else line, now=parts.clock())  # fmt: skip

        def printf(line: str) -> None:
            loop.call_soon_threadsafe(progress, line)

        try:
            with self._phase("install", "install"):
                await asyncio.to_thread(install, loaded, printf)
        except MachineryError as err:
            problem = f"{err}" + (f" ({err.hint})" if err.hint else "")
        except Exception as err:  # any failure must leave the node in maintenance mode
            problem = f"{type(err).__name__}: {err}"
        else:
            clear_wait(parts.state, INSTALL_WAIT_ID, owner="")
            self._sequence_event("install", "", stop=True)
            return None
        self._sequence_event("install", "", stop=True, error=problem)
        return problem

    async def _staged_upgrade(self, loaded: LoadedConfig, run: StagedRun) -> StagedWrite | None:
        parts = self.parts
        loop = asyncio.get_running_loop()

        def printf(line: str) -> None:
            loop.call_soon_threadsafe(parts.say, f"upgrade: {line}")

        return await run(loaded, printf)

    def _hostname(self, loaded: LoadedConfig) -> str:
        from ichor.machined.controllers.network import hostname_of

        return hostname_of(loaded.config, self.parts.layout.address)

    def finish(self, code: int) -> None:
        """End :meth:`run` with ``code`` (a signal from the launcher, or the end of a sequence)."""
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(code)

    async def _race_stop(self, work: Awaitable[LoadedConfig]) -> LoadedConfig | None:
        assert self._stop is not None
        task = asyncio.ensure_future(work)
        waiting: set[asyncio.Future[Any]] = {task, self._stop}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None

    # --- requests from the API ----------------------------------------------------------------------

    def request_reboot(self, actor_id: str, mode: int = 0) -> None:
        self._actor = actor_id
        self._kexec = mode != machine_pb2.RebootRequest.POWERCYCLE
        self._sequence_event("reboot", actor_id)
        asyncio.get_running_loop().call_later(REQUEST_DELAY, self.finish, EXIT_REBOOT)

    def request_shutdown(self, actor_id: str, force: bool = False) -> None:
        self._actor = actor_id
        self._sequence_event("shutdown", actor_id)
        asyncio.get_running_loop().call_later(REQUEST_DELAY, self.finish, EXIT_POWEROFF)

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None:
        self._actor = actor_id
        self._sequence_event("reset", actor_id)
        loop = asyncio.get_running_loop()

        def start() -> None:
            task = loop.create_task(self._reset(request), name="reset")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        loop.call_later(REQUEST_DELAY, start)

    def request_upgrade(
        self,
        actor_id: str,
        work: Callable[[Callable[[str], None]], Awaitable[object]],
        mode: int = 0,
        *,
        preserve: bool = True,
    ) -> None:
        """Run ``work`` (the installer's upgrade mode; it reports through its argument, from any
        thread) as the ``upgrade`` sequence, then (without ``preserve``) leave etcd and wipe
        EPHEMERAL, then reboot; a failure of ``work`` leaves the node running."""
        self._actor = actor_id
        self._kexec = mode != machine_pb2.UpgradeRequest.POWERCYCLE
        self._sequence_event("upgrade", actor_id)
        self._later(self._upgrade(actor_id, work, preserve=preserve), "upgrade")

    def request_staged_upgrade(self, actor_id: str, mode: int = 0, *, preserve: bool = True) -> None:
        """Talos's ``stageUpgrade`` sequence: (without ``preserve``) leave etcd, then reboot; the
        upgrade staged in META runs at the next boot."""
        self._actor = actor_id
        self._kexec = mode != machine_pb2.UpgradeRequest.POWERCYCLE
        self._sequence_event("stageUpgrade", actor_id)

        async def stage_upgrade() -> None:
            if not preserve:
                await self._leave_for_upgrade()
            self._sequence_event("reboot", actor_id)
            self.finish(EXIT_REBOOT)

        self._later(stage_upgrade(), "stageUpgrade")

    def _later(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Start ``work`` after :data:`REQUEST_DELAY` (the reply leaves first), owned by the sequencer."""
        loop = asyncio.get_running_loop()

        def start() -> None:
            task = loop.create_task(work, name=name)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        loop.call_later(REQUEST_DELAY, start)

    async def _upgrade(
        self, actor_id: str, work: Callable[[Callable[[str], None]], Awaitable[object]], *, preserve: bool
    ) -> None:
        parts = self.parts
        loop = asyncio.get_running_loop()

        def printf(line: str) -> None:
            loop.call_soon_threadsafe(parts.say, f"upgrade: {line}")

        try:
            with self._phase("upgrade", "upgrade"):
                await work(printf)
        except Exception as err:  # the node keeps running on the slot it booted
            problem = f"{err}" + (f" ({err.hint})" if isinstance(err, MachineryError) and err.hint else "")
            parts.say(f"upgrade failed: {problem}; the node stays on the slot it booted")
            self._sequence_event("upgrade", actor_id, stop=True, error=problem)
            self._actor = ""
            return
        if not preserve and await self._leave_for_upgrade():
            await self.wipe_ephemeral_for_upgrade()
        self._sequence_event("upgrade", actor_id, stop=True)
        parts.say("upgrade written: rebooting into the new slot")
        self._sequence_event("reboot", actor_id)
        self.finish(EXIT_REBOOT)

    async def _leave_for_upgrade(self) -> bool:
        """Without ``--preserve``: Talos's ``leave`` phase on a control plane; True when EPHEMERAL
        may be wiped. A node that could not leave keeps its member and EPHEMERAL (as ``--preserve``)
        rather than rejoin with its data gone while the cluster still counts it."""
        parts = self.parts
        if not any(info.id == "etcd" for info in parts.supervisor.list()):
            return True  # a worker (Talos's sequence has no leave phase for one)
        with self._phase("leave", "leaveEtcd"):
            problem = await parts.leave_etcd_for_upgrade()
        if problem is not None:
            parts.say(f"upgrade: could not leave etcd: {problem}; this node keeps its etcd member and "
                      "EPHEMERAL, as with --preserve")  # fmt: skip
            return False
        return True

    async def wipe_ephemeral_for_upgrade(self) -> None:
        """Without ``--preserve``: stop the services that write EPHEMERAL and wipe it (Talos's installer
        wipes it when it re-partitions; it is formatted again at its next mount)."""
        parts = self.parts
        parts.say("upgrade: stopping services to wipe EPHEMERAL")
        with self._phase("stopServices", "stopServicesForUpgrade"):
            await parts.supervisor.stop_all(keep=RESET_KEEPS)
        partitions = parts.partitions or DirectoryPartitions(parts.layout)
        try:
            with self._phase("wipeEphemeral", "wipeEphemeral"):
                await asyncio.to_thread(partitions.wipe, ["EPHEMERAL"], self._say_from_thread("upgrade"))
        except Exception as err:  # the slot is written: reboot into it all the same
            parts.say(f"upgrade: wiping EPHEMERAL failed: {err}; rebooting into the new slot all the same")

    # --- the reset sequence -------------------------------------------------------------------------

    async def _reset(self, request: machine_pb2.ResetRequest) -> None:
        parts = self.parts
        chosen = [p.label for p in request.system_partitions_to_wipe if p.wipe]
        # Talos: labels given -> resetSpec (those partitions), none -> the whole system disk;
        # mode USER_DISKS leaves the system disk alone.
        wipe_system = request.mode != machine_pb2.ResetRequest.USER_DISKS
        # Talos kexecs after a reset of some system partitions that leaves BOOT (ResetPlan.kexec).
        self._kexec = wipe_system and bool(chosen) and "BOOT" not in chosen
        self._resetting = True
        self._stage(MachineStage.RESETTING)
        runs_etcd = any(info.id == "etcd" for info in parts.supervisor.list())
        # A graceful reset leaves etcd first; when that fails the reset stops there, nothing is wiped
        # (the API refused the cases it could foresee before replying).
        if request.graceful and runs_etcd:
            parts.say("resetting: leaving etcd (graceful)")
            with self._phase("leave", "leaveEtcd"):
                problem = await parts.leave_etcd()
            if problem:
                parts.say(
                    f"reset aborted: could not leave etcd: {problem}; nothing was wiped (to reset without "
                    "leaving etcd: `talosctl reset --graceful=false`)"
                )
                self._sequence_event(
                    "reset", self._actor, stop=True, error=f"could not leave etcd: {problem}"
                )
                self._actor = ""
                self._resetting = False
                self._stage(MachineStage.RUNNING)
                return
        # The discovery controller deletes this node's affiliate on the signal.
        with self._phase("preReset", "sendResetSignal"):
            if not parts.state.list(MACHINE_RESET_SIGNALS.default_namespace, MACHINE_RESET_SIGNALS):
                parts.state.create(MACHINE_RESET_SIGNALS.new(MACHINE_RESET_SIGNAL_ID, EmptySpec()))
            await self._left_discovery()
        # As Talos's reset does: nothing may write the partitions while they are wiped (the kubelet,
        # containerd and etcd keep data in EPHEMERAL); apid stays to answer until the node stops.
        parts.say("resetting: stopping services")
        with self._phase("stopEverything", "stopAllServices"):
            await self._stop_all(keep=RESET_KEEPS)  # one still stopping: the wipe shuts its mount down
        spec = bool(chosen)
        if wipe_system:
            with self._phase(
                "resetSpec" if spec else "reset", "resetSystemDiskSpec" if spec else "resetSystemDisk"
            ):
                await self._wipe(chosen if spec else None)
        if request.user_disks_to_wipe and request.mode != machine_pb2.ResetRequest.SYSTEM_DISK:
            with self._phase("resetUserDisks", "resetUserDisks"):
                partitions = parts.partitions or DirectoryPartitions(parts.layout)
                await asyncio.to_thread(
                    partitions.wipe_disks, list(request.user_disks_to_wipe), self._say_from_thread()
                )
        self.finish(EXIT_REBOOT if request.reboot else EXIT_POWEROFF)

    async def _left_discovery(self) -> None:
        """Wait (bounded) until the discovery service confirmed this node's affiliate is gone."""
        state = self.parts.state
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DISCOVERY_LEAVE_TIMEOUT):
                async for event in state.watch(DISCOVERY_STATUSES.default_namespace, DISCOVERY_STATUSES,
                                               DISCOVERY_STATUS_ID):  # fmt: skip
                    if event.type is EventType.DESTROYED or event.resource.spec.left:
                        return  # not on a discovery service, or deleted from it

    async def _wipe(self, labels: list[str] | None) -> None:
        parts = self.parts
        partitions = parts.partitions or DirectoryPartitions(parts.layout)
        parts.say(f"resetting: wiping {', '.join(labels) if labels is not None else 'the system disk'}")
        await asyncio.to_thread(partitions.wipe, labels, self._say_from_thread())

    def _say_from_thread(self, prefix: str = "resetting") -> Callable[[str], None]:
        """A console writer for a worker thread (a reset's or an upgrade's device work), prefixed."""
        loop, say = asyncio.get_running_loop(), self.parts.say

        def say_from_thread(line: str) -> None:
            loop.call_soon_threadsafe(say, f"{prefix}: {line}")

        return say_from_thread
