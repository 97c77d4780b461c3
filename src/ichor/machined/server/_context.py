"""What the machine API asks of the node, answered from resources and the node's parts.

:class:`MachineContext` implements the services' ``NodeContext``: identity (Version, Hostname) and
the generated client configuration and kubeconfig come from resources; config changes go to the
config store; reboot, shutdown and reset to the sequencer; the etcd RPCs to the etcd operations;
upgrade, rollback and META to the node's :class:`~ichor.machined.upgrade.NodeUpgrades` (only a
node booted from its own disk has one: the others answer Talos's ``container`` mode refusal).
It holds no state of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform as _host
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ichor.api.gen.machine import machine_pb2
from ichor.machined.configstore import ConfigStore
from ichor.machined.cosi import State
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    MEMBERS,
    OS_ROOT_ID,
    OS_ROOT_SECRETS,
)
from ichor.machined.server._etcd_ops import EtcdOperations
from ichor.machined.server._etcd_upgrade import ETCD_SINGLE_MEMBER
from ichor.machined.services import Supervisor
from ichor.machinery import pki
from ichor.machinery.imageversion import running_version

if TYPE_CHECKING:
    from ichor.machined.partitions import SystemPartitions
    from ichor.machined.upgrade import NodeUpgrades

__all__ = ["ETCD_SINGLE_MEMBER", "Lifecycle", "MachineContext"]


class Lifecycle(Protocol):
    """The sequencer's side: what reboot, shutdown and reset requests go to."""

    def request_reboot(self, actor_id: str, mode: int = 0) -> None: ...

    def request_shutdown(self, actor_id: str, force: bool = False) -> None: ...

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None: ...

    def request_upgrade(
        self,
        actor_id: str,
        work: Callable[[Callable[[str], None]], Awaitable[object]],
        mode: int = 0,
        *,
        preserve: bool = True,
    ) -> None: ...

    def request_staged_upgrade(self, actor_id: str, mode: int = 0, *, preserve: bool = True) -> None: ...


UPGRADE_ACK = "Upgrade request received"


