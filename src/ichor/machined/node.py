"""A node: the composition root of machined, and nothing else.

Builds one node from its parts — the state and resource registry, the controller runtime with
every controller (:func:`~ichor.machined.controllers.node_controllers`), the service supervisor,
the config store, the API servers and the sequencer — wires them together and runs the sequencer.
:meth:`Node.run` returns the exit code the node's launcher understands
(:data:`~ichor.machined.platform.EXIT_REBOOT`, :data:`~ichor.machined.platform.EXIT_POWEROFF`);
state under the node root survives exactly as a disk would.

Nothing imports this module but the ``python -m ichor.machined`` entry point.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ichor.api.gen.machine import machine_pb2
from ichor.machined.configstore import CONFIG_HISTORY, ConfigStore, LoadedConfig
from ichor.machined.console import Console
from ichor.machined.controllers import node_controllers
from ichor.machined.controllers.network import default_hostname
from ichor.machined.cosi import Registry, Runtime, Source, State
from ichor.machined.events import EventBus
from ichor.machined.kernelargs import KernelArgs
from ichor.machined.memory import IdleTrimmer, glibc_trim
from ichor.machined.partitions import DirectoryPartitions, DiskPartitions, SystemPartitions
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import MACHINE_CONFIGS, MachineStage, register_node_types
from ichor.machined.sequencer import NodeParts, Sequencer
from ichor.machined.services import Service, ServiceInfo, Supervisor
from ichor.machinery.imageversion import running_version

if TYPE_CHECKING:
    from ichor.machined.bootdisk import BootDisk
    from ichor.machined.services.etcd import EtcdService
    from ichor.machined.upgrade import NodeUpgrades, StagedUpgrade

__all__ = ["Node"]


class Node:
    """One Talos node on a platform; :meth:`run` returns the launcher exit code."""

    def __init__(
        self,
        layout: Layout,
        *,
        config_source: Path | None = None,
        clock: Callable[[], datetime] | None = None,
        exit_limit: float | None = None,
    ) -> None:
        """``exit_limit``: the process (machined's entry point) exits at the latest this many seconds
        after a sequence began stopping services (:class:`~ichor.machined.exitdeadline.ExitDeadline`);
        None (an in-process node, tests) sets no such bound."""
        self.layout = layout
        self.config_source = config_source
        self.exit_limit = exit_limit
        self.clock = clock or (lambda: datetime.now(UTC))
        # Every apply stores a new config; a full history would keep the last 1024 alive.
        self.state = State(clock=self.clock, history_of={MACHINE_CONFIGS.type: CONFIG_HISTORY})
        self.registry = Registry()
        self.events = EventBus(clock=self.clock)
        self.boot_id = str(uuid.uuid4())
        """This boot's id: ``read /proc/sys/kernel/random/boot_id`` (a reboot starts a new process)."""
        self.stage: Source[MachineStage] = Source("machine stage", MachineStage.BOOTING)
        self.services: Source[Mapping[str, ServiceInfo]] = Source("services", {})
        self.sequencer: Sequencer | None = None
        self.stopped_at = 0.0
        """``time.monotonic()`` when :meth:`run` ended (the entry point reports its own teardown)."""

    def finish(self, code: int) -> None:
        """Power off or reboot now (the launcher's SIGTERM)."""
        if self.sequencer is not None:
            self.sequencer.finish(code)

    def _on_service_change(self, info: ServiceInfo) -> None:
        self.services.set({**self.services.value, info.id: info})
        last = info.events[-1] if info.events else None
        action = machine_pb2.ServiceStateEvent.Action.Value(info.state.name)
        self.events.publish(
            machine_pb2.ServiceStateEvent(
                service=info.id, action=action, message=last.message if last else ""
            )
        )

    async def run(self) -> int:
        from ichor.machined.services.extensions import follow_configs

        layout, state = self.layout, self.state
        layout.ensure()
        console = Console(layout.console_log, self.clock)
        say = console.print
        register_node_types(self.registry)
        runtime = Runtime(
            state, registry=self.registry, clock=self.clock, log_path=layout.controller_runtime_log
        )
        from ichor.machined.services.etcd import EtcdService

        etcd = EtcdService(layout, state, say, self.clock)
        supervisors: list[Supervisor] = []

        async def kubelet_files_changed() -> None:  # restart a running kubelet on new files
            if supervisors and supervisors[0].is_running("kubelet"):
                await supervisors[0].restart("kubelet")

        async def local_member_id() -> int:  # etcd.MemberController asks this node's etcd only
            async with etcd.client([etcd.local_endpoint()], timeout=5.0) as client:
                return (await client.status()).member_id

        upgrades = self._upgrades(say)
        disk = upgrades.disk if upgrades is not None else None
        controllers = node_controllers(
            layout, stage=self.stage, services=self.services, events=self.events,
            boot_slots=disk.slots if disk else None, meta_keys=disk.meta if disk else None,
            booted_slot=disk.booted if disk else None,
            kubelet_changed=kubelet_files_changed,
            vip_store=lambda: etcd.client(etcd.control_plane_endpoints(include_self=True), timeout=5.0),
            etcd_backup_store=lambda: etcd.client([etcd.local_endpoint()], timeout=10.0),
            say=say,
            local_etcd_member_id=local_member_id, kernel_args=self._kernel_args(),
        )  # fmt: skip
        for controller in controllers:
            runtime.register(controller)
        say(f"Ichor {running_version()}-compatible node booting on {layout.address} (root {layout.root})")
        install, install_check = self._installation()
        store = ConfigStore(layout, state, self.events, say=say, clock=self.clock, source=self.config_source,
                            install_check=install_check)  # fmt: skip
        try:
            async with (
                _running(runtime.run(), "controller-runtime"),
                _running(_trimming_when_idle(), "malloc-trim"),
                Supervisor(layout, clock=self.clock, on_change=self._on_service_change) as supervisor,
            ):
                supervisors.append(supervisor)
                if upgrades is not None:
                    await _start_upgrades(upgrades, say)
                system = _SystemServices(self, runtime, supervisor, store, etcd, upgrades)
                # Extension services start before the config (maintenance mode included): one that
                # runs when its ExtensionServiceConfig arrives or changes is restarted to read it.
                async with _running(follow_configs(state, supervisor), "extension-service-configs"):
                    code = await self._sequence(system, store, upgrades, install, say)
                await _drain(controllers, say)
                return code
        finally:
            self.stopped_at = time.monotonic()
            say("node process exiting")
            console.close()

    async def _sequence(
        self,
        system: _SystemServices,
        store: ConfigStore,
        upgrades: NodeUpgrades | None,
        install: Callable[[LoadedConfig, Callable[[str], None]], None] | None,
        say: Callable[[str], None],
    ) -> int:
        """Build the sequencer over the node's parts and run it (the launcher's exit code)."""
        from ichor.machined.server._maintenance import serve_until_configured

        layout, state, supervisor = self.layout, self.state, system.supervisor
        self.sequencer = Sequencer(NodeParts(
            layout=layout, state=state, events=self.events, store=store, supervisor=supervisor,
            stage=self.stage, say=say, clock=self.clock, services=system.for_config,
            maintenance=lambda: serve_until_configured(
                layout, state, store, hostname=default_hostname(layout.address), say=say, clock=self.clock
            ),
            leave_etcd=system.etcd_ops.leave_before_reset,
            leave_etcd_for_upgrade=system.etcd_ops.leave_for_upgrade,
            background=system.background, install=install,
            staged_upgrade=_staged_upgrade(upgrades) if upgrades is not None else None,
            partitions=system.partitions, early_services=system.early,
            stopping=self._exit_deadline(say), prepare_kexec=self._kexec_prepare(upgrades),
        ))  # fmt: skip
        system.lifecycle = self.sequencer
        return await self.sequencer.run()

    def _exit_deadline(self, say: Callable[[str], None]) -> Callable[[int], None]:
        if self.exit_limit is None:
            return lambda _code: None
        from ichor.machined.exitdeadline import ExitDeadline

        return ExitDeadline(say, limit=self.exit_limit).arm

    def _kexec_prepare(self, upgrades: NodeUpgrades | None) -> Callable[[], str] | None:
        """Talos's KexecPrepare for a node booted from its own disk; None for every other node."""
        if upgrades is None:
            return None
        from ichor.machined.kexecprep import KexecPrepare

        return KexecPrepare(upgrades.disk, proc_sys=self.layout.path("/proc/sys"))

    @functools.cached_property
    def _cmdline(self) -> str | None:
        """``/proc/cmdline`` as the node sees it, read once; None when it cannot be read."""
        try:
            return self.layout.path("/proc/cmdline").read_text()
        except OSError:
            return None

    def _kernel_args(self) -> KernelArgs | None:
        """The node's own kernel command line (metal); None where ``/proc/cmdline`` is the host's."""
        if self.layout.platform is not Platform.METAL or self._cmdline is None:
            return None
        return KernelArgs.from_cmdline(self._cmdline)

    def _upgrades(self, say: Callable[[str], None]) -> NodeUpgrades | None:
        """Upgrades, rollback and META for a node booted from its own disk (its platform lists the
        machine's block devices); None for every other node."""
        layout = self.layout
        if layout.block_devices is None:
            return None
        from ichor.machined.bootdisk import find_boot_disk
        from ichor.machined.upgrade import NodeUpgrades

        disk = find_boot_disk(self._cmdline or "", sys_block=layout.block_devices, mount_parent=layout.path("/run/ichor"),
                              say=say)  # fmt: skip
        if disk is None:
            return None
        return NodeUpgrades(disk, work_dir=layout.path("/var/lib/ichor/upgrade"), say=say, events=self.events)

    def _installation(
        self,
    ) -> tuple[
        Callable[[LoadedConfig, Callable[[str], None]], None] | None,
        Callable[[LoadedConfig], str | None] | None,
    ]:
        """The install step and its check, on a platform that installs to disk and is not installed."""
        layout = self.layout
        if not layout.platform.installs_to_disk or layout.block_devices is None:
            return None, None
        from ichor.machined.installation import DiskInstallation

        disks = DiskInstallation(sys_block=layout.block_devices, state_dir=layout.state_dir)
        if disks.installed():
            return None, None

        def install(loaded: LoadedConfig, printf: Callable[[str], None]) -> None:
            plan = disks.plan(loaded.config)
            printf(plan.summary())
            disks.install(plan, loaded.text, printf)

        return install, lambda loaded: disks.plan(loaded.config).summary()


def _system_partitions(layout: Layout, disk: BootDisk | None) -> SystemPartitions:
    """What a reset wipes: the installed disk's partitions on a node booted from one, else the
    layout's directories."""
    if disk is None:
        return DirectoryPartitions(layout)
    return DiskPartitions(disk.disk, layout, delete_meta_key=disk.meta_delete)


@contextlib.asynccontextmanager
async def _running(work: Coroutine[Any, Any, None] | None, name: str) -> Any:
    """``work`` as a task, for exactly as long as the node runs (nothing when None)."""
    if work is None:
        yield
        return
    task = asyncio.get_running_loop().create_task(work, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _drain(controllers: Sequence[Any], say: Callable[[str], None]) -> None:
    """Talos's drainer at machined's exit, both at once (up to 10 s): a connected event sink gets the
    last events, and the kernel log's last records go to its destinations."""
    from ichor.machined.controllers.event_sink import EventsSinkController
    from ichor.machined.controllers.kmsg_log import KmsgLogDeliveryController

    senders = [c for c in controllers if isinstance(c, EventsSinkController | KmsgLogDeliveryController)]
    for sender, drained in zip(senders, await asyncio.gather(*(s.drain() for s in senders)), strict=True):
        if not drained:
            say(f"{sender.name}: the last events were not all sent before machined stopped")


async def _start_upgrades(upgrades: NodeUpgrades, say: Callable[[str], None]) -> None:
    from ichor.machinery.errors import MachineryError

    try:
        await upgrades.start()
    except (MachineryError, OSError) as err:
        say(f"boot slots: cannot read BOOT or META: {err}")


def _staged_upgrade(
    upgrades: NodeUpgrades,
) -> Callable[[LoadedConfig, Callable[[str], None]], Coroutine[Any, Any, StagedUpgrade | None]]:
    async def run(loaded: LoadedConfig, printf: Callable[[str], None]) -> StagedUpgrade | None:
        from ichor.machined.upgrade import upgrade_inputs
        from ichor.machinery.errors import InstallError

        try:
            mirrors, cmdline = upgrade_inputs(loaded.config)
        except InstallError as err:  # machine.install.extensions: the staged upgrade fails, said why
            return await upgrades.run_staged({}, "", printf, refused=f"{err} ({err.hint})")
        return await upgrades.run_staged(mirrors, cmdline, printf)

    return run


def _trimming_when_idle() -> Coroutine[Any, Any, None] | None:
    """Give freed heap back to the kernel when the node goes idle after load (glibc only)."""
    trim = glibc_trim()
    return IdleTrimmer(trim).run() if trim is not None else None


class _SystemServices:
    """Builds the system services and the API handlers they serve, from the node's parts."""

    def __init__(
        self,
        node: Node,
        runtime: Runtime,
        supervisor: Supervisor,
        store: ConfigStore,
        etcd: EtcdService,
        upgrades: NodeUpgrades | None = None,
    ) -> None:
        from ichor.machined.apid import MachineApi
        from ichor.machined.server._etcd_ops import EtcdOperations

        self.node = node
        self.runtime = runtime
        self.supervisor = supervisor
        self.store = store
        self.etcd = etcd
        self.upgrades = upgrades
        self.partitions = _system_partitions(node.layout, upgrades.disk if upgrades is not None else None)
        self.etcd_ops = EtcdOperations(self.etcd, supervisor)
        self.lifecycle: Any = None
        # The machined service publishes its handlers here and apid calls them in-process.
        self.machine_api = MachineApi()

    def early(self) -> Sequence[Service]:
        """Talos 1.6+'s early services, started before the config is acquired (maintenance mode
        included): syslogd (an extension service that logs to ``/dev/log`` before a config keeps
        its lines, as Talos's ``StartSyslogd`` phase), the system containerd and every extension
        service of the image. (Talos starts machined early too; here the machined service serves the
        configured API and starts with the config: maintenance mode has its own server.)"""
        from ichor.machined import cri
        from ichor.machined.services.containerd import containerd_services
        from ichor.machined.services.extensions import extension_services
        from ichor.machined.services.syslogd import syslogd_service

        layout, state = self.node.layout, self.node.state
        system_containerd = [s for s in containerd_services(layout) if s.id == cri.SYSTEM.service]
        return [syslogd_service(layout), *system_containerd, *extension_services(layout, state)]

    def for_config(self, loaded: LoadedConfig) -> Sequence[Service]:
        """The services a config adds to the early ones (the sequencer leaves those running)."""
        from ichor.machined import cri
        from ichor.machined.services.apid import apid_service
        from ichor.machined.services.containerd import containerd_services
        from ichor.machined.services.kubelet import kubelet_service
        from ichor.machined.services.machined import machined_service
        from ichor.machined.services.trustd import trustd_service

        layout, state = self.node.layout, self.node.state
        services = [
            machined_service(layout, self.handlers, self.machine_api),
            apid_service(layout, state, self.machine_api),
            *[s for s in containerd_services(layout) if s.id != cri.SYSTEM.service],
            kubelet_service(layout, state, report=self.store.say),
        ]
        if loaded.is_control_plane:
            services += [trustd_service(layout, state), self.etcd.service()]
        return services

    def background(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        from ichor.machined.logsend import ship_logs

        work: list[Callable[[], Coroutine[Any, Any, None]]] = [
            lambda: self.etcd.follow_spec(self.supervisor),
            lambda: ship_logs(self.node.state, self.node.layout.log_dir),
        ]
        upgrades = self.upgrades
        if upgrades is not None:
            from ichor.machined.upgrade import node_health

            state = self.node.state
            work.append(lambda: upgrades.bless_when_healthy(
                lambda: node_health(state), reboot=lambda _why: self.lifecycle.request_reboot(""),
            ))  # fmt: skip
        return work

    def handlers(self) -> list[Any]:
        from ichor.machined.server._cluster import ClusterService
        from ichor.machined.server._context import MachineContext
        from ichor.machined.server._cosi import StateService, roles_from_metadata
        from ichor.machined.server._inspect import InspectService
        from ichor.machined.server._machine import MachineService
        from ichor.machined.server._storage import StorageService
        from ichor.machined.server._time import TimeService

        node = self.node
        context = MachineContext(
            layout=node.layout, state=node.state, supervisor=self.supervisor, events=node.events, store=self.store,
            lifecycle=self.lifecycle, etcd=self.etcd_ops, clock=node.clock, say=self.etcd.say,
            boot_id=node.boot_id, upgrades=self.upgrades, partitions=self.partitions,
        )  # fmt: skip
        roles = roles_from_metadata
        return [
            MachineService(context, roles_of=roles),
            StateService(node.state, roles_of=roles),
            StorageService(node.layout),
            ClusterService(context.self_client, roles_of=roles, members=context.member_entries),
            InspectService(self.runtime, roles_of=roles),
            TimeService(context.time_servers, roles_of=roles),
        ]