class MachineContext:
    def __init__(
        self,
        *,
        layout: Layout,
        state: State,
        supervisor: Supervisor,
        events: EventBus,
        store: ConfigStore,
        lifecycle: Lifecycle,
        etcd: EtcdOperations,
        clock: Callable[[], datetime],
        say: Callable[[str], None] = lambda _: None,
        boot_id: str = "",
        upgrades: NodeUpgrades | None = None,
        partitions: SystemPartitions | None = None,
    ) -> None:
        self.layout = layout
        self.partitions = partitions
        """What a reset may wipe (None: the layout's directories)."""
        self.upgrades = upgrades
        """Upgrade, rollback and META: present on a node booted from its own disk only."""
        self.boot_id = boot_id or str(uuid.uuid4())
        """This node boot's id, what ``/proc/sys/kernel/random/boot_id`` reads on the node."""
        self.say = say
        """Writes a line on the node's console (``talosctl dmesg``)."""
        self.state = state
        self.supervisor = supervisor
        self.events = events
        self.etcd = etcd
        self._store = store
        self._lifecycle = lifecycle
        self._clock = clock

    # --- identity --------------------------------------------------------------------------------

    def hostname(self) -> str:
        status = self.state.spec_of(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        return str(status.fqdn) if status is not None else ""

    def is_control_plane(self) -> bool:
        machine_type = self.state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID)
        return machine_type is not None and machine_type.is_control_plane

    def process_root(self) -> int:
        return os.getpid()

    def version(self) -> machine_pb2.Version:
        from ichor import __version__

        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(_host.machine(), _host.machine())
        reply = machine_pb2.Version(
            version=machine_pb2.VersionInfo(
                tag=running_version(), sha=f"ichor-{__version__}", built="",
                go_version=f"python{_host.python_version()}", os="linux", arch=arch,
            ),
            platform=machine_pb2.PlatformInfo(name=self.layout.platform.value, mode=self.layout.platform.mode),
        )  # fmt: skip
        active = self._store.active
        if active is not None:
            features = active.config.machine.features if active.config.machine is not None else None
            reply.features.rbac = bool(features is not None and features.rbac)
        return reply

    # --- configuration ---------------------------------------------------------------------------

    async def apply_configuration(
        self, request: machine_pb2.ApplyConfigurationRequest
    ) -> machine_pb2.ApplyConfiguration:
        return await self._store.apply(request)

    def _os_ca(self) -> pki.CertKey:
        root = self.state.spec_of(OS_ROOT_SECRETS, OS_ROOT_ID)
        if root is None or root.issuing_ca is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "the node has no OS CA yet (no machine config)")
        return pki.CertKey(root.issuing_ca.crt, root.issuing_ca.key)

    def generate_client_configuration(
        self, roles: list[str], ttl: timedelta
    ) -> machine_pb2.GenerateClientConfiguration:
        from ichor.machinery.clientconfig import Context, TalosConfig

        active = self._store.active
        if not self.is_control_plane() or active is None:
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                "client configuration can only be generated on a control plane node",
            )
        ca = self._os_ca()
        key = pki.new_ed25519_key()
        crt = pki.issue_certificate(
            ca, key, organizations=roles, common_name=None, ttl=ttl, server=False, client=True
        )
        cluster = (active.config.cluster.cluster_name if active.config.cluster else None) or "talos"
        name = f"{roles[0].removeprefix('os:')}@{cluster}" if len(roles) == 1 else cluster
        pair = pki.CertKey(crt, key)
        talosconfig = TalosConfig(context=name, contexts={name: Context(endpoints=[], nodes=[], ca=pki.CertKey(ca.crt, b"").crt_b64(),
                                                                          crt=pair.crt_b64(), key=pair.key_b64())})  # fmt: skip
        return machine_pb2.GenerateClientConfiguration(
            ca=ca.crt, crt=crt, key=key, talosconfig=talosconfig.to_yaml().encode()
        )

    def kubeconfig(self) -> bytes:
        """The admin kubeconfig as Talos streams it: a tar.gz holding one file ``kubeconfig``."""
        from ichor.machinery.kubeconfig import admin_kubeconfig, kubeconfig_archive

        active = self._store.active
        if not self.is_control_plane() or active is None:
            raise GRPCError(Status.UNIMPLEMENTED, "kubeconfig is only available on control plane nodes")
        return kubeconfig_archive(admin_kubeconfig(active.container, now=self._clock()), now=self._clock())

    def generate_configuration(
        self, request: machine_pb2.GenerateConfigurationRequest
    ) -> machine_pb2.GenerateConfiguration:
        """A new machine config and talosconfig from ``request``, with this node's secrets."""
        from ichor.machined.server._genconfig import generate_configuration

        active = self._store.active
        node_type = str(self.state.spec_of(MACHINE_TYPES, MACHINE_TYPE_ID) or "")
        return generate_configuration(
            request, node_type=node_type, node_config=active.text if active is not None else None,
            now=self._clock(),
        )  # fmt: skip

    def time_servers(self) -> list[str]:
        """``machine.time.servers`` of the running config (empty: none named)."""
        active = self._store.active
        time = (
            active.config.machine.time if active is not None and active.config.machine is not None else None
        )
        return [str(s) for s in (time.servers or [])] if time is not None else []

    # --- lifecycle -------------------------------------------------------------------------------

    def request_reboot(self, actor_id: str, mode: int = 0) -> None:
        self._lifecycle.request_reboot(actor_id, mode)

    def request_shutdown(self, actor_id: str, force: bool = False) -> None:
        self._lifecycle.request_shutdown(actor_id, force)

    async def check_reset(self, request: machine_pb2.ResetRequest) -> None:
        """Refuse a reset that could not be carried out as asked, before it starts: Talos 1.7's
        checks of wipe mode, labels and user disks (:func:`~ichor.machinery.reset.plan_reset`, its
        texts, code Unknown as Talos's plain errors), then a graceful reset that cannot leave etcd."""
        from ichor.machined.partitions import DirectoryPartitions
        from ichor.machinery.blockdev import list_disks
        from ichor.machinery.errors import ResetError
        from ichor.machinery.reset import WipeMode, plan_reset

        partitions = self.partitions or DirectoryPartitions(self.layout)
        modes = {machine_pb2.ResetRequest.SYSTEM_DISK: WipeMode.SYSTEM_DISK,
                 machine_pb2.ResetRequest.USER_DISKS: WipeMode.USER_DISKS}  # fmt: skip
        sys_block = self.layout.block_devices

        def plan() -> object:
            return plan_reset(
                modes.get(request.mode, WipeMode.ALL),
                system_labels={spec.label: spec.wipe for spec in request.system_partitions_to_wipe},
                user_disks=list(request.user_disks_to_wipe),
                disks=list_disks(sys_block) if request.user_disks_to_wipe and sys_block is not None else (),
                system_disk=partitions.system_disk,
                partition_labels=partitions.labels() if request.system_partitions_to_wipe else (),
            )

        try:
            await asyncio.to_thread(plan)
        except ResetError as err:
            raise GRPCError(Status.UNKNOWN, str(err)) from None
        if request.graceful:
            await self.etcd.check_graceful_reset()

    def request_reset(self, actor_id: str, request: machine_pb2.ResetRequest) -> None:
        self._lifecycle.request_reset(actor_id, request)

    # --- upgrade, rollback, META (a node booted from its own disk) --------------------------------

    def _upgrades(self) -> NodeUpgrades:
        if self.upgrades is None:  # the machine service refuses first, with Talos's text
            raise GRPCError(Status.FAILED_PRECONDITION, "this node has no boot disk")
        return self.upgrades

    async def upgrade(self, request: machine_pb2.UpgradeRequest, actor_id: str) -> str:
        """Talos's Upgrade: checks, the installer image fetched and checked, then the upgrade (or its
        staging) runs after the reply; returns the ack."""
        from ichor.images import ImageError
        from ichor.machined.upgrade import StagedUpgrade, upgrade_inputs
        from ichor.machinery.errors import InstallError, SlotError

        upgrades = self._upgrades()
        active = self._store.active
        if active is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "the node has no machine config")
        try:
            upgrades.check_trial(force=request.force)
        except SlotError as err:
            raise GRPCError(Status.FAILED_PRECONDITION, f"{err} ({err.hint})") from None
        try:
            mirrors, cmdline = upgrade_inputs(active.config)
        except InstallError as err:  # machine.install.extensions, refused naming the key
            raise GRPCError(Status.FAILED_PRECONDITION, f"{err} ({err.hint})") from None
        self.say(f"upgrade request received: preserve {request.preserve}, staged {request.stage}, "
                 f'force {request.force}; validating "{request.image}"')  # fmt: skip
        try:
            assets = await upgrades.fetch(request.image, mirrors)
        except ImageError as err:
            raise GRPCError(
                Status.UNKNOWN, f'error validating installer image "{request.image}": {err}'
            ) from None
        if self.is_control_plane() and not request.force:  # --force skips the etcd client, mutex and checks
            await self.etcd.validate_for_upgrade(preserve=request.preserve)
        if not request.preserve:
            self.say("upgrade without --preserve: "
                     + ("this node leaves etcd, then " if self.is_control_plane() else "")
                     + "EPHEMERAL is wiped before the reboot")  # fmt: skip
        if request.stage:
            await upgrades.stage(StagedUpgrade(request.image, request.preserve, request.force))
            self._lifecycle.request_staged_upgrade(actor_id, request.reboot_mode, preserve=request.preserve)
            return UPGRADE_ACK

        async def work(printf: Callable[[str], None]) -> None:
            await upgrades.install(assets, cmdline=cmdline, force=request.force, printf=printf)

        self._lifecycle.request_upgrade(actor_id, work, request.reboot_mode, preserve=request.preserve)
        return UPGRADE_ACK

    async def rollback(self, actor_id: str) -> None:
        from ichor.machinery.errors import DiskError

        upgrades = self._upgrades()
        try:
            await upgrades.rollback(actor_id)
        except DiskError as err:
            raise GRPCError(Status.UNKNOWN, str(err)) from None
        self._lifecycle.request_reboot(actor_id, 0)

    async def meta_write(self, key: int, value: bytes) -> None:
        from ichor.machinery.errors import MetaError

        upgrades = self._upgrades()
        if key > 0xFF:
            raise GRPCError(Status.INVALID_ARGUMENT, "key must be a uint8")
        try:
            await upgrades.meta_write(key, value)
        except MetaError as err:
            if str(err) == "meta write failed":
                raise GRPCError(Status.RESOURCE_EXHAUSTED, "meta write failed") from None
            raise GRPCError(Status.UNKNOWN, str(err)) from None

    async def meta_delete(self, key: int) -> None:
        from ichor.machinery.errors import MetaError

        upgrades = self._upgrades()
        if key > 0xFF:
            raise GRPCError(Status.INVALID_ARGUMENT, "key must be a uint8")
        try:
            found = await upgrades.meta_delete(key)
        except MetaError as err:
            raise GRPCError(Status.UNKNOWN, str(err)) from None
        if not found:
            raise GRPCError(Status.NOT_FOUND, "meta key not found")

    # --- cluster health --------------------------------------------------------------------------

    def member_entries(self) -> list[tuple[str, list[str]]]:
        """The discovered cluster members, ``(machine type, addresses)`` each, for health checks."""
        return [
            (m.spec.machine_type, [str(a) for a in m.spec.addresses])
            for m in self.state.list(MEMBERS.default_namespace, MEMBERS)
        ]

    @contextlib.asynccontextmanager
    async def self_client(self) -> AsyncIterator[Any]:
        """A short-lived os:admin client of this control plane's own apid (server-side health checks)."""
        from ichor.client import Client

        os_ca = self._os_ca()
        if not os_ca.has_key:
            raise GRPCError(
                Status.FAILED_PRECONDITION, "run the health check against a control plane node (-n)"
            )
        pair = pki.new_keypair(os_ca, organizations=["os:admin"], common_name=f"{self.hostname()}-health",
                               ttl=timedelta(hours=1), client=True, server=False, now=self._clock())  # fmt: skip
        async with Client(
            endpoints=[self.layout.address], ca=os_ca.crt, crt=pair.crt, key=pair.key
        ) as client:
            yield client
